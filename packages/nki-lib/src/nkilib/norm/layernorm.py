"""LayerNorm forward and backward over the last dim:
``y = (x - mean) / sqrt(var + eps) * weight + bias`` (biased variance, as torch).

Per 128-row tile: DMA in; VectorE's bn_stats (512 elements per instruction) and bn_aggr give each
row's mean and variance in fp32; ScalarE turns them into 1/std and -mean/std and normalizes the
rows in one pass (``x * rstd + (-mean * rstd)``); VectorE applies the weight and GpSimd the bias
(fp32 tensor-tensor passes cost VectorE two cycles per element: splitting them keeps it from
being the only busy engine); DMA out.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, loader, prefetched, scratch, store
from nkilib.norm._weights import broadcast_rows, sum_over_rows


def _normalized(xt, n, hidden, eps, stats, xhat):
    """xhat[0:n] = (x - mean) * rstd in fp32 for the first n rows of xt; returns rstd [P, 1].
    ``stats`` is a set from _stats_ring (per-row fp32 statistics of this tile)."""
    fmax = nl.tile_size.bn_stats_fmax
    bn, mv, rstd, shift = stats[:4]
    for c in range((hidden + fmax - 1) // fmax):
        nisa.bn_stats(dst=bn[0:n, c * 6:(c + 1) * 6], data=xt[0:n, c * fmax:min(hidden, (c + 1) * fmax)])
    nisa.bn_aggr(dst=mv[0:n], data=bn[0:n])
    nisa.activation(dst=rstd[0:n], op=nl.rsqrt, data=mv[0:n, 1:2], bias=float(eps))
    # shift = -mean * rstd, so that ScalarE normalizes in one pass: x * rstd + shift
    nisa.scalar_tensor_tensor(dst=shift[0:n], data=mv[0:n, 0:1], op0=nl.multiply, operand0=-1.0, op1=nl.multiply,
                              operand1=rstd[0:n])
    nisa.activation(dst=xhat[0:n], op=nl.copy, data=xt[0:n], scale=rstd[0:n], bias=shift[0:n])
    return rstd


def _stats_ring(hidden, extra=0):
    """Two sets of per-row fp32 statistics: bn_stats (6 per 512-element chunk), mean/var, rstd,
    -mean*rstd, and ``extra`` more [P, 1] values."""
    chunks = (hidden + nl.tile_size.bn_stats_fmax - 1) // nl.tile_size.bn_stats_fmax
    specs = [((P, 6 * chunks), nl.float32), ((P, 2), nl.float32)] + [((P, 1), nl.float32)] * (2 + extra)
    return Ring(2, *specs)


@nki.jit
def layer_norm_kernel(x, weight, bias, eps):
    """x [R, H], weight and bias [H] -> y [R, H] (x's dtype)."""
    rows, hidden = x.shape
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = broadcast_rows(weight, hidden)
    b = broadcast_rows(bias, hidden)
    # xhat in two buffers too: ScalarE normalizes tile i+1 while VectorE and GpSimd finish tile i
    outs = Ring(2, ((P, hidden), x.dtype), ((P, hidden), nl.float32))
    stats = _stats_ring(hidden)
    for (p0, n), (xt,) in prefetched(rows, loader(x)):
        yt, xhat = outs.next()
        _normalized(xt, n, hidden, eps, stats.next(), xhat)
        nisa.tensor_tensor(dst=xhat[0:n], data1=xhat[0:n], data2=g[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=yt[0:n], data1=xhat[0:n], data2=b[0:n], op=nl.add, engine=nisa.gpsimd_engine)
        store(y[p0:p0 + n, :], yt[0:n])
    return y


@nki.jit
def layer_norm_backward_kernel(dy, x, weight, eps):
    """dy, x [R, H], weight [H] -> (dx [R, H], dweight [1, H] fp32, dbias [1, H] fp32).

    With gy = dy * weight: dx = rstd * (gy - mean(gy) - xhat * mean(gy * xhat)); dweight sums
    dy * xhat and dbias sums dy over the rows (fp32 accumulators on GpSimd, reduced across
    partitions by TensorE at the end). Mean and rstd are recomputed from x.
    """
    rows, hidden = x.shape
    dx = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    dw = nl.ndarray((1, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    db = nl.ndarray((1, hidden), dtype=nl.float32, buffer=nl.shared_hbm)
    g = broadcast_rows(weight, hidden)
    acc_w, acc_b, xhat, dyx, gy = (scratch((P, hidden), nl.float32) for _ in range(5))
    nisa.memset(dst=acc_w, value=0.0)
    nisa.memset(dst=acc_b, value=0.0, engine=nisa.gpsimd_engine)
    outs = Ring(2, ((P, hidden), x.dtype))
    stats = _stats_ring(hidden, extra=4)
    for (p0, n), (xt, dyt) in prefetched(rows, loader(x, dy)):
        st = stats.next()
        gsum, gxsum, c1, c0 = st[4:]
        rstd = _normalized(xt, n, hidden, eps, st, xhat)
        nisa.tensor_tensor(dst=acc_b[0:n], data1=acc_b[0:n], data2=dyt[0:n], op=nl.add, engine=nisa.gpsimd_engine)
        nisa.tensor_tensor(dst=dyx[0:n], data1=dyt[0:n], data2=xhat[0:n], op=nl.multiply)
        nisa.tensor_tensor(dst=acc_w[0:n], data1=acc_w[0:n], data2=dyx[0:n], op=nl.add, engine=nisa.gpsimd_engine)
        # gsum = sum(gy) (ScalarE copying gy = dy * g onto itself), gxsum = sum(gy * xhat) = sum(dyx * g);
        # every pass works in place so that the kernel keeps five fp32 rows, not six (fp32 H=4096 fits)
        nisa.tensor_tensor(dst=gy[0:n], data1=dyt[0:n], data2=g[0:n], op=nl.multiply)
        nisa.activation(dst=gy[0:n], op=nl.copy, data=gy[0:n], reduce_op=nl.add, reduce_res=gsum[0:n])
        nisa.tensor_tensor(dst=dyx[0:n], data1=dyx[0:n], data2=g[0:n], op=nl.multiply)
        nisa.tensor_reduce(dst=gxsum[0:n], op=nl.add, data=dyx[0:n], axis=1)
        # dx = gy * rstd + xhat * c1 + c0, c1 = -gxsum * rstd / H, c0 = -gsum * rstd / H
        nisa.scalar_tensor_tensor(dst=c1[0:n], data=gxsum[0:n], op0=nl.multiply, operand0=-1.0 / hidden,
                                  op1=nl.multiply, operand1=rstd[0:n])
        nisa.scalar_tensor_tensor(dst=c0[0:n], data=gsum[0:n], op0=nl.multiply, operand0=-1.0 / hidden,
                                  op1=nl.multiply, operand1=rstd[0:n])
        nisa.activation(dst=xhat[0:n], op=nl.copy, data=xhat[0:n], scale=c1[0:n], bias=c0[0:n])
        (dxt,) = outs.next()
        nisa.scalar_tensor_tensor(dst=dxt[0:n], data=gy[0:n], op0=nl.multiply, operand0=rstd[0:n], op1=nl.add,
                                  operand1=xhat[0:n])
        store(dx[p0:p0 + n, :], dxt[0:n])
    sum_over_rows(dw, acc_w, hidden)
    sum_over_rows(db, acc_b, hidden)
    return dx, dw, db


def _fwd_bytes(io: int) -> int:
    return 6 * io + 8 + 1  # weight, bias, x and y (two each); fp32 xhat (two); bn_stats (6 fp32 per 512)


def _bwd_bytes(io: int) -> int:
    return 7 * io + 5 * 4 + 1  # weight, x, dy and dx (two each); fp32 accumulators (2), xhat, dyx, gy



def check_forward(x, weight, bias) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of arguments layer_norm takes; NkilibError for any it refuses."""
    rows, hidden, dt = _checks.check_row_norm(x, weight, "layer_norm", _fwd_bytes)
    _checks.check_shape("bias", bias, (hidden,))
    _checks.check_same_dtype("bias", bias, dt)
    return rows, hidden, dt


def check_backward(dy, x, weight) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of arguments layer_norm_backward takes; NkilibError for any it refuses."""
    rows, hidden, dt = _checks.check_row_norm(x, weight, "layer_norm_backward", _bwd_bytes)
    _checks.check_shape("dy", dy, x.shape)
    _checks.check_same_dtype("dy", dy, dt)
    return rows, hidden, dt


def layer_norm(x, weight, bias, eps: float = 1e-5):
    """LayerNorm over the last dim of x (any leading dims); weight and bias [H], x's dtype."""
    rows, hidden, _ = check_forward(x, weight, bias)
    return layer_norm_kernel(x.reshape(rows, hidden), weight, bias, float(eps)).reshape(x.shape)


def layer_norm_backward(dy, x, weight, eps: float = 1e-5):
    """(dx like x, dweight [H] fp32, dbias [H] fp32) of layer_norm(x, weight, bias, eps) for dy."""
    rows, hidden, _ = check_backward(dy, x, weight)
    dx, dw, db = layer_norm_backward_kernel(dy.reshape(rows, hidden), x.reshape(rows, hidden), weight, float(eps))
    return dx.reshape(x.shape), dw.reshape(hidden), db.reshape(hidden)


def max_hidden(dtype, backward: bool = False) -> int:
    io = _checks.DTYPE_BYTES[_checks.dtype_name(dtype)]
    return _checks.max_width((_bwd_bytes if backward else _fwd_bytes)(io))
