"""Which bytes of device memory hold no valid data, and why.

When a launch fails, or is skipped (its queue had failed, or it read memory of this kind), the
memory it should have written keeps whatever it held before - garbage as far as the program is
concerned. Those byte ranges are marked invalid here with their cause (the failure that stopped
the write), so later work that reads them is skipped too and a framework can refuse a host read
of them with the original error (``Device.check_valid``), instead of returning the garbage.

* Ranges are kept per allocation of an ``Hbm`` (absolute host addresses: allocations are real
  host buffers), each with the cause of the write that did not happen.
* A later write of bytes makes them valid again; freeing (or reallocating) an allocation forgets
  its ranges.
* ``INVALID.count`` is the number of invalid ranges in the whole process, read without a lock
  on every task: while it is 0 - always, unless something failed - nothing else is looked at.
"""

from __future__ import annotations

import threading


class _Count:
    __slots__ = ("count",)

    def __init__(self):
        self.count = 0


INVALID = _Count()
_count_lock = threading.Lock()
_watchers: list = []


def watch(callback) -> None:
    """Call ``callback(True)`` when the process's first invalid range appears and
    ``callback(False)`` when the last one goes. A framework that reuses device memory without
    freeing it (a caching allocator) forgets the ranges of reused memory only while there are any."""
    with _count_lock:  # the first call and later transitions in order: the last call is the state
        _watchers.append(callback)
        callback(INVALID.count > 0)


class InvalidRanges:
    """The invalid byte ranges of one HBM, by allocation address: [(lo, hi, cause), ...] sorted
    and disjoint."""

    def __init__(self):
        self._lock = threading.Lock()
        self._by_block: dict[int, list[tuple[int, int, object]]] = {}

    def __bool__(self) -> bool:
        return bool(self._by_block)

    def mark_invalid(self, block: int, lo: int, hi: int, cause) -> None:
        """Bytes [lo, hi) of the allocation at ``block`` hold no valid data because of ``cause``."""
        if hi <= lo:
            return
        with self._lock:
            kept = self._cut(block, lo, hi)
            kept.append((lo, hi, cause))
            kept.sort(key=lambda r: r[0])
            self._store(block, kept)

    def mark_valid(self, block: int, lo: int, hi: int) -> None:
        """Bytes [lo, hi) of the allocation at ``block`` were written: they are valid again."""
        if hi <= lo or block not in self._by_block:
            return
        with self._lock:
            self._store(block, self._cut(block, lo, hi))

    def find(self, block: int, lo: int, hi: int):
        """The cause of the first invalid byte in [lo, hi) of the allocation at ``block``, with
        that range: ``(cause, range_lo, range_hi)``, or None if all of them are valid."""
        ranges = self._by_block.get(block)
        if not ranges:
            return None
        with self._lock:
            for r_lo, r_hi, cause in self._by_block.get(block, ()):
                if r_lo < hi and lo < r_hi:
                    return cause, r_lo, r_hi
        return None

    def forget(self, block: int) -> None:
        """The allocation at ``block`` was freed or is fresh: nothing of it is invalid."""
        if block not in self._by_block:
            return
        with self._lock:
            self._store(block, [])

    def ranges(self, block: int) -> list[tuple[int, int]]:
        """The invalid [lo, hi) ranges of the allocation at ``block``."""
        with self._lock:
            return [(lo, hi) for lo, hi, _ in self._by_block.get(block, ())]

    # --- machinery (callers hold self._lock) ---------------------------------------------------
    def _cut(self, block: int, lo: int, hi: int) -> list:
        """The block's ranges with [lo, hi) removed."""
        kept = []
        for r_lo, r_hi, cause in self._by_block.get(block, ()):
            if r_hi <= lo or hi <= r_lo:
                kept.append((r_lo, r_hi, cause))
                continue
            if r_lo < lo:
                kept.append((r_lo, lo, cause))
            if hi < r_hi:
                kept.append((hi, r_hi, cause))
        return kept

    def _store(self, block: int, ranges: list) -> None:
        before = len(self._by_block.get(block, ()))
        if ranges:
            self._by_block[block] = ranges
        else:
            self._by_block.pop(block, None)
        if len(ranges) != before:
            with _count_lock:
                was = INVALID.count > 0
                INVALID.count += len(ranges) - before
                now = INVALID.count > 0
                if was != now:  # under the lock: two transitions never reach a watcher out of order
                    for callback in _watchers:
                        callback(now)
