"""A program's device time, computed once per program and reused by every launch.

Timing is data-independent for static programs, so it is computed once: by the compiler, which
stores the summary in the NEFF (``compile_neff`` asks ``program_timing`` too, so its launches in
the same process reuse that very result), or from the summary a NEFF read from disk carries.
A recorded summary is trusted only when this timing model made it for this architecture
(``timing_model_id``: the neuron-sim code fingerprint and the architecture's numbers); any other
is recomputed. A ``RecordedTiming`` answers ``total_ns`` and ``summary`` at once and runs the
model only when someone reads the per-instruction records (a trace).
"""

from __future__ import annotations

import weakref

from ..arch import Architecture
from ..program import PerProgram
from .model import estimate
from .records import TimingResult
from .summary import MODEL_KEY, timing_model_id

_timings = PerProgram()  # (program, arch name) -> TimingResult | RecordedTiming


def program_timing(neff_or_program, arch: Architecture) -> TimingResult | RecordedTiming:
    """The timing of a program (or a Neff's program) on ``arch``: the same object for every
    request while the program lives. Programs must not be mutated after their first request."""
    program = getattr(neff_or_program, "program", neff_or_program)
    return _timings.get(program, lambda: _first_timing(neff_or_program, program, arch), arch.name)


def _first_timing(source, program, arch: Architecture):
    summary = getattr(source, "timing_summary", None)
    if isinstance(summary, dict) and summary.get(MODEL_KEY) == timing_model_id(arch) and summary.get("target") == arch.name:
        total = summary.get("total_time_ns")
        if isinstance(total, (int, float)) and not isinstance(total, bool) and total >= 0:
            return RecordedTiming(program, arch, summary)
    return estimate(program, arch)


class RecordedTiming:
    """A ``TimingResult`` read from a NEFF's summary. ``total_ns`` and ``summary`` come from the
    file; the records (``rows``, ``instructions``, ``dma``, ``semaphores``, ``locations``) are
    computed by the model on first use - the same model, so they agree with the summary."""

    def __init__(self, program, arch: Architecture, summary: dict):
        self.total_ns = float(summary["total_time_ns"])
        self.summary = summary
        self._program = weakref.ref(program)  # the per-program cache holds this: never keep the program alive
        self._arch = arch
        self._full: TimingResult | None = None

    def full(self) -> TimingResult:
        """The complete result of the timing model (computed on the first call)."""
        if self._full is None:
            program = self._program()
            if program is None:
                raise RuntimeError("the program of this timing result no longer exists")
            self._full = estimate(program, self._arch)
        return self._full

    @property
    def rows(self) -> list[tuple]:
        return self.full().rows

    @property
    def locations(self) -> list[str]:
        return self.full().locations

    @property
    def instructions(self):
        return self.full().instructions

    @property
    def dma(self):
        return self.full().dma

    @property
    def semaphores(self):
        return self.full().semaphores

    def with_operands(self, program) -> TimingResult:
        return self.full().with_operands(program)
