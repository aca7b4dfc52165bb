"""Generate docs/nki_compatibility.md: ``python -m nki.compat`` over the public NKI repositories.

The repositories and commits are fixed here (``SOURCES``), so the table says exactly which code
it ran. Each source is exported from a local git clone (``git archive``, no work tree needed) into
a scratch folder outside this repository, and its folders are run one by one:

    python tools/nki_compat_table.py --git-dir aws-neuron/nki-samples=PATH.git \
        --git-dir aws-neuron/aws-neuron-sdk=PATH.git --git-dir aws-neuron/nki-library=PATH.git \
        [--scratch /tmp/nki-public] [--json results.jsonl] [--output docs/nki_compatibility.md]

    python tools/nki_compat_table.py --from-json results.jsonl     # re-render an earlier run
    python tools/nki_compat_table.py --from-markdown docs/nki_compatibility.md --only NAME ...

``--only NAME`` runs the sources whose label contains NAME and keeps the other sources' rows of
``--from-json`` (regenerating after a fix to one repository); ``--skip NAME`` leaves them out.
``--from-markdown`` reads those rows back from an earlier generated table instead (when its JSON
is gone): every field the table shows, so times are rounded as printed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

from nki.compat.outcome import Outcome
from nki.compat.report import markdown

# (repository, commit, folders run, why this commit). Each folder is one root: its files import
# from it (and from its src/), as they do when run from there.
SOURCES = [
    ("aws-neuron/nki-samples", "8370e11ba8d894be5e3c687c0772e7e1e889de4c", [""],
     "tutorials, reference and contributed kernels and their tests: the last commit with the reference kernels "
     "(c4b806e removed them)"),
    ("aws-neuron/nki-samples", "6905a68a122f937e68403727759f035ddd144f95", ["src/nki_samples/tutorials"],
     "the tutorials as updated at the head of main"),
    ("aws-neuron/aws-neuron-sdk", "81ce03ae261e12925e53437a0f690478e6366155", ["nki/examples", "nki/test"],
     "NKI examples and API unit tests at the head of master"),
    ("aws-neuron/aws-neuron-sdk", "8a38e733bccfed2994a45e7fc09d72bd9f3f1fe4", ["general/nki/examples", "general/nki/test"],
     "the legacy general/nki copies: the last commit with them (1db4d74 removed them)"),
    ("aws-neuron/nki-library", "d2ad3a579498d1888aa8740af97fd325dd5f2740", [""],
     "the library's kernels through its tests in their CPU-simulation mode (NKILIB_TEST_MODE=simulation), "
     "at the head of main"),
]
# Environment a source's tests need: nki-library's tests compile with neuronx-cc and run on a
# remote Trainium host unless told to use the CPU simulator (nki_cpu_simulator, which nki serves).
ENVIRONMENT = {"aws-neuron/nki-library": {"NKILIB_TEST_MODE": "simulation"}}
# Files a source imports that its public snapshot lacks, written into the export (never into this
# repository): nki-library's conftest imports its remote-host core locking and its hardware-trace
# analysis, whose modules test/utils/scripts/remote_lock_scripts.py and
# test/utils/perf_analysis_private.py are not in the public repository. Simulation mode neither
# locks a host nor analyses a trace; these stand-ins only let the conftest import (and raise if called).
_LOCK_SCRIPTS = '''"""Written by nki_compat_table.py: the public nki-library snapshot lacks this module, which only
its remote-host core locking uses (not reached in simulation mode)."""
import enum


class LockStatus(enum.Enum):
    ALLOCATED, NO_CORES, DRAINING, DRAINED, UNDRAINED, RELEASED, ERROR, FLOCK_TIMEOUT = range(8)

    @property
    def exit_code(self):
        return self.value

    @classmethod
    def from_exit_code(cls, code):
        raise RuntimeError("remote-host core locking is not part of the public nki-library snapshot")


class LockResult:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("remote-host core locking is not part of the public nki-library snapshot")
'''
_PERF_ANALYSIS = '''"""Written by nki_compat_table.py: the public nki-library snapshot lacks this module (profile
analysis of hardware runs; not reached in simulation mode)."""


def analyze_trace(*args, **kwargs):
    raise RuntimeError("trace analysis is not part of the public nki-library snapshot")
'''
HARNESS_GAPS = {"aws-neuron/nki-library": {"test/utils/scripts/__init__.py": "",
                                           "test/utils/scripts/remote_lock_scripts.py": _LOCK_SCRIPTS,
                                           "test/utils/perf_analysis_private.py": _PERF_ANALYSIS}}
# Bugs of a source's harness that stop every test after the kernel ran, fixed in the export:
# (file, text, replacement). nki-library's Orchestrator reads self._compiled_kernel, which it sets
# only when it compiles - never in simulation mode (AttributeError after each kernel's run).
HARNESS_BUGS = {"aws-neuron/nki-library": [
    ("test/utils/test_orchestrator.py", "if not self._compiled_kernel or", 'if not getattr(self, "_compiled_kernel", None) or'),
]}

HEADER = """# NKI compatibility

