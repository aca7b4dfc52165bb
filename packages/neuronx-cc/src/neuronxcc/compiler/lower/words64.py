"""int64 add, subtract, min/max and compares of any range, by 32-bit words on GpSimd's integer ALU.

int64 has no engine type, so an int64 operand that may exceed 2**24 is loaded as its two words -
the low one as uint32, the high one as int32, moved as they are (``View.part``) - and computed with
exact 32-bit integer instructions (``integers.py`` sends such nodes here):

* add: ``lo = a.lo + b.lo`` (wrapping), carry ``lo < a.lo`` (unsigned), ``hi = a.hi + b.hi + carry``;
  subtract likewise with the borrow ``a.lo < b.lo``; the result's words are stored as they are;
* compares: ``a < b`` is ``a.hi < b.hi or (a.hi == b.hi and a.lo < b.lo)`` (the low words
  unsigned), ``==`` both words equal; the 1/0 result is cast to bool;
* maximum/minimum: that compare picks each word of one operand or the other (a predicated copy);
  select likewise by its bool predicate.

Operands are HBM views (inputs, stored values) or one number (its words are immediates).
"""

from __future__ import annotations

import numpy as np
from neuron_sim.isa import CopyPredicated, TensorCopy, TensorTensor

from ..emitter import Operand
from ..layout import Form, free_limit, plan_tiles
from ..sbuf import Scope, tile_ap
from ..views import View
from .movement import hbm_view
from .registry import register_lowering
from .tiles import TileCtx

OPS = frozenset({"add", "subtract", "maximum", "minimum", "compare", "select"})
_SWAPPED = {"LT": ("LT", False, False), "GT": ("LT", True, False), "GE": ("LT", False, True), "LE": ("LT", True, True),
            "EQ": ("EQ", False, False), "NE": ("EQ", False, True)}  # direction -> (test, swap operands, negate)


def _words(view: View):
    """(low word view as uint32, high word view as int32), or the immediates of a scalar."""
    if view.kind == "scalar":
        low, high = np.asarray([int(view.value)], dtype=np.int64).view(np.uint32).tolist()
        return int(low), int(np.uint32(high).astype(np.int32))
    return view.part("uint32", 0), view.part("int32", 1)


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
        operands.append(_words(view if view.kind == "scalar" else hbm_view(ctx, v)))
    predicate = ctx.resolve(node.inputs[0]) if op == "select" else None
    targets = [dest.part("uint32", 0), dest.part("int32", 1)] if op != "compare" else [dest]
    forms = [Form(predicate.strides, predicate.offset, 1)] if predicate is not None else []
    forms += [Form(w.strides, w.offset, 4) for words in operands for w in words if isinstance(w, View)]
    forms += [Form(t.strides, t.offset, 1 if op == "compare" else 4) for t in targets]
    plan = plan_tiles(out.type.shape, forms, limit=free_limit(ctx.arch, 40), main_form=len(forms) - 1)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, plan.max_free)
        for index, box in enumerate(plan.boxes):
            tc.set_box(box, index)
            form = iter(range(len(forms)))
            flag = tc.full(tc.load("predicate", predicate, box, next(form))) if predicate is not None else None
            loaded = []
            for k, words in enumerate(operands):
                pair = []
                for half, (w, dtype) in enumerate(zip(words, ("uint32", "int32"))):
                    if isinstance(w, View):
                        pair.append(tc.full(tc.load(("w", k, half), w, box, next(form), dtype)))
                    else:
                        pair.append(tc.full(Operand(dtype, imm=w)))
                loaded.append(pair)
            results = _pick(tc, flag, *loaded) if op == "select" else _compute(tc, op, node.attrs.get("direction"), *loaded)
            for target, result in zip(targets, results):
                tc.store(target, box, next(form), result)
    ctx.views[out.id] = dest
    ctx.group_log.append({"kind": "words64", "op": op, "shape": list(out.type.shape), "tiles": len(plan.boxes)})


def _compute(tc, op, direction, a, b) -> list:
    """The result tiles of ``a op b`` from words ``a = (lo, hi)``, ``b = (lo, hi)``."""

    def tile(role, dtype):
        return tile_ap(tc.buffer(role, dtype), tc.pc, tc.counts)

    def tt(dst, x, y, alu):
        tc.emit(TensorTensor(dst=dst, in0=x, in1=y, op=alu, engine="gpsimd"))
        return dst

    def as_int32(ap):  # a uint32 tile's bits seen as int32 (a 1/0 flag, or a word)
        return ap.__class__(ap.memory, "int32", ap.partition_start, ap.partition_count, ap.free, ap.offset)

    if op in ("add", "subtract"):
        lo = tt(tile("lo", "uint32"), a[0], b[0], op)
        carry = tt(tile("carry", "uint32"), lo, a[0], "less") if op == "add" else tt(tile("carry", "uint32"), a[0], b[0],
                                                                                     "less")
        hi = tt(tile("hi", "int32"), a[1], b[1], op)
        tt(hi, hi, as_int32(carry), op)
        return [lo, hi]
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


def _pick(tc, flag, a, b) -> list:
    """Each word of ``a`` where ``flag`` is nonzero, else of ``b``: bytes copied as they are."""
    words = []
    for half, dtype in enumerate(("uint32", "int32")):
        word = tile_ap(tc.buffer(("pick", half), dtype), tc.pc, tc.counts)
        tc.emit(TensorCopy(dst=word, src=b[half], engine="gpsimd"))
        tc.emit(CopyPredicated(dst=word, src=a[half], predicate=flag))
        words.append(word)
    return words
