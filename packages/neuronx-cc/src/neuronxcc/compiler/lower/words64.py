"""int64 arithmetic, bitwise ops, min/max and compares of any range, by 32-bit words on GpSimd's
integer ALU (and VectorE's bitvec datapath, which treats words as bit patterns).

int64 has no engine type, so an int64 operand that may exceed 2**24 is moved onto the chip as its
bytes (uint32 pairs) and read as its two words - the low one as uint32, the high one as int32,
patterns of doubled strides over the tile (``_load_words``) - and computed with exact 32-bit
integer instructions (``integers.py`` sends such nodes here); the result's words are copied side
by side and stored as whole elements (``_store_words``):

* add: ``lo = a.lo + b.lo`` (wrapping), carry ``lo < a.lo`` (unsigned), ``hi = a.hi + b.hi + carry``;
  subtract likewise with the borrow ``a.lo < b.lo``; the result's words are stored as they are;
* compares: ``a < b`` is ``a.hi < b.hi or (a.hi == b.hi and a.lo < b.lo)`` (the low words
  unsigned), ``==`` both words equal; the 1/0 result is cast to bool;
* maximum/minimum: that compare picks each word of one operand or the other (a predicated copy);
  select likewise by its bool predicate;
* negate is ``0 - a``; abs picks ``a`` or ``0 - a`` by the sign of the high word (INT64_MIN stays
  itself, as PyTorch's does);
* and/or/xor/not: each word on VectorE's bitvec datapath (bit patterns, no cast);
* multiply: the low 64 bits of the product, ``lo = a.lo * b.lo`` (wrapping) and ``hi = mulhi(a.lo,
  b.lo) + a.lo * b.hi + a.hi * b.lo`` (wrapping; the low 32 bits of a product do not depend on
  signedness, so the high words are multiplied as uint32). ``mulhi``, the high word of the 64-bit
  product of two uint32, is built from their 16-bit halves (VectorE shifts and masks): the four
  partial products are below 2**32, so each is exact on the uint32 ALU.

Operands are HBM views (inputs, stored values) or one number (its words are immediates).
"""

from __future__ import annotations

import functools

import numpy as np
from neuron_sim.isa import CopyPredicated, TensorCopy, TensorScalar, TensorTensor

from ..dma import compact_dims, hbm_pattern, onchip_compact_strides
from ..emitter import Operand
from ..layout import Form, free_limit, plan_tiles
from ..sbuf import Scope, tile_ap
from ..views import View, contiguous_strides
from .movement import hbm_view
from .registry import register_lowering
from .tiles import TileCtx

OPS = frozenset({"add", "subtract", "maximum", "minimum", "compare", "select", "multiply", "negate", "abs", "and", "or",
                 "xor", "not"})
_BITWISE = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor"}
_SWAPPED = {"LT": ("LT", False, False), "GT": ("LT", True, False), "GE": ("LT", False, True), "LE": ("LT", True, True),
            "EQ": ("EQ", False, False), "NE": ("EQ", False, True)}  # direction -> (test, swap operands, negate)


def _immediates(view: View):
    """(low word as uint32, high word as int32) of a scalar's value: immediates."""
    low, high = np.asarray([int(view.value)], dtype=np.int64).view(np.uint32).tolist()
    return int(low), int(np.uint32(high).astype(np.int32))


def _load_words(tc, role, view: View, box, form: int) -> list:
    """The box of int64 ``view`` on chip as uint32 pairs - one DMA of whole 8-byte elements, not a
    4-byte run per word - and its (low uint32, high int32) words as patterns over the tile."""
    offset, part_stride, dims = box.pattern(form)
    strides, _ = onchip_compact_strides(dims)
    compact, _ = compact_dims(dims)
    tile = tc.buffer(role, "uint32", free=2 * tc.max_free)
    tc.em.load(tile_ap(tile, tc.pc, [c for _, c in compact] + [2]),
               hbm_pattern(view.tensor, "uint32", 2 * offset, 2 * part_stride, tc.pc, [(2 * s, c) for s, c in compact] + [(1, 2)]))
    return [tile_ap(tile, tc.pc, tc.counts, [2 * s for s in strides], dtype=dtype, offset=half)
            for half, dtype in enumerate(("uint32", "int32"))]