Generated by `python tools/nki_compat_table.py` ({when}; unit limit {timeout:.0f} s). Every test
and script of the public NKI repositories below ran with `python -m nki.compat` on the simulated
NeuronCore, each against its own reference (its asserts, `np.allclose` / `torch.allclose` /
`assert_close` calls): **ok** - it ran and matched; **wrong** - a comparison failed; **rejected** -
nki refused the kernel (the hardware rule and the kernel line are given); **crash** - anything
else raised; **timeout**; **skipped** - the test skipped itself; **no-check** - a script ran to the
end without comparing to a reference. "ok %" is ok over the units that ran (not skipped). Device
time is the simulated time of the unit's NKI launches; wall time is the unit's own.

Sources (repository @ commit, folders):

{sources}
"""


def label(repo: str, commit: str, folder: str) -> str:
    return f"{repo}@{commit[:7]}" + (f" {folder}" if folder else "")


def export(git_dir: str, commit: str, into: str, gaps: dict, bugs: list) -> None:
    os.makedirs(into, exist_ok=True)
    archive = subprocess.run(["git", f"--git-dir={git_dir}", "archive", commit], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    for path, text in gaps.items():
        if not os.path.exists(os.path.join(into, path)):
            os.makedirs(os.path.dirname(os.path.join(into, path)), exist_ok=True)
            with open(os.path.join(into, path), "w") as f:
                f.write(text)
    for path, text, replacement in bugs:
        with open(os.path.join(into, path)) as f:
            source = f.read()
        if text not in source:
            raise SystemExit(f"{path} no longer contains {text!r}: review HARNESS_BUGS")
        with open(os.path.join(into, path), "w") as f:
            f.write(source.replace(text, replacement))


def run_folder(path: str, name: str, timeout: float, file_timeout: float, env: dict) -> list[Outcome]:
    with tempfile.NamedTemporaryFile("r", suffix=".jsonl", delete=False) as out:
        results = out.name
    subprocess.run([sys.executable, "-m", "nki.compat", path, "--timeout", str(timeout), "--file-timeout",
                    str(file_timeout), "--json", results, "--label", f"{path}={name}"], check=True,
                   stdout=subprocess.DEVNULL, env={**os.environ, **env})
    with open(results) as f:
        outcomes = [Outcome(**{k: v for k, v in json.loads(line).items() if k != "repository"}) for line in f]
    os.unlink(results)
    return outcomes


def read_json(path: str) -> dict[str, list[Outcome]]:
    groups: dict[str, list[Outcome]] = {}
    with open(path) as f:
        for line in f:
            record = json.loads(line)
            groups.setdefault(record.pop("repository"), []).append(Outcome(**record))
    return groups


def _cells(row: str) -> list[str]:
    """The cells of a Markdown table row, with ``\\|`` (an escaped pipe) kept inside its cell."""
    cells, cell, i = [], "", 1  # skip the leading pipe
    while i < len(row.rstrip()) - 1:
        if row[i] == "\\" and row[i + 1] == "|":
            cell, i = cell + "|", i + 2
            continue
        if row[i] == "|":
            cells.append(cell.strip())
            cell = ""
        else:
            cell += row[i]
        i += 1
    return cells + [cell.strip()]


def read_markdown(path: str) -> dict[str, list[Outcome]]:
    """The per-source unit tables of a table this tool generated, back as outcomes."""
    groups: dict[str, list[Outcome]] = {}
    name = None
    with open(path) as f:
        for line in f:
            if line.startswith("## "):
                name = line[3:].strip()
                groups[name] = []
            elif name and line.startswith("| ") and not line.startswith(("| status ", "|---")):
                status, file, unit, kernels, device_us, wall_s, detail = _cells(line)
                groups[name].append(Outcome(file=file.strip("`"), unit=unit.strip("`"), status=status, detail=detail,
                                            device_ns=float(device_us) * 1e3, wall_s=float(wall_s),
                                            kernels=kernels.split(", ") if kernels else [],
                                            launches=len(kernels.split(", ")) if kernels else 0))
    return groups


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", action="append", default=[], metavar="OWNER/NAME=PATH",
                        help="a local git clone (bare or not) of a repository in SOURCES")
    parser.add_argument("--scratch", default=os.path.join(tempfile.gettempdir(), "nki-public"),
                        help="where the commits are exported (outside this repository)")
    parser.add_argument("--from-json", help="outcomes of an earlier run (--json) to render or to complete")
    parser.add_argument("--from-markdown", help="an earlier generated table whose rows to render or to complete")
    parser.add_argument("--only", help="run only the sources whose label contains this text")
    parser.add_argument("--skip", help="do not run the sources whose label contains this text")
    parser.add_argument("--json", help="write every outcome here (JSON lines)")
    parser.add_argument("--output", default=os.path.join(os.path.dirname(__file__), "..", "docs", "nki_compatibility.md"))
    parser.add_argument("--note", default="", help="a paragraph for the header (how this run went)")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per unit")
    parser.add_argument("--file-timeout", type=float, default=1800.0, help="seconds per file")
    args = parser.parse_args(argv)
    git_dirs = dict(item.split("=", 1) for item in args.git_dir)
    groups = read_json(args.from_json) if args.from_json else read_markdown(args.from_markdown) if args.from_markdown else {}
    for repo, commit, folders, _ in SOURCES:
        for folder in folders:
            name = label(repo, commit, folder)
            if not (args.only in name if args.only else not groups) or (args.skip and args.skip in name):
                continue
            if repo not in git_dirs:
                parser.error(f"--git-dir {repo}=PATH is needed to run {name}")
            root = os.path.join(args.scratch, repo.replace("/", "+") + "@" + commit[:7])
            if not os.path.isdir(root):
                export(git_dirs[repo], commit, root, HARNESS_GAPS.get(repo, {}), HARNESS_BUGS.get(repo, []))
            print(f"running {name}", file=sys.stderr, flush=True)
            groups[name] = run_folder(os.path.join(root, folder), name, args.timeout, args.file_timeout,
                                      ENVIRONMENT.get(repo, {}))
    if args.json:
        with open(args.json, "w") as f:
            for name, outcomes in groups.items():
                for o in outcomes:
                    f.write(json.dumps({"repository": name, **o.to_dict()}) + "\n")
    order = [label(r, c, f) for r, c, folders, _ in SOURCES for f in folders]
    ordered = [(name, groups[name]) for name in order if name in groups]
    sources = "\n".join(f"* `{r}` @ `{c}` - {', '.join(f'`{f}`' if f else 'the whole repository' for f in folders)}: {why}"
                        for r, c, folders, why in SOURCES)
    header = HEADER.format(when=time.strftime("%Y-%m-%d"), timeout=args.timeout, sources=sources)
    if args.note:
        header += "\n" + args.note.strip() + "\n"
    with open(args.output, "w") as f:
        f.write(markdown(ordered, header))
    return 0


if __name__ == "__main__":
    sys.exit(main())
