"""RMSNorm forward and backward over the last dim: ``y = x / sqrt(mean(x^2) + eps) * weight``.

Rows go to the 128 partitions, 128 rows per tile (the last tile partial), the hidden dim is the
free dim. Per tile: DMA the rows in (the next tile's DMA already under way), ScalarE squares
them and sums each row in the same instruction, ScalarE turns the sum into 1/rms, VectorE
applies 1/rms and the weight (``scale_rows``), DMA out. I/O in the input's dtype, math in
fp32 (the engines compute in fp32 and round on write; per-row statistics stay in fp32 tiles).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, loader, prefetched, scratch, store
from nkilib.norm._weights import broadcast_rows, sum_over_rows


def stats_ring(count: int) -> Ring:
    """Two sets of ``count`` [P, 1] fp32 per-row statistics (tile i+1's beside tile i's)."""
    return Ring(2, *[((P, 1), nl.float32)] * count)


def inv_rms(xt, n, hidden, eps, discard, ss, r):
    """r[0:n] = 1/sqrt(mean(x^2) + eps) (fp32) for the first n partitions of xt, via the row sums
    of squares ss; the squares themselves go to ``discard`` (a [P, hidden] scratch tile)."""
    nisa.activation(dst=discard[0:n], op=nl.square, data=xt[0:n], reduce_op=nl.add, reduce_res=ss[0:n])
    nisa.activation(dst=r[0:n], op=nl.rsqrt, data=ss[0:n], scale=1.0 / hidden, bias=float(eps))
    return r


@nki.jit
def rms_norm_kernel(x, weight, eps):
    """x [R, H], weight [H] -> y [R, H] (x's dtype)."""
    rows, hidden = x.shape
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = broadcast_rows(weight, hidden)
    sq = scratch((P, hidden), x.dtype)
    outs = Ring(2, ((P, hidden), x.dtype))
    stats = stats_ring(2)
    for (p0, n), (xt,) in prefetched(rows, loader(x)):
        ss, r = stats.next()
        inv_rms(xt, n, hidden, eps, sq, ss, r)
        (yt,) = outs.next()
        scale_rows(yt, xt, r, g, n)
        store(y[p0:p0 + n, :], yt[0:n])
    return y


def scale_rows(yt, xt, r, g, n):
    """yt[0:n] = xt * r * g (r per row, g per column), on VectorE.

    fp32: one scalar_tensor_tensor (2 cycles per element). bf16/fp16: x * r rounded to the I/O
    dtype, then times the weight (as HF's Llama RMSNorm rounds: ``weight * (x * r).to(dtype)``):
    a tensor_scalar and a tensor_tensor over half-precision tiles run in VectorE's 4x and 2x
    modes, 0.75 cycles per element, so the kernel is bound by DMA instead of VectorE."""
    if yt.dtype == nl.float32:
        nisa.scalar_tensor_tensor(dst=yt[0:n], data=xt[0:n], op0=nl.multiply, operand0=r[0:n], op1=nl.multiply,
                                  operand1=g[0:n])
        return
    nisa.tensor_scalar(dst=yt[0:n], data=xt[0:n], op0=nl.multiply, operand0=r[0:n])
    nisa.tensor_tensor(dst=yt[0:n], data1=yt[0:n], data2=g[0:n], op=nl.multiply)


@nki.jit
def rms_norm_backward_kernel(dy, x, weight, eps):
    """dy, x [R, H], weight [H] -> (dx [R, H], dweight [1, H] fp32).

    With r = 1/rms(x) and gy = dy * weight: dx = r * gy - x * r^3 * mean(gy * x), and dweight sums
    dy * x * r over the rows (an fp32 [P, H] accumulator, reduced across partitions by TensorE at
    the end). r is recomputed from x (one ScalarE pass) rather than saved by the forward.
    """
    rows, hidden = x.shape
    dx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dw = nl.ndarray((1, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    g = broadcast_rows(weight, hidden)
    acc = scratch((P, hidden), nl.float32)
    nisa.memset(dst=acc, value=0.0)
    gy, s1, s2 = (scratch((P, hidden), nl.float32) for _ in range(3))
    outs = Ring(2, ((P, hidden), x.dtype))
    stats = stats_ring(5)
    for (p0, n), (xt, dyt) in prefetched(rows, loader(x, dy)):
        ss, r, c, r3, coef = stats.next()
        inv_rms(xt, n, hidden, eps, s2, ss, r)
        nisa.tensor_tensor(dst=gy[0:n], data1=dyt[0:n], data2=g[0:n], op=nl.multiply)
        # dweight += (x * r) * dy, the accumulation on GpSimd beside VectorE
        nisa.scalar_tensor_tensor(dst=s1[0:n], data=xt[0:n], op0=nl.multiply, operand0=r[0:n], op1=nl.multiply,
                                  operand1=dyt[0:n])
        nisa.tensor_tensor(dst=acc[0:n], data1=acc[0:n], data2=s1[0:n], op=nl.add, engine=nisa.gpsimd_engine)
        # c = sum(gy * x) per row; coef = -c * r^3 / H
        nisa.tensor_tensor(dst=s2[0:n], data1=gy[0:n], data2=xt[0:n], op=nl.multiply)
        nisa.tensor_reduce(dst=c[0:n], op=nl.add, data=s2[0:n], axis=1)
        nisa.tensor_tensor(dst=r3[0:n], data1=r[0:n], data2=r[0:n], op=nl.multiply)
        nisa.scalar_tensor_tensor(dst=r3[0:n], data=r3[0:n], op0=nl.multiply, operand0=-1.0 / hidden, op1=nl.multiply,
                                  operand1=r[0:n])
        nisa.tensor_tensor(dst=coef[0:n], data1=c[0:n], data2=r3[0:n], op=nl.multiply)
        # dx = gy * r + x * coef (x * coef on ScalarE)
        nisa.activation(dst=s2[0:n], op=nl.copy, data=xt[0:n], scale=coef[0:n])
        (dxt,) = outs.next()
        nisa.scalar_tensor_tensor(dst=dxt[0:n], data=gy[0:n], op0=nl.multiply, operand0=r[0:n], op1=nl.add,
                                  operand1=s2[0:n])
        store(dx[p0:p0 + n, :], dxt[0:n])
    sum_over_rows(dw, acc, hidden)
    return dx, dw


# SBUF bytes per element of the hidden dim: every tile a kernel allocates per partition.
def _fwd_bytes(io: int) -> int:
    return 6 * io  # weight, x (two: prefetch), squares, y (two)


def _bwd_bytes(io: int) -> int:
    return 7 * io + 4 * 4  # weight, x and dy (two each), dx (two); fp32 accumulator, gy, two scratch



def check_forward(x, weight) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of arguments rms_norm takes; NkilibError for any it refuses."""
    return _checks.check_row_norm(x, weight, "rms_norm", _fwd_bytes)


def check_backward(dy, x, weight) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of arguments rms_norm_backward takes; NkilibError for any it refuses."""
    rows, hidden, dt = _checks.check_row_norm(x, weight, "rms_norm_backward", _bwd_bytes)
    _checks.check_shape("dy", dy, x.shape)
    _checks.check_same_dtype("dy", dy, dt)
    return rows, hidden, dt


def rms_norm(x, weight, eps: float = 1e-6):
    """RMSNorm over the last dim of x (any leading dims); weight [H], same dtype as x."""
    rows, hidden, _ = check_forward(x, weight)
    return rms_norm_kernel(x.reshape(rows, hidden), weight, float(eps)).reshape(x.shape)


def rms_norm_backward(dy, x, weight, eps: float = 1e-6):
    """(dx like x, dweight [H] fp32) of rms_norm(x, weight, eps) for the output gradient dy."""
    rows, hidden, _ = check_backward(dy, x, weight)
    dx, dw = rms_norm_backward_kernel(dy.reshape(rows, hidden), x.reshape(rows, hidden), weight, float(eps))
    return dx.reshape(x.shape), dw.reshape(hidden)


def max_hidden(dtype, backward: bool = False) -> int:
    """The largest hidden size rms_norm (or its backward) takes for I/O dtype ``dtype``."""
    io = _checks.DTYPE_BYTES[_checks.dtype_name(dtype)]
    return _checks.max_width((_bwd_bytes if backward else _fwd_bytes)(io))
