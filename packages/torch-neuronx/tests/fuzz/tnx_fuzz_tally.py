"""How many programs a fuzz run checked, per mode, and what became of each.

Every program the random tests run ends as exactly one of:

* ``clean``: the device agreed with CPU (same values, or the same error);
* ``excused``: it differed only in ways ``KNOWN_ISSUES`` rows describe (bugs being fixed);
* ``neuron_only``: a ``LIMITATIONS`` row excused it - the device raised where CPU ran the
  program (or raised another error), by design, e.g. an op torch.compile cannot lower;
* ``not_run``: a ``CRASHES`` row kept it from running;
* ``finding``: the first difference no row excuses. Hypothesis stops generating there and
  shrinks it: the calls after it are smaller versions of the same program, not new ones, so
  the count of a mode stops at its finding.

``rows`` counts the programs each row excused (a program may need several). With
``TNX_FUZZ_TALLY=<file.json>`` the tally is rewritten after every program (a run that dies
leaves the counts up to its last program); pytest's summary prints it either way.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

TALLY_ENV = "TNX_FUZZ_TALLY"
OUTCOMES = ("clean", "excused", "neuron_only", "not_run", "finding")


@dataclass
class ModeTally:
    programs: int = 0
    clean: int = 0
    excused: int = 0
    neuron_only: int = 0
    not_run: int = 0
    rows: dict[str, int] = field(default_factory=dict)  # row -> programs it excused (or kept from running)
    finding: dict | None = None  # {"program": ..., "report": ...} of the first unexcused difference


@dataclass
class Tally:
    path: str | None = None
    meta: dict = field(default_factory=dict)  # seed, profile: what the run was
    modes: dict[str, ModeTally] = field(default_factory=dict)

    def record(self, mode: str, outcome: str, rows=(), program: dict | None = None, report: str | None = None) -> None:
        """One program of ``mode`` ended as ``outcome``, excused (or not run) by ``rows``."""
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome {outcome!r}: expected one of {OUTCOMES}")
        counts = self.modes.setdefault(mode, ModeTally())
        if counts.finding is not None:
            return  # hypothesis is shrinking the finding: not a new program
        counts.programs += 1
        if outcome == "finding":
            counts.finding = {"program": program, "report": report}
        else:
            setattr(counts, outcome, getattr(counts, outcome) + 1)
        for row in sorted(set(rows)):
            counts.rows[row] = counts.rows.get(row, 0) + 1
        self.save()

    def as_dict(self) -> dict:
        return {"meta": self.meta, "modes": {mode: asdict(counts) for mode, counts in self.modes.items()}}

    def save(self) -> None:
        if not self.path:
            return
        partial = f"{self.path}.partial"
        with open(partial, "w") as f:
            json.dump(self.as_dict(), f, indent=1)
        os.replace(partial, self.path)  # a reader never sees half a file

    def summary(self) -> list[str]:
        lines = []
        for mode, c in self.modes.items():
            stopped = "; stopped at a finding" if c.finding else ""
            lines.append(f"{mode}: {c.programs} programs, {c.clean} clean, {c.excused} excused (known issues), "
                         f"{c.neuron_only} neuron-only errors (limitations), {c.not_run} not run{stopped}")
            lines += [f"  {n} x {row}" for row, n in sorted(c.rows.items())]
        return lines


TALLY = Tally(path=os.environ.get(TALLY_ENV) or None)


def outcome_of(excused, limitations, crash: str | None, unexcused: bool) -> tuple[str, list[str]]:
    """The outcome of one program and the rows behind it: ``excused`` are the reasons
    ``compare`` excused, ``limitations`` the reasons of ``LIMITATIONS`` rows."""
    if crash:
        return "not_run", [crash]
    rows = sorted(set(excused))
    if unexcused:
        return "finding", rows
    if any(row in limitations for row in rows):
        return "neuron_only", rows
    return ("excused" if rows else "clean"), rows
