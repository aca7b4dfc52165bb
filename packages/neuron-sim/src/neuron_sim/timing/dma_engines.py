"""Reservations on the 16 DMA engines.

Transfers from different queues share the engines and the hardware arbitrates between queues, so
a transfer that becomes ready early may use a gap left between transfers that were issued before
it in program order. Each engine has a sorted list of busy intervals (touching ones merged); a
transfer takes the earliest start at which all of its engines are free for its duration.

Engines with identical histories share one interval list (most transfers span all 128 partitions
and so all 16 engines); a list is copied only when a transfer books part of the engines sharing
it. That keeps a full-width booking one search and one insert instead of sixteen.
"""

from __future__ import annotations

from bisect import bisect_right


class _Intervals:
    __slots__ = ("starts", "ends")

    def __init__(self, starts=None, ends=None):
        self.starts: list[float] = starts if starts is not None else []
        self.ends: list[float] = ends if ends is not None else []

    def copy(self) -> _Intervals:
        return _Intervals(self.starts[:], self.ends[:])

    def earliest(self, t: float, duration: float) -> float:
        starts, ends = self.starts, self.ends
        i = bisect_right(ends, t)
        n = len(starts)
        while i < n and starts[i] < t + duration:
            t = ends[i]
            i += 1
        return t

    def insert(self, start: float, end: float) -> None:
        starts, ends = self.starts, self.ends
        if not starts or start > ends[-1]:  # the common case: booking at the end
            starts.append(start)
            ends.append(end)
            return
        if start == ends[-1]:
            ends[-1] = end
            return
        i = bisect_right(starts, start)
        if i > 0 and ends[i - 1] >= start:
            j = i - 1
            if end > ends[j]:
                ends[j] = end
        else:
            starts.insert(i, start)
            ends.insert(i, end)
            j = i
        while j + 1 < len(starts) and starts[j + 1] <= ends[j]:
            if ends[j + 1] > ends[j]:
                ends[j] = ends[j + 1]
            del starts[j + 1], ends[j + 1]


class DmaEngines:
    def __init__(self, count: int):
        shared = _Intervals()
        self._lists: list[_Intervals] = [shared] * count
        self._uniform = True  # all engines hold the same list object

    def reserve(self, first: int, count: int, ready: float, duration: float) -> float:
        """Book ``duration`` ns on engines [first, first+count) at the earliest time >= ready."""
        lists = self._lists
        if count == len(lists) and self._uniform:  # every engine shares one history: the common case
            shared = lists[0]
            t = shared.earliest(ready, duration)
            shared.insert(t, t + duration)
            return t
        self._uniform = False
        span = lists[first : first + count]
        distinct = list({id(x): x for x in span}.values())
        t = ready
        if len(distinct) == 1:
            t = distinct[0].earliest(t, duration)
        else:
            moved = True
            while moved:
                moved = False
                for intervals in distinct:
                    t2 = intervals.earliest(t, duration)
                    if t2 != t:
                        t, moved = t2, True
        end = t + duration
        for intervals in distinct:
            holders = [i for i, x in enumerate(lists) if x is intervals]
            if all(first <= i < first + count for i in holders):
                intervals.insert(t, end)
            else:  # part of the sharing engines: give the booked ones their own copy
                own = intervals.copy()
                own.insert(t, end)
                for i in holders:
                    if first <= i < first + count:
                        lists[i] = own
        return t

    def busy_until(self) -> float:
        return max((x.ends[-1] for x in self._lists if x.ends), default=0.0)
