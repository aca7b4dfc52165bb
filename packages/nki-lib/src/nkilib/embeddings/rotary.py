"""Rotary position embedding, forward and backward, in the two layouts models use:

* ``"half"`` (Hugging Face ``rotate_half``): the rotated pairs are (x[i], x[i + D/2]);
* ``"interleaved"`` (GPT-J, Meta's original Llama): the pairs are (x[2i], x[2i + 1]).

Each pair (a, b) at position s with frequency i becomes (a cos - b sin, b cos + a sin), with
``cos[s, i]`` and ``sin[s, i]`` given for the D/2 distinct frequencies. The backward is the
inverse rotation (sin negated), so one kernel does both.

x is [B, S, H, D] (tokens on partitions, 128 positions per tile; each tile's H heads x D dims on
the free axis). cos/sin [S, D/2] are loaded once per tile as [P, 1, D/2] and read by every head
through a stride-0 view, never copied per head. VectorE computes the first element of each pair
while GpSimd computes the second, both in fp32, writing the x-dtype result tile that goes out.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, row_tiles, scratch, store

LAYOUTS = ("half", "interleaved")


@nki.jit
def rope_kernel(x, cos, sin, layout, inverse):
    """x [B, S, H, D], cos/sin [S, D/2] -> [B, S, H, D] rotated (inverse=True: rotated back)."""
    batch, seq, heads, dim = x.shape
    half = dim // 2
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    # forward: (a c - b s, b c + a s); inverse: (a c + b s, b c - a s)
    first_op, second_op = (nl.add, nl.subtract) if inverse else (nl.subtract, nl.add)
    tables = Ring(2, ((P, 1, half), cos.dtype), ((P, 1, half), sin.dtype))
    ins = Ring(2, ((P, heads, dim), x.dtype))
    outs = Ring(2, ((P, heads, dim), x.dtype))
    ac, bs, bc, as_ = (scratch((P, heads, half), nl.float32) for _ in range(4))
    for s0, n in row_tiles(seq):
        c, s = tables.next()
        nisa.dma_copy(dst=c[0:n], src=cos.reshape((seq, 1, half))[s0:s0 + n])
        nisa.dma_copy(dst=s[0:n], src=sin.reshape((seq, 1, half))[s0:s0 + n])
        cb, sb = c[0:n].broadcast(1, heads), s[0:n].broadcast(1, heads)
        for b in range(batch):
            (xt,) = ins.next()
            nisa.dma_copy(dst=xt[0:n], src=x[b, s0:s0 + n])
            a, bb = _pairs(xt, n, heads, dim, layout)
            (ot,) = outs.next()
            oa, ob = _pairs(ot, n, heads, dim, layout)
            nisa.tensor_tensor(dst=ac[0:n], data1=a, data2=cb, op=nl.multiply)
            nisa.tensor_tensor(dst=bs[0:n], data1=bb, data2=sb, op=nl.multiply)
            nisa.tensor_tensor(dst=oa, data1=ac[0:n], data2=bs[0:n], op=first_op)
            nisa.tensor_tensor(dst=bc[0:n], data1=bb, data2=cb, op=nl.multiply, engine=nisa.gpsimd_engine)
            nisa.tensor_tensor(dst=as_[0:n], data1=a, data2=sb, op=nl.multiply, engine=nisa.gpsimd_engine)
            nisa.tensor_tensor(dst=ob, data1=bc[0:n], data2=as_[0:n], op=second_op, engine=nisa.gpsimd_engine)
            store(out[b, s0:s0 + n], ot[0:n])
    return out


def _pairs(t, n, heads, dim, layout):
    """Views (first, second) of the rotated pairs in the first n partitions of a [P, H, D] tile,
    each [n, H, D/2]."""
    half = dim // 2
    if layout == "half":
        return t[0:n, :, 0:half], t[0:n, :, half:dim]
    pairs = t.reshape((P, heads, half, 2))
    return pairs[0:n, :, :, 0], pairs[0:n, :, :, 1]


def _bytes(io: int) -> int:
    return 4 * io + 2 * 4 + 1  # x and out (two each); four fp32 half-width products; cos/sin


def check(x, cos, sin, layout) -> str:
    """The dtype of arguments rope (and rope_backward) take; NkilibError for any they refuse."""
    if layout not in LAYOUTS:
        raise _checks.NkilibError("rope.layout", f"layout={layout!r}; expected one of {LAYOUTS}")
    dt = _checks.check_float("x", x)
    if len(x.shape) not in (3, 4):
        raise _checks.NkilibError("shape", f"x has shape {list(x.shape)}; expected [S, H, D] or [B, S, H, D]")
    _checks.check_rows("x", x)  # no empty inputs
    seq, heads, dim = (int(d) for d in x.shape[-3:])
    if dim % 2 or dim == 0:
        raise _checks.NkilibError("rope.head_dim", f"head dim D={dim} of x {list(x.shape)} must be even (rotated pairs)")
    for name, t in (("cos", cos), ("sin", sin)):
        _checks.check_shape(name, t, (seq, dim // 2))
        _checks.check_same_dtype(name, t, dt)
    _checks.check_sbuf("heads x head dim", heads * dim, _bytes(_checks.DTYPE_BYTES[dt]), "rope")
    return dt


def _run(x, cos, sin, layout, inverse):
    check(x, cos, sin, layout)
    x4 = x if len(x.shape) == 4 else x.reshape((1, *x.shape))
    return rope_kernel(x4, cos, sin, layout, inverse).reshape(x.shape)


def rope(x, cos, sin, layout: str = "half"):
    """x [S, H, D] or [B, S, H, D] rotated by position; cos, sin [S, D/2] in x's dtype."""
    return _run(x, cos, sin, layout, False)


def rope_backward(dy, cos, sin, layout: str = "half"):
    """dx of rope(x, cos, sin, layout) for the output gradient dy (the inverse rotation of dy)."""
    return _run(dy, cos, sin, layout, True)


def max_heads_x_dim(dtype) -> int:
    return _checks.max_width(_bytes(_checks.DTYPE_BYTES[_checks.dtype_name(dtype)]))
