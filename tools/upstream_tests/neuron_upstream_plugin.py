"""pytest plugin loaded into each PyTorch test-file run (``-p neuron_upstream_plugin``).

It writes one JSON line per event to ``--upstream-results`` and flushes each line at once, so a
run killed by a crash (SIGSEGV/SIGABRT inside a compiler) or by the runner's wall bound still
leaves everything up to the test that was running:

* ``{"event": "collected", "count": N}`` after collection (and after ``--upstream-skip-file``
  removed the tests an earlier, crashed run of the same file already finished);
* ``{"event": "collect_error", "nodeid": ..., "message": ...}`` for a module that fails to import;
* ``{"event": "start", "nodeid": ...}`` before a test runs;
* ``{"event": "result", "nodeid", "outcome", "message", "ops"}`` after it: outcome is
  passed / failed / error / skipped / xfailed / xpassed / timeout, ``ops`` the ATen ops that ran on
  neuron tensors during the test and which of them fell back to CPU kernels
  (``torch_neuronx.get_executed_ops()`` / ``get_fallback_ops()``, cleared before each test).

Per-test time bound (``--upstream-test-timeout``): a SIGALRM raises ``UpstreamTestTimeout`` in
the test (recorded as ``timeout``; the process then exits with EXIT_AFTER_TIMEOUT, as what the
alarm interrupted may be left half done, and the runner resumes after the test); a test stuck where Python cannot interrupt it (a C call that
never returns) is ended by faulthandler ``--upstream-grace`` seconds later, which exits the process - the
runner then records the test that was running as ``timeout`` and resumes after it.
"""

from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys

import pytest

STACKS_SUFFIX = ".stacks"
EXIT_AFTER_TIMEOUT = 75  # the process ends after a timed-out test; the runner restarts it
MESSAGE_LIMIT = 4000


class UpstreamTestTimeout(BaseException):
    """Raised in a test that ran past the per-test bound. A BaseException, so the test's own
    ``except Exception`` or ``assertRaises`` cannot swallow it."""


def pytest_addoption(parser):
    group = parser.getgroup("neuron-upstream")
    group.addoption("--upstream-results", default=None, help="JSON-lines file the events are appended to")
    group.addoption("--upstream-skip-file", default=None,
                    help="file of node ids (one a line) already finished by an earlier run: deselected")
    group.addoption("--upstream-test-timeout", type=float, default=0.0, help="seconds per test (0: no bound)")
    group.addoption("--upstream-grace", type=float, default=30.0,
                    help="seconds past the bound before a test that ignores the alarm ends the process")


class _Recorder:
    def __init__(self, path: str, timeout: float, grace: float):
        self._out = open(path, "a", encoding="utf-8")
        # faulthandler's stacks go to a file of their own: pytest captures fd 2 during a test,
        # and what it captured is lost when faulthandler ends the process.
        self.stacks = open(path + STACKS_SUFFIX, "a", encoding="utf-8")
        self.timeout = timeout
        self.grace = grace
        self._outcomes: dict[str, tuple[str, str]] = {}
        self._tracking = None

    def write(self, **record) -> None:
        self._out.write(json.dumps(record, sort_keys=True) + "\n")
        self._out.flush()
        os.fsync(self._out.fileno())

    def tracking(self):
        """torch_neuronx's op tracking, once the test file imported it (PyTorch's test base
        needs the backend registered; we never import it first ourselves)."""
        if self._tracking is None and "torch_neuronx" in sys.modules:
            self._tracking = sys.modules["torch_neuronx"]
        return self._tracking

    # -- per test -----------------------------------------------------------------------------
    def start(self, nodeid: str) -> None:
        self._outcomes.pop(nodeid, None)
        tnx = self.tracking()
        if tnx is not None:
            tnx.clear_op_tracking()
        self.write(event="start", nodeid=nodeid)

    def phase(self, report) -> None:
        """Keep the outcome of the first phase that did not pass (a failed setup is an error,
        the call's failure a failure); a skip in any phase is a skip."""
        if report.nodeid in self._outcomes and self._outcomes[report.nodeid][0] != "passed":
            return
        outcome = _outcome(report)
        if outcome != "passed" or report.when == "call":
            self._outcomes[report.nodeid] = (outcome, _message(report))

    def finish(self, nodeid: str) -> str:
        outcome, message = self._outcomes.pop(nodeid, ("error", "no phase reported"))
        ops = None
        tnx = self.tracking()
        if tnx is not None:
            ops = {"executed": tnx.get_executed_ops(), "fallback": tnx.get_fallback_ops(),
                   "reasons": tnx.get_fallback_reasons()}
        self.write(event="result", nodeid=nodeid, outcome=outcome, message=message[:MESSAGE_LIMIT], ops=ops)
        return outcome


def _outcome(report) -> str:
    if hasattr(report, "wasxfail"):
        return "xfailed" if report.skipped else "xpassed"
    if report.skipped:
        return "skipped"
    if report.passed:
        return "passed"
    text = str(report.longrepr) if report.longrepr is not None else ""
    if UpstreamTestTimeout.__name__ in text:
        return "timeout"
    return "failed" if report.when == "call" else "error"


def _message(report) -> str:
    """The one line that says why: the exception's line for a failure, the reason for a skip."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple) and len(longrepr) == 3:  # skip: (path, line, reason)
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    if crash is not None and crash.message:
        return crash.message
    lines = [line for line in str(longrepr).splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("E ")]
    return (errors[0][1:].strip() if errors else lines[-1] if lines else "")


_recorder: _Recorder | None = None


def pytest_configure(config):
    global _recorder
    path = config.getoption("--upstream-results")
    if path:
        _recorder = _Recorder(path, config.getoption("--upstream-test-timeout"), config.getoption("--upstream-grace"))


def pytest_collection_modifyitems(session, config, items):
    skip_file = config.getoption("--upstream-skip-file")
    if skip_file and os.path.exists(skip_file):
        with open(skip_file, encoding="utf-8") as f:
            done = {line.strip() for line in f if line.strip()}
        kept = [item for item in items if item.nodeid not in done]
        config.hook.pytest_deselected(items=[item for item in items if item.nodeid in done])
        items[:] = kept
    if _recorder is not None:
        _recorder.write(event="collected", count=len(items))


def pytest_collectreport(report):
    if _recorder is not None and report.failed:
        _recorder.write(event="collect_error", nodeid=report.nodeid, message=_message(report))


def _on_alarm(signum, frame):
    raise UpstreamTestTimeout(f"test ran past the per-test bound of {_recorder.timeout:g} s")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    if _recorder is None:
        yield
        return
    _recorder.start(item.nodeid)
    bounded = _recorder.timeout > 0
    if bounded:
        previous = signal.signal(signal.SIGALRM, _on_alarm)
        signal.setitimer(signal.ITIMER_REAL, _recorder.timeout)
        faulthandler.dump_traceback_later(_recorder.timeout + _recorder.grace, exit=True, file=_recorder.stacks)
    try:
        yield
    finally:
        if bounded:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
            signal.signal(signal.SIGALRM, previous)


def pytest_runtest_logreport(report):
    if _recorder is not None:
        _recorder.phase(report)
        if report.when == "teardown" and _recorder.finish(report.nodeid) == "timeout":
            # The alarm interrupted whatever the test was in - a compile, a cache insert, a
            # launch - and may have left that half done, so nothing later in this process is
            # trusted: it ends, and the runner starts the file again after this test.
            os._exit(EXIT_AFTER_TIMEOUT)
