"""Softmax over the last dim, forward and backward.

Per 128-row tile: DMA in; VectorE takes each row's max (negated, the bias ScalarE needs); ScalarE
computes exp(x - max) and sums each row in the same instruction, fp32; VectorE takes 1/sum and
scales the row into the output dtype; DMA out. The backward is dx = y * (dy - sum(dy * y)).
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, loader, prefetched, scratch, store


@nki.jit
def softmax_kernel(x):
    """x [R, C] -> softmax over C, x's dtype."""
    rows, cols = x.shape
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    e = scratch((P, cols), nl.float32)
    outs = Ring(2, ((P, cols), x.dtype))
    stats = Ring(2, *[((P, 1), nl.float32)] * 3)
    for (p0, n), (xt,) in prefetched(rows, loader(x)):
        neg_max, total, inv = stats.next()
        nisa.tensor_reduce(dst=neg_max[0:n], op=nl.max, data=xt[0:n], axis=1, negate=True)
        nisa.activation(dst=e[0:n], op=nl.exp, data=xt[0:n], bias=neg_max[0:n], reduce_op=nl.add, reduce_res=total[0:n])
        nisa.reciprocal(dst=inv[0:n], data=total[0:n])
        (yt,) = outs.next()
        nisa.tensor_scalar(dst=yt[0:n], data=e[0:n], op0=nl.multiply, operand0=inv[0:n])
        store(y[p0:p0 + n, :], yt[0:n])
    return y


@nki.jit
def softmax_backward_kernel(dy, y):
    """dy, y [R, C] -> dx = y * (dy - sum(dy * y)) over C."""
    rows, cols = y.shape
    dx = nl.ndarray(y.shape, dtype=y.dtype, buffer=nl.shared_hbm)
    prod = scratch((P, cols), nl.float32)
    outs = Ring(2, ((P, cols), y.dtype))
    dots = Ring(2, ((P, 1), nl.float32))
    for (p0, n), (dyt, yt) in prefetched(rows, loader(dy, y)):
        nisa.tensor_tensor(dst=prod[0:n], data1=dyt[0:n], data2=yt[0:n], op=nl.multiply)
        (dot,) = dots.next()
        nisa.tensor_reduce(dst=dot[0:n], op=nl.add, data=prod[0:n], axis=1)
        (dxt,) = outs.next()
        nisa.scalar_tensor_tensor(dst=dxt[0:n], data=dyt[0:n], op0=nl.subtract, operand0=dot[0:n], op1=nl.multiply,
                                  operand1=yt[0:n])
        store(dx[p0:p0 + n, :], dxt[0:n])
    return dx


def _fwd_bytes(io: int) -> int:
    return 4 * io + 4  # x and y (two each: prefetch / store overlap); fp32 exponentials


def _bwd_bytes(io: int) -> int:
    return 6 * io + 4  # dy and y (two each), dx (two); fp32 products


def check_forward(x) -> tuple[int, int]:
    """(rows, cols) of an input softmax takes; NkilibError for any it refuses."""
    dt = _checks.check_float("x", x)
    rows, cols = _checks.check_rows("x", x)
    _checks.check_sbuf("last dim", cols, _fwd_bytes(_checks.DTYPE_BYTES[dt]), "softmax")
    return rows, cols


def check_backward(dy, y) -> tuple[int, int]:
    """(rows, cols) of arguments softmax_backward takes; NkilibError for any it refuses."""
    dt = _checks.check_float("y", y)
    rows, cols = _checks.check_rows("y", y)
    _checks.check_shape("dy", dy, y.shape)
    _checks.check_same_dtype("dy", dy, dt)
    _checks.check_sbuf("last dim", cols, _bwd_bytes(_checks.DTYPE_BYTES[dt]), "softmax_backward")
    return rows, cols


def softmax(x):
    """Softmax over the last dim of x (any leading dims)."""
    rows, cols = check_forward(x)
    return softmax_kernel(x.reshape(rows, cols)).reshape(x.shape)


def softmax_backward(dy, y):
    """dx of y = softmax(x) for the output gradient dy."""
    rows, cols = check_backward(dy, y)
    return softmax_backward_kernel(dy.reshape(rows, cols), y.reshape(rows, cols)).reshape(y.shape)


def max_cols(dtype, backward: bool = False) -> int:
    io = _checks.DTYPE_BYTES[_checks.dtype_name(dtype)]
    return _checks.max_width((_bwd_bytes if backward else _fwd_bytes)(io))
