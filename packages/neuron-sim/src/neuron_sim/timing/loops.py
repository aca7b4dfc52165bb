"""The instruction stream a program actually issues: loop bodies repeated per iteration.

Loops repeat their body as often as a run's trip counts say (``ExactExecutor.trip_counts``:
loop-start index -> counts in execution order) when given; otherwise static loops repeat it
``static_trip_count()`` times, and loops whose bounds are registers are an error. Each
iteration's body is scheduled like straight-line code, followed by the loop's branch.
"""

from __future__ import annotations

from ..errors import ValidationError
from ..isa.control import LoopStart, loop_structure


def issued_stream(instructions, trip_counts: dict[int, list[int]] | None = None) -> tuple[list, list[int]]:
    """(instructions in issue order, their program indices)."""
    if not any(isinstance(i, LoopStart) for i in instructions):
        return instructions, list(range(len(instructions)))
    pairs = loop_structure(instructions)
    pending = {start: list(counts) for start, counts in (trip_counts or {}).items()}
    out, indices = [], []

    def trip_count(start: int) -> int:
        loop = instructions[start]
        remaining = pending.get(start)
        # A run's count wins even for static bounds: a body may write its loop's counter register
        # (the ISA allows it), and then the static count is not what ran.
        if remaining:
            return remaining.pop(0)
        count = loop.static_trip_count()
        if count is None:
            raise ValidationError(
                "timing.trip_count_unknown",
                f"the loop on {loop.register!r} has run-time bounds: its timing needs the trip counts of a run "
                "(pass ExactExecutor.trip_counts to estimate)",
                loop.location,
            )
        return count

    def issue(lo: int, hi: int) -> None:
        i = lo
        while i < hi:
            inst = instructions[i]
            out.append(inst)
            indices.append(i)
            if isinstance(inst, LoopStart):
                end = pairs[i]
                for _ in range(trip_count(i)):
                    issue(i + 1, end)
                    out.append(instructions[end])  # the branch back (or out) after each pass
                    indices.append(end)
                i = end + 1
                continue
            i += 1

    issue(0, len(instructions))
    return out, indices
