"""Row tiling shared by the kernels: rows go to the 128 partitions, one tile per 128 rows (the
last one partial), and the next tile's loads are issued before the current tile is computed.

The DMA queue runs in order, so a loop that loads tile i, computes it and stores it makes tile
i+1's load wait behind tile i's store (and that store waits for the engines): no overlap at all.
Issuing tile i+1's loads first (double buffering) lets DMA bring it in while the engines work on
tile i, as a Trainium kernel author writes it.

SBUF is allocated up front, once per kernel: inputs and outputs in rings of two buffers
(tile i+1 fills one while tile i's is in use), scratch tiles once. So a kernel's SBUF footprint
is a fixed number of bytes per element of the row, which its entry point checks before tracing.
Every tile is padded to whole 64-byte blocks per partition: engines and DMA track dependencies
per 64-byte block, so a [P, 1] statistic sharing a block with the next input tile would make
the engines wait for that tile's DMA (false sharing).
"""

from __future__ import annotations

import math

import nki.isa as nisa
import nki.language as nl
import numpy as np

P = 128
BLOCK_BYTES = 64  # the dependency granularity per partition (neuron-sim's timing model)


def padded_bytes(nbytes: int) -> int:
    return -(-nbytes // BLOCK_BYTES) * BLOCK_BYTES


def scratch(shape, dtype):
    """An SBUF tile of ``shape`` (partitions first) whose rows fill whole 64-byte blocks."""
    free = math.prod(shape[1:])
    itemsize = np.dtype(dtype).itemsize
    width = padded_bytes(free * itemsize) // itemsize
    t = nl.ndarray((shape[0], width), dtype=dtype, buffer=nl.sbuf)[:, 0:free]
    return t.reshape(tuple(shape)) if len(shape) != 2 else t


def row_tiles(rows: int) -> list[tuple[int, int]]:
    """(first row, rows in this tile) for each 128-row tile."""
    return [(p0, min(P, rows - p0)) for p0 in range(0, rows, P)]


class Ring:
    """``depth`` sets of SBUF tiles, one per (shape, dtype) spec, handed out in turn."""

    def __init__(self, depth: int, *specs):
        self.sets = [[scratch(shape, dtype) for shape, dtype in specs] for _ in range(depth)]
        self.turn = 0

    def next(self) -> list:
        tiles = self.sets[self.turn % len(self.sets)]
        self.turn += 1
        return tiles


def loader(*srcs):
    """load(p0, n) for prefetched: one DMA per [R, W] HBM input into the next of two [P, W] SBUF
    tiles of its dtype (rows p0 .. p0 + n on partitions 0 .. n)."""
    ring = Ring(2, *(((P, src.shape[1]), src.dtype) for src in srcs))

    def load(p0, n):
        tiles = ring.next()
        for t, src in zip(tiles, srcs):
            nisa.dma_copy(dst=t[0:n], src=src[p0:p0 + n, :])
        return tiles

    return load


def prefetched(rows: int, load):
    """Yield ((p0, n), load(p0, n)) per tile, with the following tile's load(...) already issued."""
    return prefetched_steps(row_tiles(rows), load)


def prefetched_steps(steps, load):
    """Yield (step, load(*step)) per step, with the following step's load(...) already issued."""
    pending = load(*steps[0])
    for k, step in enumerate(steps):
        current = pending
        if k + 1 < len(steps):
            pending = load(*steps[k + 1])
        yield step, current



def store(dst, src):
    """DMA a result tile out on its own queue (GpSimd's trigger): on the loads' queue a store
    waiting for the engines would hold back the next tile's prefetch behind it (queues are in
    order)."""
    nisa.dma_copy(dst=dst, src=src, engine=nisa.engine.gpsimd)
