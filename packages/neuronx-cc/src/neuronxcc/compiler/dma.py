"""DMA helpers: HBM access patterns for a tile of an N-d view, and queues that overlap with compute.

A tile's HBM side is ``[partition stride, partitions]`` plus up to four ``[stride, count]`` free
dims, taken straight from the view's strides - so a transposed, sliced or broadcast operand (stride
0 dims) costs no copy. Broadcast free dims are not moved at all: the on-chip copy is *compact*
(those dims dropped) and engines read it back with stride 0. A dtype change on the way is a DMA
cast (through fp32; integer-to-integer copies stay exact).

Loads go out on the Sync engine's queues, stores on GpSimd's (as ``neuron_sim.programs.matmul``
does): a store waiting for its tile's compute then never holds up the next loads in the Sync
engine's in-order stream, and the loads of tile i+1 overlap the compute of tile i.
"""

from __future__ import annotations

import math

from neuron_sim import AccessPattern, dtypes
from neuron_sim.isa import DmaCopy
from neuron_sim.memory.access_pattern import HBM

LOAD_QUEUES = ("qSyncIO0", "qSyncIO1", "qSyncIO2", "qSyncIO3")
STORE_QUEUES = ("qGpSimdIO0", "qGpSimdIO1")


class DmaQueues:
    """Round-robin queue choice for loads (Sync) and stores (GpSimd)."""

    def __init__(self):
        self.loads = 0
        self.stores = 0
        self.count = 0

    def load(self) -> tuple[str, str]:
        queue = LOAD_QUEUES[self.loads % len(LOAD_QUEUES)]
        self.loads += 1
        return "sync", queue

    def store(self) -> tuple[str, str]:
        queue = STORE_QUEUES[self.stores % len(STORE_QUEUES)]
        self.stores += 1
        return "gpsimd", queue


def compact_dims(dims: list[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[bool]]:
    """Drop the stride-0 (broadcast) dims of a pattern; ``kept[i]`` says which dims stayed."""
    kept = [stride != 0 and count > 1 for stride, count in dims]
    return [d for d, k in zip(dims, kept) if k], kept


def hbm_pattern(tensor: str, dtype: str, offset: int, part_stride: int, partitions: int,
                dims: list[tuple[int, int]]) -> AccessPattern:
    """An HBM access pattern (``offset`` and strides in elements of ``dtype``)."""
    free = tuple(dims) or ((1, 1),)
    return AccessPattern(HBM, dtype, 0, partitions, free, offset * dtypes.itemsize(dtype), tensor,
                         part_stride if partitions > 1 else 0)


def onchip_compact_strides(dims: list[tuple[int, int]]) -> tuple[tuple[int, ...], int]:
    """On-chip strides of a compact tile holding the non-broadcast dims of ``dims`` densely.

    Returns the strides for every dim (0 for broadcast dims) and the compact free size.
    """
    compact, kept = compact_dims(dims)
    sizes = [c for _, c in compact]
    acc, dense = 1, []
    for size in reversed(sizes):
        dense.append(acc)
        acc *= size
    dense.reverse()
    it = iter(dense)
    strides = tuple(next(it) if k else 0 for k in kept)
    return strides, math.prod(sizes)


__all__ = ["DmaQueues", "DmaCopy", "compact_dims", "hbm_pattern", "onchip_compact_strides", "LOAD_QUEUES", "STORE_QUEUES"]
