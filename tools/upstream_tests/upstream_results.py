"""Reading the plugin's event lines back into per-file results, and aggregating them.

No torch here: the runner's bookkeeping and the report are plain data, so they can be tested
(and a report re-rendered from saved results) without running a single PyTorch test.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field

# Outcomes a test can end with. "crashed" (the process died inside it) and "not_run" (the file's
# wall bound ended the run before it finished) are the runner's; the others the plugin's.
OUTCOMES = ("passed", "failed", "error", "timeout", "crashed", "not_run", "skipped", "xfailed", "xpassed")
BROKEN = ("failed", "error", "timeout", "crashed", "xpassed")


@dataclass
class TestResult:
    nodeid: str
    outcome: str
    message: str = ""
    ops: dict | None = None


@dataclass
class FileResult:
    name: str
    collected: int = 0
    results: dict[str, TestResult] = field(default_factory=dict)
    collect_errors: list[tuple[str, str]] = field(default_factory=list)
    running: str | None = None  # a test that started and never reported (the process died in it)

    def counts(self) -> Counter:
        counts = Counter(r.outcome for r in self.results.values())
        counts["not_run"] = max(0, self.collected - len(self.results))
        return counts

    def enabled(self) -> int:
        """Tests PyTorch's own decorators and our environment let run: everything collected but
        the skipped ones (a test that timed out, crashed or was never reached still counts)."""
        return self.collected - self.counts()["skipped"]

    def passing(self) -> int:
        """Passed, plus upstream's expected failures that failed as expected."""
        counts = self.counts()
        return counts["passed"] + counts["xfailed"]

    def pass_rate(self) -> float | None:
        enabled = self.enabled()
        return self.passing() / enabled if enabled else None


def read_events(path: str) -> list[dict]:
    """The event lines of one results file; a torn last line (the process was killed while
    writing it) is ignored."""
    events = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return events


def file_result(name: str, events: list[dict]) -> FileResult:
    """Fold the events of all attempts at one file. The first ``collected`` count is the file's
    size (later attempts collect only what an earlier one did not finish); a later result for the
    same test replaces an earlier one."""
    result = FileResult(name)
    seen_collected = False
    for event in events:
        kind = event.get("event")
        if kind == "collected" and not seen_collected:
            result.collected = event["count"]
            seen_collected = True
        elif kind == "collect_error":
            result.collect_errors.append((event["nodeid"], event["message"]))
        elif kind == "start":
            result.running = event["nodeid"]
        elif kind == "result":
            result.results[event["nodeid"]] = TestResult(event["nodeid"], event["outcome"],
                                                         event.get("message", ""), event.get("ops"))
            if result.running == event["nodeid"]:
                result.running = None
    return result


# -- failure reasons -------------------------------------------------------------------------

# Not inside a name (float32, int64 stay) nor a 0x address (its own placeholder).
_NUMBER = re.compile(r"(?<![A-Za-z_\d])[-+]?\d+(\.\d+)?([eE][-+]?\d+)?(?![xX\d])")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_SPACE = re.compile(r"\s+")
REASON_WIDTH = 160


def reason_key(message: str) -> str:
    """One failure class for messages that differ only in numbers (sizes, indices, values,
    addresses): the first line, numbers as N, at most REASON_WIDTH characters."""
    line = next((part.strip() for part in message.splitlines() if part.strip()), "(no message)")
    line = _HEX.sub("0x?", line)
    line = _NUMBER.sub("N", line)
    line = _SPACE.sub(" ", line)
    return line if len(line) <= REASON_WIDTH else line[: REASON_WIDTH - 3] + "..."


@dataclass
class Reason:
    key: str
    count: int
    files: list[str]
    example: str  # a nodeid
    example_message: str


def failure_reasons(files: list[FileResult]) -> list[Reason]:
    """Failure classes over all files, most frequent first (ties by text, so the order is
    deterministic)."""
    groups: dict[str, list[tuple[str, TestResult]]] = defaultdict(list)
    for f in files:
        for r in sorted(f.results.values(), key=lambda r: r.nodeid):
            if r.outcome in BROKEN:
                groups[f"{r.outcome}: {reason_key(r.message)}"].append((f.name, r))
        for nodeid, message in f.collect_errors:
            groups[f"collect error: {reason_key(message)}"].append((f.name, TestResult(nodeid, "error", message)))
    reasons = []
    for key, members in groups.items():
        names = sorted({name for name, _ in members})
        first = members[0][1]
        reasons.append(Reason(key, len(members), names, first.nodeid, first.message))
    return sorted(reasons, key=lambda r: (-r.count, r.key))


# -- ops that ran where ------------------------------------------------------------------------

@dataclass
class OpUse:
    op: str
    tests: int = 0           # tests in which the op ran on neuron tensors
    fallback_tests: int = 0  # ... of which it fell back to CPU kernels
    reason: str = ""

    @property
    def where(self) -> str:
        if self.fallback_tests == 0:
            return "device"
        return "CPU fallback" if self.fallback_tests == self.tests else "mixed"


def op_uses(f: FileResult) -> list[OpUse]:
    """Per ATen op: in how many of the file's tests it ran, and in how many it fell back."""
    uses: dict[str, OpUse] = {}
    for r in sorted(f.results.values(), key=lambda r: r.nodeid):
        if not r.ops:
            continue
        for op in r.ops.get("executed", []):
            uses.setdefault(op, OpUse(op)).tests += 1
        for op in r.ops.get("fallback", []):
            use = uses.setdefault(op, OpUse(op))
            use.fallback_tests += 1
            use.reason = r.ops.get("reasons", {}).get(op, use.reason)
    return sorted(uses.values(), key=lambda u: u.op)
