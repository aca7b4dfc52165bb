"""Per-hidden-element vectors shared by the norm kernels: a weight row broadcast to every
partition on the way in, and a sum over rows (partitions) on the way out."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl

from nkilib._tiling import scratch

P = 128


def broadcast_rows(vector, hidden):
    """[P, hidden] SBUF tile with ``vector`` ([hidden] in HBM) on every partition: one DMA
    reading the same row 128 times (a partition-broadcast access pattern)."""
    t = scratch((P, hidden), vector.dtype)
    nisa.dma_copy(dst=t, src=vector.reshape((1, hidden)).broadcast(0, P))
    return t


def sum_over_rows(dst, acc, hidden):
    """dst [1, hidden] (HBM, fp32) = sum over the 128 partitions of acc [P, hidden] (SBUF, fp32).

    TensorE reduces across partitions: ones[P, 1] as the stationary operand, 512 columns of acc
    at a time as the moving one, each result one PSUM bank.
    """
    ones = scratch((P, 1), nl.float32)
    nisa.memset(dst=ones, value=1.0)
    out = scratch((1, hidden), nl.float32)
    step = nl.tile_size.gemm_moving_fmax
    for c0 in range(0, hidden, step):
        c1 = min(hidden, c0 + step)
        ps = nl.ndarray((1, step), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=ps[0:1, 0:c1 - c0], stationary=ones, moving=acc[:, c0:c1])
        nisa.tensor_copy(dst=out[0:1, c0:c1], src=ps[0:1, 0:c1 - c0])
    nisa.dma_copy(dst=dst, src=out)
