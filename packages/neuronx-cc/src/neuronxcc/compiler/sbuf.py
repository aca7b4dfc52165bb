"""On-chip buffers for lowered loops: rotating tile rings and access patterns into them.

Allocation itself is neuron_sim's ``ProgramBuilder`` (first-fit ``OnChipAllocator`` per memory);
this module adds what a tile loop needs: a ring of ``count`` buffers per role used round-robin, so
the load of tile i+1 fills one buffer while tile i is computed in another (the timing model sees
only WAR dependencies on the buffer being refilled), and a scope that frees everything a lowering
allocated when it is done.
"""

from __future__ import annotations

from neuron_sim import AccessPattern, ProgramBuilder, Tile, ValidationError, dtypes
from neuron_sim.memory.access_pattern import PSUM, SBUF

from .views import contiguous_strides

PARTITIONS = 128
# Tiles start on 64-byte boundaries: the timing model tracks dependencies in 64-byte blocks per
# partition, so two tiles sharing a block would look dependent (a false WAR between ring slots).
ALIGN_BYTES = 64


def _aligned_free(free: int, dtype: str) -> int:
    size = dtypes.itemsize(dtype)
    nbytes = -(-max(1, free) * size // ALIGN_BYTES) * ALIGN_BYTES
    return nbytes // size


class Scope:
    """Allocations made through a scope are released together (``with Scope(builder) as s``)."""

    def __init__(self, builder: ProgramBuilder):
        self.builder = builder
        self.tiles: list[Tile] = []

    def __enter__(self) -> Scope:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def sbuf(self, free: int, dtype: str, partitions: int = PARTITIONS) -> Tile:
        tile = self.builder.sbuf((partitions, _aligned_free(free, dtype)), dtype)
        self.tiles.append(tile)
        return tile

    def psum(self, free: int, dtype: str = "float32", partitions: int = PARTITIONS) -> Tile:
        tile = self.builder.psum((partitions, max(1, free)), dtype)
        self.tiles.append(tile)
        return tile

    def ring(self, free: int, dtype: str, count: int = 2, memory: str = SBUF) -> TileRing:
        make = self.sbuf if memory == SBUF else self.psum
        return TileRing([make(free, dtype) for _ in range(count)])

    def release(self) -> None:
        # Newest first keeps the first-fit allocator's free list compact.
        for tile in reversed(self.tiles):
            self.builder.release(tile)
        self.tiles.clear()


class TileRing:
    """Buffers of one role used round-robin by consecutive tiles of a loop."""

    def __init__(self, tiles: list[Tile]):
        self.tiles = tiles
        self.cursor = 0

    def next(self) -> Tile:
        tile = self.tiles[self.cursor % len(self.tiles)]
        self.cursor += 1
        return tile

    def at(self, slot: int) -> Tile:
        return self.tiles[slot % len(self.tiles)]


def tile_ap(tile: Tile, partitions: int, counts, strides=None, dtype: str | None = None, offset: int = 0,
            partition_start: int = 0) -> AccessPattern:
    """``partitions`` x ``counts`` of ``tile``: row-major dense unless ``strides`` (elements) are given.

    ``offset`` is in elements of ``dtype`` (the tile's dtype by default).
    """
    dtype = dtype or tile.dtype
    counts = tuple(counts) or (1,)
    strides = tuple(strides) if strides is not None else contiguous_strides(counts)
    free = tuple(zip(strides, counts))
    return AccessPattern(tile.memory, dtype, tile.partition_start + partition_start, partitions, free,
                         tile.offset + offset * dtypes.itemsize(dtype))


def column(tile: Tile, partitions: int, index: int = 0) -> AccessPattern:
    """The ``[partitions, 1]`` column ``index`` of ``tile`` (a per-partition scalar operand)."""
    return tile_ap(tile, partitions, (1,), (1,), offset=index)


def broadcast(col: AccessPattern, counts) -> AccessPattern:
    """A ``[P, 1]`` pattern read as ``[P, *counts]`` (stride 0: every element sees the column)."""
    counts = tuple(counts) or (1,)
    return AccessPattern(col.memory, col.dtype, col.partition_start, col.partition_count,
                         tuple((0, c) for c in counts), col.offset)


__all__ = ["Scope", "TileRing", "tile_ap", "column", "broadcast", "SBUF", "PSUM", "PARTITIONS"]


class SpacedAllocator:
    """The program's SBUF allocator, placing each group's tiles clear of the previous group's.

    First-fit alone hands a group the addresses the group before it just released, so the new
    group's first loads wait (WAR) for the old group's last reads and consecutive groups cannot
    overlap even when they are independent. At a group's start a *spacer* - a block no instruction
    touches - reserves the previous group's region, so the new tiles land above it; the spacer is
    dropped as soon as an allocation would not fit otherwise (then tiles overlap as before).
    """

    def __init__(self, inner):
        self.inner = inner
        self.spacer: int | None = None
        self.group_high = 0  # highest byte the current group's tiles reach

    def __getattr__(self, name):  # used, peak, capacity...: the wrapped allocator's
        return getattr(self.inner, name)

    def allocate(self, nbytes: int, what: str = "tile") -> int:
        try:
            offset = self.inner.allocate(nbytes, what)
        except ValidationError:
            if self.spacer is None:
                raise
            self._drop_spacer()
            offset = self.inner.allocate(nbytes, what)
        self.group_high = max(self.group_high, offset + nbytes)
        return offset

    def free(self, offset: int) -> None:
        self.inner.free(offset)

    def new_group(self) -> None:
        """Reserve what the previous group used (its tiles are released by now)."""
        self._drop_spacer()
        high, self.group_high = self.group_high, 0
        if high:
            try:
                self.spacer = self.inner.allocate(high, "spacer")
            except ValidationError:
                self.spacer = None

    def _drop_spacer(self) -> None:
        if self.spacer is not None:
            self.inner.free(self.spacer)
            self.spacer = None
