"""Dependency state: when each piece of memory was last written, by which track, and last read.

Memory is tracked in dependency blocks: 64 bytes per partition on chip (all partitions together),
coarse blocks of each HBM tensor. A *region* (SBUF, PSUM, one HBM tensor) keeps, per block, the end
of the last write and the track that wrote it, and the latest end of a read. A *footprint* is the
block range ``[lo, hi)`` of one region that an operand touches; an instruction waits for the maximum
over its footprints (RAW, WAW, WAR) and names the producer of the first block holding it.

Every footprint of a program is known before scheduling starts (``plan.py`` lowers the whole
program first). Between two consecutive footprint boundaries of a region, each instruction touches
either all blocks or none, so those blocks always hold equal values; the region keeps one *slot*
per such run of blocks instead of one per block. A 32-block PSUM bank or a 16-block moving tile is
then one slot, and the max() scans that dominate scheduling touch a value or two instead of dozens.
The maxima, and the first block holding them, are exactly those of per-block tracking.
"""

from __future__ import annotations


class Region:
    """Dependency state of one memory: per slot, last write end and its track, last read end."""

    __slots__ = ("block", "nblocks", "footprints", "write_end", "write_by", "read_end")

    def __init__(self, nbytes: int, block: int):
        self.block = block
        self.nblocks = max(1, -(-nbytes // block))
        self.footprints: dict[tuple[int, int], list] = {}

    def footprint(self, lo: int, hi: int) -> list:
        """The (shared) footprint of blocks [lo, hi); usable once ``compress`` has run.

        A footprint is a list ``[write_end, write_by, read_end, lo, hi]`` over slots (filled in
        place by ``compress``), which the scheduler unpacks.
        """
        key = (lo, hi)
        fp = self.footprints.get(key)
        if fp is None:
            fp = self.footprints[key] = [None] * 5
        return fp

    def compress(self) -> None:
        """Allocate one slot per run of blocks between footprint boundaries; rewrite footprints."""
        # Normalized the way slicing a per-block list would (matters only for invalid patterns
        # that reach past the region).
        spans = {key: range(self.nblocks)[key[0]:key[1]] for key in self.footprints}
        bounds = sorted({b for span in spans.values() for b in (span.start, span.stop)})
        slot = {b: i for i, b in enumerate(bounds)}
        slots = max(0, len(bounds) - 1)
        self.write_end = [0.0] * slots
        self.write_by = [""] * slots
        self.read_end = [0.0] * slots
        for key, span in spans.items():
            self.footprints[key][:] = (self.write_end, self.write_by, self.read_end, slot[span.start], slot[span.stop])