def _store_words(tc, view: View, box, form: int, words) -> None:
    """``words`` (low, high) side by side in a uint32 tile, stored as whole 8-byte elements."""
    offset, part_stride, dims = box.pattern(form)
    tile = tc.buffer("result", "uint32", free=2 * tc.max_free)
    dense = [2 * s for s in contiguous_strides(tc.counts)]
    for half, (word, dtype) in enumerate(zip(words, ("uint32", "int32"))):
        tc.emit(TensorCopy(dst=tile_ap(tile, tc.pc, tc.counts, dense, dtype=dtype, offset=half), src=word, engine="gpsimd"))
    kept = [(s, c) for s, c in dims if c > 1]
    tc.em.store(hbm_pattern(view.tensor, "uint32", 2 * offset, 2 * part_stride, tc.pc, [(2 * s, c) for s, c in kept] + [(1, 2)]),
                tile_ap(tile, tc.pc, [c for _, c in kept] + [2]))


@register_lowering("words64")
def lower_words64(ctx, group) -> None:
    (node,) = group.nodes
    op = node.attrs["op"]
    out = node.outputs[0]
    dest = ctx.destination(out)
    data = node.inputs[1:] if op == "select" else node.inputs
    operands = []
    for v in data:
        view = ctx.resolve(v)
        operands.append(_immediates(view) if view.kind == "scalar" else hbm_view(ctx, v))
    predicate = ctx.resolve(node.inputs[0]) if op == "select" else None
    forms = [Form(predicate.strides, predicate.offset, 1)] if predicate is not None else []
    forms += [Form(w.strides, w.offset, 8) for w in operands if isinstance(w, View)]
    forms += [Form(dest.strides, dest.offset, 1 if op == "compare" else 8)]
    plan = plan_tiles(out.type.shape, forms, limit=free_limit(ctx.arch, 48), main_form=len(forms) - 1)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, plan.max_free)
        for index, box in enumerate(plan.boxes):
            tc.set_box(box, index)
            form = iter(range(len(forms)))
            flag = tc.full(tc.load("predicate", predicate, box, next(form))) if predicate is not None else None
            loaded = []
            for k, w in enumerate(operands):
                if isinstance(w, View):
                    loaded.append(_load_words(tc, ("w", k), w, box, next(form)))
                else:
                    loaded.append([tc.full(Operand(dtype, imm=imm)) for dtype, imm in zip(("uint32", "int32"), w)])
            results = _pick(tc, flag, *loaded) if op == "select" else _compute(tc, op, node.attrs.get("direction"), loaded)
            if op == "compare":
                tc.store(dest, box, next(form), results[0])
            else:
                _store_words(tc, dest, box, next(form), results)
    ctx.views[out.id] = dest
    ctx.group_log.append({"kind": "words64", "op": op, "shape": list(out.type.shape), "tiles": len(plan.boxes)})


def _as(ap, dtype):
    """``ap``'s bytes seen as ``dtype`` (a uint32 word as int32 and back, a 1/0 flag)."""
    return ap.__class__(ap.memory, dtype, ap.partition_start, ap.partition_count, ap.free, ap.offset)


