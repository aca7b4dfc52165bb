"""Fused residual add + RMSNorm: ``h = x + residual; y = rms_norm(h, weight, eps)``, returning
(y, h) - the pre-norm transformer block's "add the sublayer output, normalize for the next one".

One pass over HBM: x and residual come in, VectorE adds them (fp32 math, h rounded to x's dtype
as it is stored, the value the next residual add reads), ScalarE squares and sums the rounded h,
and y and h go out. The unfused form reads h back from HBM once more.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, loader, prefetched, scratch, store
from nkilib.norm._weights import broadcast_rows
from nkilib.norm.rmsnorm import inv_rms, scale_rows, stats_ring


@nki.jit
def residual_rms_norm_kernel(x, residual, weight, eps):
    """x, residual [R, H], weight [H] -> (y [R, H], h [R, H]), x's dtype."""
    rows, hidden = x.shape
    y = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    h = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    g = broadcast_rows(weight, hidden)
    sq = scratch((P, hidden), x.dtype)
    outs = Ring(2, ((P, hidden), x.dtype), ((P, hidden), x.dtype))
    stats = stats_ring(2)
    for (p0, n), (xt, rt) in prefetched(rows, loader(x, residual)):
        ht, yt = outs.next()
        ss, r = stats.next()
        nisa.tensor_tensor(dst=ht[0:n], data1=xt[0:n], data2=rt[0:n], op=nl.add)
        store(h[p0:p0 + n, :], ht[0:n])
        inv_rms(ht, n, hidden, eps, sq, ss, r)
        scale_rows(yt, ht, r, g, n)
        store(y[p0:p0 + n, :], yt[0:n])
    return y, h


def _bytes(io: int) -> int:
    return 10 * io  # weight, x and residual (two each: prefetch), squares, h and y (two each)


def check_forward(x, residual, weight) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of arguments residual_rms_norm takes; NkilibError for any it refuses."""
    dt = _checks.check_float("x", x)
    rows, hidden = _checks.check_rows("x", x)
    _checks.check_shape("residual", residual, x.shape)
    _checks.check_same_dtype("residual", residual, dt)
    _checks.check_shape("weight", weight, (hidden,))
    _checks.check_same_dtype("weight", weight, dt)
    _checks.check_sbuf("hidden size", hidden, _bytes(_checks.DTYPE_BYTES[dt]), "residual_rms_norm")
    return rows, hidden, dt


def residual_rms_norm(x, residual, weight, eps: float = 1e-6):
    """(rms_norm(x + residual, weight, eps), x + residual) over the last dim (any leading dims)."""
    rows, hidden, _ = check_forward(x, residual, weight)
    y, h = residual_rms_norm_kernel(x.reshape(rows, hidden), residual.reshape(rows, hidden), weight, float(eps))
    return y.reshape(x.shape), h.reshape(x.shape)


def max_hidden(dtype) -> int:
    return _checks.max_width(_bytes(_checks.DTYPE_BYTES[_checks.dtype_name(dtype)]))
