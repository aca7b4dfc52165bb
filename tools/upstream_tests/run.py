"""Run PyTorch's own device-generic test files on `neuron` and write docs/upstream_tests.md.

    python tools/upstream_tests/run.py --test-dir /path/to/pytorch/test \\
        --files test_view_ops test_shape_ops --out docs/upstream_tests.md
    python tools/upstream_tests/run.py --from-results WORK_DIR --files ... --out ...  # re-render only

Each file runs in its own pytest process (our plugin, neuron_upstream_plugin.py, records every
test as it ends), bounded per test (--test-timeout) and per file (--file-timeout). A process that
dies inside a test (a crash in a compiler, a hang only faulthandler could end), or ends itself
after a timed-out test, is restarted with the finished tests deselected, so one bad test costs one
test, not the file. See README.md.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from neuron_upstream_plugin import EXIT_AFTER_TIMEOUT, STACKS_SUFFIX  # noqa: E402
from upstream_page import read_page  # noqa: E402
from upstream_report import RunInfo, render  # noqa: E402
from upstream_results import file_result, read_events  # noqa: E402

# The environment each test process gets: PyTorch's test base instantiates the tests for the
# privateuse1 backend (torch_neuronx, autoloaded by `import torch`, renames it "neuron" and
# registers torch.neuron) and for nothing else. PyTorch's CI-only behaviour (CI=... turns on its
# reruns, report paths and CI hypothesis profile) and any PYTORCH_TEST_* switch of the caller's
# shell are dropped, so a run means the same everywhere.
TEST_ENV = {"PYTORCH_TESTING_DEVICE_ONLY_FOR": "neuron", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
DROPPED_ENV = {"CI", "PYTEST_ADDOPTS"}
DROPPED_ENV_PREFIX = "PYTORCH_TEST"
MAX_RESTARTS = 20


def child_env(neff_cache: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DROPPED_ENV and not k.startswith(DROPPED_ENV_PREFIX)}
    env.update(TEST_ENV)
    env["PYTHONPATH"] = os.pathsep.join([HERE, *filter(None, [env.get("PYTHONPATH")])])
    if neff_cache:
        env["TORCH_NEURONX_NEFF_CACHE_DIR"] = neff_cache
    return env


def pytest_command(test_file: str, results: str, skip_file: str, ini: str, test_timeout: float,
                   grace: float) -> list[str]:
    # -c: our empty ini, so no pytest.ini of the checkout (or above it) adds options;
    # --noconftest: PyTorch's test/conftest.py (sharding, its own reports) stays out;
    # -p no:cacheprovider: nothing written into the checkout.
    return [sys.executable, "-m", "pytest", test_file, "-q", "-p", "neuron_upstream_plugin", "-p", "no:cacheprovider",
            "--noconftest", "-c", ini, "--rootdir", os.path.dirname(test_file),
            f"--upstream-results={results}", f"--upstream-skip-file={skip_file}",
            f"--upstream-test-timeout={test_timeout:g}", f"--upstream-grace={grace:g}"]


def _record(path: str, **event) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(event, sort_keys=True) + "\n")


def _read(path: str, start: int = 0) -> str:
    """What a log holds from byte ``start`` on ("" if it does not exist)."""
    if not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        f.seek(start)
        return f.read().decode("utf-8", errors="replace")


def _ended_by(stderr_tail: str, new_stacks: str, returncode: int) -> tuple[str, str]:
    """How a process that died in a test ended: (outcome, message) for that test.
    ``stderr_tail``, ``new_stacks``: what the process and faulthandler wrote during this attempt."""
    if new_stacks.startswith("Timeout ("):  # faulthandler.dump_traceback_later's headline
        return "timeout", "stuck past the per-test bound where Python could not interrupt it; ended by faulthandler"
    if returncode < 0:
        return "crashed", f"process killed by {signal.Signals(-returncode).name}"
    fatal = [line for line in stderr_tail.splitlines() if line.startswith("Fatal Python error")]
    return "crashed", fatal[-1] if fatal else f"process exited with status {returncode} inside the test"


def run_file(test_dir: str, name: str, work_dir: str, *, test_timeout: float, file_timeout: float,
             neff_cache: str | None, grace: float = 30.0, resume: bool = False, log=print) -> None:
    """Run one test file to the end (restarting after crashes) within file_timeout seconds;
    its events go to WORK_DIR/<name>.jsonl. ``grace``: how long past the per-test bound a test
    that ignores the alarm may run before faulthandler ends the process. ``resume``: keep the
    results of an earlier run of this file and run only the tests it did not finish."""
    test_file = os.path.join(test_dir, name + ".py")
    results = os.path.join(work_dir, name + ".jsonl")
    skip_file = os.path.join(work_dir, name + ".done")
    stderr_path = os.path.join(work_dir, name + ".log")
    stacks_path = results + STACKS_SUFFIX
    ini = os.path.join(work_dir, "pytest.ini")
    with open(ini, "w", encoding="utf-8") as f:
        f.write("[pytest]\n")
    if not resume:
        for path in (results, skip_file, stderr_path, stacks_path):
            if os.path.exists(path):
                os.remove(path)
    elif os.path.exists(results):
        _write_done(results, skip_file, name)
    deadline = time.monotonic() + file_timeout
    env = child_env(neff_cache)
    for attempt in range(MAX_RESTARTS + 1):
        seen_log, seen_stacks = (os.path.getsize(p) if os.path.exists(p) else 0 for p in (stderr_path, stacks_path))
        with open(stderr_path, "a", encoding="utf-8") as err:
            proc = subprocess.Popen(pytest_command(test_file, results, skip_file, ini, test_timeout, grace), env=env,
                                    cwd=work_dir, stdout=err, stderr=err, start_new_session=True)
            try:
                returncode = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                returncode = None
        state = file_result(name, read_events(results))
        if returncode is None:
            # The test that was running is not blamed: it counts as not run, with the rest.
            log(f"  {name}: wall bound of {file_timeout:g} s reached in {state.running}")
            return
        if state.running is not None:
            outcome, message = _ended_by(_read(stderr_path, seen_log), _read(stacks_path, seen_stacks), returncode)
            log(f"  {name}: {outcome} in {state.running} ({message})")
            _record(results, event="result", nodeid=state.running, outcome=outcome, message=message, ops=None)
        if state.running is None and returncode != EXIT_AFTER_TIMEOUT:
            return  # pytest ran to its end (exit 0 all passed, 1 some failed, 2+ its own error: in the log)
        if attempt == MAX_RESTARTS:
            log(f"  {name}: {MAX_RESTARTS} restarts, giving up")
            return
        _write_done(results, skip_file, name)


def _write_done(results: str, skip_file: str, name: str) -> None:
    """The tests the results already hold, for the next attempt to deselect."""
    with open(skip_file, "w", encoding="utf-8") as f:
        f.write("\n".join(sorted(file_result(name, read_events(results)).results)) + "\n")


def missing_testing_imports(test_file: str) -> list[str]:
    """The names a test file imports from torch.testing that this torch does not have (the file
    may be from another PyTorch version than ours)."""
    with open(test_file, encoding="utf-8") as f:
        tree = ast.parse(f.read(), test_file)
    missing = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch.testing"):
            try:
                module = importlib.import_module(node.module)
            except ImportError:
                missing.append(node.module)
                continue
            missing += [f"{node.module}.{a.name}" for a in node.names if a.name != "*" and not hasattr(module, a.name)]
    return sorted(set(missing))


def read_sources(test_dir: str) -> dict[str, str]:
    """Where each file came from: SOURCES.json in the test directory ({"test_x": "..."}), if any."""
    path = os.path.join(test_dir, "SOURCES.json")
    if not os.path.exists(path):
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def repo_commit() -> str:
    try:
        return subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--test-dir", required=True, help="PyTorch's test/ directory (or a partial copy)")
    parser.add_argument("--files", nargs="+", required=True, help="test files without .py, e.g. test_view_ops")
    parser.add_argument("--out", default=os.path.join(ROOT, "docs", "upstream_tests.md"))
    parser.add_argument("--work-dir", default=os.path.join("/tmp", "neuron-upstream-tests"),
                        help="results (JSON lines), logs and the default NEFF cache")
    parser.add_argument("--test-timeout", type=float, default=120.0, help="seconds per test")
    parser.add_argument("--file-timeout", type=float, default=3600.0, help="seconds per file")
    parser.add_argument("--neff-cache", default=None, help="NEFF cache directory (default WORK_DIR/neff-cache)")
    parser.add_argument("--from-results", action="store_true", help="render from WORK_DIR's results, run nothing")
    parser.add_argument("--resume", action="store_true",
                        help="keep WORK_DIR's results and run only the tests they do not hold (e.g. after a wall bound)")
    parser.add_argument("--keep-rows-from", metavar="PAGE", default=None,
                        help="an earlier page: keep its rows of the files not in --files (their counts join the totals)")
    args = parser.parse_args(argv)

    os.makedirs(args.work_dir, exist_ok=True)
    names = sorted(dict.fromkeys(args.files))
    for name in names:
        if not os.path.exists(os.path.join(args.test_dir, name + ".py")):
            parser.error(f"--files: {name}.py is not in --test-dir {args.test_dir}")
    if not args.from_results:
        for name in names:
            print(f"running {name}", flush=True)
            run_file(args.test_dir, name, args.work_dir, test_timeout=args.test_timeout,
                     file_timeout=args.file_timeout, resume=args.resume,
                     neff_cache=args.neff_cache or os.path.join(args.work_dir, "neff-cache"))
    files = []
    for name in names:
        path = os.path.join(args.work_dir, name + ".jsonl")
        files.append(file_result(name, read_events(path) if os.path.exists(path) else []))

    kept = None
    if args.keep_rows_from:
        with open(args.keep_rows_from, encoding="utf-8") as f:
            text = f.read()
        kept = read_page(text, exclude=set(names))

    import torch  # only now: the report names the torch the tests ran against

    command = "python tools/upstream_tests/run.py " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:]) if a not in ("--from-results", "--resume"))
    info = RunInfo(command=command, commit=repo_commit(), torch_version=torch.__version__.split("+")[0],
                   test_timeout=args.test_timeout, file_timeout=args.file_timeout,
                   sources=read_sources(args.test_dir),
                   missing_imports={n: missing_testing_imports(os.path.join(args.test_dir, n + ".py")) for n in names})
    with open(args.out, "w", encoding="utf-8") as f:
        f.write(render(files, info, kept))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