def _compute(tc, op, direction, operands) -> list:
    """The result tiles of ``op`` over words ``(lo, hi)`` of each operand."""
    a = operands[0]
    b = operands[1] if len(operands) > 1 else None

    def tile(role, dtype):
        return tile_ap(tc.buffer(role, dtype), tc.pc, tc.counts)

    def tt(dst, x, y, alu, engine="gpsimd"):
        tc.emit(TensorTensor(dst=dst, in0=x, in1=y, op=alu, engine=engine))
        return dst

    as_int32 = functools.partial(_as, dtype="int32")
    if op in ("negate", "abs"):
        zero = [tc.full(Operand("uint32", imm=0)), tc.full(Operand("int32", imm=0))]
        negated = _add_sub(tc, tt, tile, "subtract", zero, a)
        if op == "negate":
            return negated
        flag = tt(tile("negative", "int32"), a[1], zero[1], "less")
        return _pick(tc, flag, negated, a)
    if op in ("add", "subtract"):
        return _add_sub(tc, tt, tile, op, a, b)
    if op in _BITWISE or op == "not":
        words = []
        for half, dtype in enumerate(("uint32", "int32")):
            word = tile(("bits", half), dtype)
            if op == "not":  # x ^ all ones
                tc.emit(TensorScalar(dst=word, src=a[half], op0="bitwise_xor", operand0=0xFFFFFFFF if half == 0 else -1,
                                     engine="vector"))
            else:
                tt(word, a[half], b[half], _BITWISE[op], engine="vector")
            words.append(word)
        return words
    if op == "multiply":
        return _multiply(tc, tt, tile, a, b)
    test, swap, negate = _SWAPPED[direction] if op == "compare" else ("LT", op == "maximum", False)
    x, y = (b, a) if swap else (a, b)
    high_equal = tt(tile("high_equal", "int32"), x[1], y[1], "equal")
    if test == "EQ":
        flag = as_int32(tt(tile("low", "uint32"), x[0], y[0], "equal"))
        tt(flag, flag, high_equal, "logical_and")
    else:
        flag = as_int32(tt(tile("low", "uint32"), x[0], y[0], "less"))
        tt(flag, flag, high_equal, "logical_and")
        tt(flag, flag, tt(tile("high_less", "int32"), x[1], y[1], "less"), "logical_or")
    if op == "compare":
        if negate:
            zero = tc.full(Operand("int32", imm=0))
            tt(flag, flag, zero, "equal")
        out = tile("result", "bool")
        tc.emit(TensorCopy(dst=out, src=flag, engine="vector"))  # 1/0 -> bool
        return [out]
    return _pick(tc, flag, a, b)  # maximum: a where b < a; minimum: a where a < b


def _add_sub(tc, tt, tile, op, a, b) -> list:
    lo = tt(tile("lo", "uint32"), a[0], b[0], op)
    carry = tt(tile("carry", "uint32"), lo, a[0], "less") if op == "add" else tt(tile("carry", "uint32"), a[0], b[0], "less")
    hi = tt(tile("hi", "int32"), a[1], b[1], op)
    tt(hi, hi, _as(carry, "int32"), op)
    return [lo, hi]


def _multiply(tc, tt, tile, a, b) -> list:
    """The low 64 bits of ``a * b`` (see the module docstring), all in uint32 tiles."""

    def vs(role, src, alu, imm):  # VectorE bitvec with an immediate: masks and logical shifts
        dst = tile(role, "uint32")
        tc.emit(TensorScalar(dst=dst, src=src, op0=alu, operand0=imm, engine="vector"))
        return dst

    alo, blo = a[0], b[0]
    a0, a1 = vs("a0", alo, "bitwise_and", 0xFFFF), vs("a1", alo, "right_shift", 16)
    b0, b1 = vs("b0", blo, "bitwise_and", 0xFFFF), vs("b1", blo, "right_shift", 16)
    p00 = tt(tile("p00", "uint32"), a0, b0, "multiply")
    p01 = tt(tile("p01", "uint32"), a0, b1, "multiply")
    p10 = tt(tile("p10", "uint32"), a1, b0, "multiply")
    high = tt(tile("high", "uint32"), a1, b1, "multiply")  # accumulates mulhi, then the high word
    mid = vs("mid", p00, "right_shift", 16)
    tt(mid, mid, vs("m01", p01, "bitwise_and", 0xFFFF), "add")
    tt(mid, mid, vs("m10", p10, "bitwise_and", 0xFFFF), "add")  # < 3 * 2**16
    tt(high, high, vs("h01", p01, "right_shift", 16), "add")
    tt(high, high, vs("h10", p10, "right_shift", 16), "add")
    tt(high, high, vs("carry", mid, "right_shift", 16), "add")  # mulhi(a.lo, b.lo): below 2**32, exact
    tt(high, high, tt(tile("cross0", "uint32"), alo, _as(b[1], "uint32"), "multiply"), "add")
    tt(high, high, tt(tile("cross1", "uint32"), _as(a[1], "uint32"), blo, "multiply"), "add")
    lo = tt(tile("lo", "uint32"), alo, blo, "multiply")
    return [lo, _as(high, "int32")]


def _pick(tc, flag, a, b) -> list:
    """Each word of ``a`` where ``flag`` is nonzero, else of ``b``: bytes copied as they are."""
    words = []
    for half, dtype in enumerate(("uint32", "int32")):
        word = tile_ap(tc.buffer(("pick", half), dtype), tc.pc, tc.counts)
        tc.emit(TensorCopy(dst=word, src=b[half], engine="gpsimd"))
        tc.emit(CopyPredicated(dst=word, src=a[half], predicate=flag))
        words.append(word)
    return words
