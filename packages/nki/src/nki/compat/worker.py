"""Run the units of one file in this process and write their outcomes as JSON lines.

    python -m nki.compat.worker FILE... --root ROOT --out RESULTS.jsonl [--timeout SECONDS]

The parent (``nki.compat.runner``) gives a worker a batch of files (starting a process per file
costs seconds); modules a file imported from the repository are dropped before the next one. A
worker that dies mid-batch has reported every file it finished; the parent runs the rest alone.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import signal
import sys
import time

from neuron_sim.trace import global_sink

from ..kernel import Kernel
from .checks import ComparisonLog
from .outcome import CRASH, NO_CHECK, OK, SKIPPED, WRONG, Outcome, UnitTimeout, classify
from .paths import import_paths


class UnitRun:
    """What the unit running now did: its launches (from the runtime's trace records) and
    comparisons, under a time limit."""

    def __init__(self, file: str, root: str, timeout: float):
        self.file, self.root, self.timeout = file, root, timeout
        with open(file, encoding="utf-8") as f:
            self.checks = ComparisonLog(root, with_torch="torch" in f.read())
        self.launches: list = []
        self._handle = global_sink().subscribe(self._record)

    def close(self) -> None:
        global_sink().unsubscribe(self._handle)
        self.checks.restore()

    def _record(self, rec) -> None:
        if rec.kind == "neff":
            self.launches.append(rec)

    def start(self) -> None:
        self.launches.clear()
        self.checks.clear()
        self.started = time.perf_counter()
        signal.signal(signal.SIGALRM, self._expired)
        signal.setitimer(signal.ITIMER_REAL, self.timeout)

    def _expired(self, signum, frame):
        raise UnitTimeout(f"ran past the {self.timeout:.0f} s limit")

    def finish(self, unit: str, error: BaseException | None, skipped: str | None = None, script: bool = False) -> Outcome:
        signal.setitimer(signal.ITIMER_REAL, 0)
        wall = time.perf_counter() - self.started
        if skipped is not None:
            status, detail = SKIPPED, skipped
        elif error is not None:
            status, detail = classify(error, self.root)
        elif script and self.checks.failed:
            # A script that prints np.allclose(...) -> False compared and missed. A test decides
            # itself: assertFalse(np.allclose(out, zeros)) passes on a False.
            status, detail = WRONG, self.checks.failed[0]
        elif script and not self.checks.count:
            status, detail = NO_CHECK, "ran to the end without comparing a result to a reference"
        else:
            status, detail = OK, ""
        kernels = sorted({r.name for r in self.launches})
        return Outcome(os.path.relpath(self.file, self.root), unit, status, detail,
                       sum(r.duration_ns for r in self.launches), round(wall, 3), len(self.launches), kernels)


def run_script(run: UnitRun) -> list[Outcome]:
    run.start()
    error = None
    argv = sys.argv
    sys.argv = [run.file]  # the script's own argument parser sees no arguments, as when run by hand
    try:
        runpy.run_path(run.file, run_name="__main__")
    except SystemExit as exit_:
        if exit_.code not in (None, 0):
            error = RuntimeError(f"the script exited with status {exit_.code}")
    except BaseException as err:  # noqa: BLE001 - every failure of the unit is its outcome
        error = err
    finally:
        sys.argv = argv
    return [run.finish("<script>", error, script=True)]


class _Plugin:
    """Collects one Outcome per test from pytest's reports."""

    def __init__(self, run: UnitRun):
        self.run = run
        self.outcomes: list[Outcome] = []

    def pytest_pycollect_makeitem(self, collector, name, obj):
        """A kernel named ``test_*`` (a unittest-style file's module-level kernel) is not a test."""
        if isinstance(obj, Kernel):
            return []
        return None

    def pytest_collectreport(self, report):
        if report.failed:
            self.outcomes.append(Outcome(os.path.relpath(self.run.file, self.run.root), "<collect>", CRASH,
                                         _collect_error(str(report.longrepr), self.run.root)))

    def pytest_runtest_setup(self, item):
        self.run.start()

    def pytest_runtest_makereport(self, item, call):
        if call.when == "teardown" or (call.when == "setup" and call.excinfo is None):
            return
        if call.when == "call" or call.excinfo is not None:
            error, skipped = None, None
            if call.excinfo is not None:
                if call.excinfo.errisinstance(_skip_exception()):
                    skipped = str(call.excinfo.value)
                else:
                    error = call.excinfo.value
            self.outcomes.append(self.run.finish(item.nodeid.split("::", 1)[-1], error, skipped))


def _collect_error(text: str, root: str) -> str:
    """The exception line of a collection error (pytest's ``E   ...`` lines), with the innermost
    line of the repository's files it names."""
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    message = next((e for e in reversed(errors) if "Error" in e or "error" in e), errors[-1] if errors else text[-300:])
    where = [m for m in re.findall(r"(\S+\.py):(\d+)", text) if os.path.abspath(m[0]).startswith(root)]
    return message + (f" at {os.path.relpath(os.path.abspath(where[-1][0]), root)}:{where[-1][1]}" if where else "")


def _skip_exception():
    import _pytest.outcomes  # the worker runs pytest: a dependency of the tool, not of nki

    return _pytest.outcomes.Skipped


def run_tests(run: UnitRun) -> list[Outcome]:
    import pytest  # the worker runs pytest: a dependency of the tool, not of nki

    plugin = _Plugin(run)
    pytest.main([run.file, "-q", "-p", "no:cacheprovider", "--rootdir", run.root, "-W", "ignore::DeprecationWarning",
                 "--no-header", "-rN"], plugins=[plugin])
    return plugin.outcomes


def is_test_file(path: str) -> bool:
    name = os.path.basename(path)
    return name.startswith("test_") or name.endswith("_test.py")


def forget_modules(root: str) -> None:
    """Drop the modules a file imported from its repository, so the next file of the batch
    imports its own (two folders of one repository may each have a ``utils.py``)."""
    prefix = os.path.abspath(root) + os.sep
    for name, module in list(sys.modules.items()):
        path = getattr(module, "__file__", None)
        if path and os.path.abspath(path).startswith(prefix):  # built-in modules have no file
            del sys.modules[name]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nki.compat.worker")
    parser.add_argument("files", nargs="+")
    parser.add_argument("--root", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    base_path = list(sys.path)
    for file in map(os.path.abspath, args.files):
        sys.path[:] = import_paths(file, root) + base_path
        os.chdir(os.path.dirname(file))  # scripts open files next to themselves
        run = UnitRun(file, root, args.timeout)
        try:
            outcomes = run_tests(run) if is_test_file(file) else run_script(run)
        finally:
            run.close()
            forget_modules(root)
        with open(args.out, "a") as out:
            for o in outcomes:
                out.write(json.dumps(o.to_dict()) + "\n")
            out.write(json.dumps({"done": os.path.relpath(file, root)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
