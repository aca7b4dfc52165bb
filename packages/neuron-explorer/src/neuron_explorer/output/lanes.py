"""Track lanes: slices on one track of a trace viewer must not overlap unless nested, so overlapping
slices of a track (DMA triggers of one queue, whose transfers run while the next is triggered)
are spread over numbered lanes of that track."""

from __future__ import annotations


class Lanes:
    def __init__(self):
        self._ends: dict[tuple[str, str], list[int]] = {}

    def place(self, group: str, track: str, start: int, end: int) -> str:
        ends = self._ends.setdefault((group, track), [])
        for lane, busy_until in enumerate(ends):
            if busy_until <= start:
                ends[lane] = end
                return track if lane == 0 else f"{track} #{lane + 1}"
        ends.append(end)
        return track if len(ends) == 1 else f"{track} #{len(ends)}"
