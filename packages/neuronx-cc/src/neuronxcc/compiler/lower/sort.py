"""argsort along one dim: a bitonic sorting network on chip, rows on partitions.

The sorted dim goes whole along the free axis (the other dims on partitions and, several rows per
partition, in the free dims before it); each row is padded to a power of two ``n``. Every element
carries a *key* (what is compared) and a *tie* number (its position, made unique and placed so that
lexicographic order on (key, tie) is PyTorch's stable order):

* floats: key = the value in fp32, NaN replaced by +inf; tie = position - n for numbers and
  position for NaN (ascending: NaN after +inf), position + n for numbers and position for NaN
  (descending: NaN first). -0.0 and 0.0 compare equal, so their order is the tie's: the original
  one. Padding gets key -+inf (last in the order) and tie position + 2n;
* int32/uint32: the value itself as key, compared and min/maxed on GpSimd's integer ALU (exact for
  every 32-bit value); other integers (and bool) arrive exact in fp32 by the load's DMA cast; tie =
  position.

Each of the log2(n) (log2(n) + 1) / 2 stages compare-exchanges every pair (i, i ^ j) of each row at
once: the two halves of the pairs are two strided access patterns (in blocks whose bit ``k`` is set
the roles swap, which folds into the patterns' strides), so a stage is nine instructions over the
whole tile whatever its size - three compares and two logical ops give ``swap`` (the first of the
pair comes later in the order), min/max write the keys and two selects the tie numbers, into a
second pair of tiles (ping-pong). The index is the final tie modulo n, written by the store's DMA
cast. Rows longer than fit SBUF (about 4096 elements) are refused (``compile.sort_length``).
"""

from __future__ import annotations

import math

import numpy as np
from neuron_sim import dtypes
from neuron_sim.isa import CopyPredicated, Iota, Memset, ScalarTensorTensor, Select, TensorCopy, TensorScalar, TensorTensor

from ..errors import node_error
from ..layout import free_limit, plan_tiles
from ..sbuf import Scope, tile_ap
from .elementwise import view_form
from .movement import hbm_view
from .registry import register_lowering
from .tiles import TileCtx

SORT_LENGTH = "compile.sort_length"
INTEGER_KEYS = ("int32", "uint32")  # compared on GpSimd's integer ALU
BYTES_PER_ELEMENT = 4 * 8  # keys and ties twice (ping-pong), the loaded row, NaN test, 1.5 of predicates


def _ap(tile, pc, free, offset=0):
    """An access pattern over ``tile`` with explicit (stride, count) dims (count-1 dims dropped)."""
    dims = tuple((s, c) for s, c in free if c > 1) or ((1, 1),)
    return tile_ap(tile, pc, [c for _, c in dims], [s for s, _ in dims], offset=offset)


def _halves(k: int, j: int, n: int, rows: int):
    """The free dims and offsets of the pairs' first and second elements in stage (k, j).

    Position i = a*2k + d*k + b*2j + s*j + c. In blocks with d = 0 the pair (s=0, s=1) is ordered
    ascending; with d = 1 descending, i.e. the first element of the pair is the one with s = 1:
    its offset d*(k + j) and the second's j + d*(k - j) make d a strided dim of both patterns.
    Rows of n are whole multiples of 2k, so rows and the a-blocks merge into one dim; for k = n
    (the last merge, all ascending) d does not occur.
    """
    if k == n:
        common = [(n, rows), (2 * j, n // (2 * j)), (1, j)]
        return common, 0, common, j
    first = [(2 * k, rows * n // (2 * k)), (k + j, 2), (2 * j, k // (2 * j)), (1, j)]
    second = [(2 * k, rows * n // (2 * k)), (k - j, 2), (2 * j, k // (2 * j)), (1, j)]
    return first, 0, second, j


def _stages(n: int):
    k = 2
    while k <= n:
        j = k // 2
        while j >= 1:
            yield k, j
            j //= 2
        k *= 2


def _key_words(ctx, node, src):
    """How the keys are held: [(dtype, source view, pad value)] from the most significant word.

    Floats and integers the integer check found within 2**24 are one fp32 word (a DMA cast);
    int32/uint32 beyond that one word compared on GpSimd's integer ALU; int64 beyond it its high
    word (int32) then its low word (uint32), moved as they are."""
    x, out = node.inputs[0], node.outputs[0]
    descending = bool(node.attrs.get("descending", False))

    def pad(dtype):
        if dtype == "float32":
            return float("-inf") if descending else float("inf")
        bounds = np.iinfo(dtypes.to_numpy(dtype))
        return int(bounds.min) if descending else int(bounds.max)

    exact = out.id in ctx.integer_alu
    if exact and x.type.dtype in INTEGER_KEYS:
        return [(x.type.dtype, src, pad(x.type.dtype))]
    if exact and x.type.dtype == "int64":
        view = hbm_view(ctx, x)
        return [("int32", view.part("int32", 1), pad("int32")), ("uint32", view.part("uint32", 0), pad("uint32"))]
    return [("float32", src, pad("float32"))]


class _Network:
    """The compare-exchange stages over a tile's keys (one or two words) and tie numbers."""

    def __init__(self, tc, words, descending: bool, work: int, pc: int):
        self.tc, self.words, self.pc = tc, words, pc
        self.worse = "less" if descending else "greater"  # the first of a pair comes after the second
        self.extremes = ("maximum", "minimum") if descending else ("minimum", "maximum")
        self.keys = [[tc.buffer(("key", w, p), dtype, free=work) for p in (0, 1)] for w, (dtype, _, _) in enumerate(words)]
        self.ties = [tc.buffer(("tie", p), "float32", free=work) for p in (0, 1)]
        half = max(work // 2, 1)
        self.flags = {dtype: [tc.buffer(("flag", dtype, f), dtype, free=half) for f in range(2)]
                      for dtype in {d for d, _, _ in words}}
        self.later = tc.buffer("later", "float32", free=half)  # the tie compare

    def engine(self, dtype):
        return "gpsimd" if dtype in INTEGER_KEYS else self.tc.em.pick("vector", "gpsimd")

    def stage(self, cur, k, j, n, rows, half):
        tc, pc = self.tc, self.pc
        fa, oa, fb, ob = _halves(k, j, n, rows)

        def pair(tile):
            return _ap(tile, pc, fa, oa), _ap(tile, pc, fb, ob)

        def flag(dtype, f):
            return tile_ap(self.flags[dtype][f], pc, (half,))

        # worse = (key_a, tie_a) after (key_b, tie_b), lexicographically from the first word
        worse, equal = None, None
        for w, (dtype, _, _) in enumerate(self.words):
            ka, kb = pair(self.keys[w][cur])
            word_worse, word_equal = flag(dtype, 0), flag(dtype, 1)
            tc.emit(TensorTensor(dst=word_worse, in0=ka, in1=kb, op=self.worse, engine=self.engine(dtype)))
            tc.emit(TensorTensor(dst=word_equal, in0=ka, in1=kb, op="equal", engine=self.engine(dtype)))
            if worse is None:  # the first word's flags stay in their tiles (the next word's are of its dtype)
                worse, equal = word_worse, word_equal
                continue
            tc.emit(TensorTensor(dst=word_worse, in0=equal, in1=word_worse, op="logical_and", engine="vector"))
            tc.emit(TensorTensor(dst=worse, in0=worse, in1=word_worse, op="logical_or", engine="vector"))
            tc.emit(TensorTensor(dst=equal, in0=equal, in1=word_equal, op="logical_and", engine="vector"))
        ta, tb = pair(self.ties[cur])
        later = tile_ap(self.later, pc, (half,))
        tc.emit(TensorTensor(dst=later, in0=ta, in1=tb, op="greater", engine=self.engine("float32")))
        tc.emit(TensorTensor(dst=later, in0=equal, in1=later, op="logical_and", engine="vector"))
        swap = worse
        tc.emit(TensorTensor(dst=swap, in0=worse, in1=later, op="logical_or", engine="vector"))
        nxt = 1 - cur
        for w, (dtype, _, _) in enumerate(self.words):
            ka, kb = pair(self.keys[w][cur])
            na, nb = pair(self.keys[w][nxt])
            if len(self.words) == 1:  # one word: the pair's keys are its min and max, whatever the ties
                tc.emit(TensorTensor(dst=na, in0=ka, in1=kb, op=self.extremes[0], engine=self.engine(dtype)))
                tc.emit(TensorTensor(dst=nb, in0=ka, in1=kb, op=self.extremes[1], engine=self.engine(dtype)))
                continue
            for dst, keep, other in ((na, ka, kb), (nb, kb, ka)):  # words move as they are
                tc.emit(TensorCopy(dst=dst, src=keep, engine="gpsimd"))
                tc.emit(CopyPredicated(dst=dst, src=other, predicate=swap))
        na, nb = pair(self.ties[nxt])
        tc.emit(Select(dst=na, predicate=swap, on_true=tb, on_false=ta, engine=self.engine("float32")))
        tc.emit(Select(dst=nb, predicate=swap, on_true=ta, on_false=tb, engine=self.engine("float32")))
        return nxt


@register_lowering("argsort")
def lower_argsort(ctx, group) -> None:
    (node,) = group.nodes
    x, out = node.inputs[0], node.outputs[0]
    space = x.type.shape
    dim = node.attrs["dim"] % len(space)
    descending = bool(node.attrs.get("descending", False))
    dest = ctx.destination(out)
    ctx.views[out.id] = dest
    if math.prod(space) == 0:
        return
    length = space[dim]
    n = 1 << max(length - 1, 0).bit_length()
    words = _key_words(ctx, node, ctx.resolve(x))
    limit = free_limit(ctx.arch, BYTES_PER_ELEMENT + 16 * (len(words) - 1), buffers=1)
    if n > limit:
        raise node_error(node, SORT_LENGTH, f"{node.op} of a dim of {length} elements: a row padded to {n} does not "
                         f"fit SBUF ({limit} elements per partition); run it on CPU (eager mode falls back by itself)")
    forms = [view_form(view) for _, view, _ in words] + [view_form(dest)]
    plan = plan_tiles(space, forms, (dim,), limit=max(limit * length // n, length),
                      whole_reduced=True, reduced_innermost=True, main_form=len(words))
    rows_max = max(math.prod(d.count for d in b.free if not d.reduced) for b in plan.boxes)
    work = rows_max * n
    pick = ctx.em.pick
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, max(plan.max_free, work), buffers=1, max_kept=rows_max)
        for i, box in enumerate(plan.boxes):
            tc.set_box(box, i)
            ctx.em.location = node.location
            pc = box.partitions
            kept = [d.count for d in box.free if not d.reduced]
            rows = math.prod(kept)
            red = [d for d in box.free if d.reduced]
            if len(red) > 1:
                raise node_error(node, SORT_LENGTH, f"{node.op}: the sorted dim was split across tile dims {box.free}")
            if not red:  # the dim is 1 long: every index is 0
                zeros = tile_ap(tc.buffer("zeros", "float32"), pc, box.counts)
                tc.emit(Memset(dst=zeros, value=0.0, engine=pick("vector", "gpsimd")))
                tc.store(dest, box, len(words), zeros)
                continue
            # [P, *kept, length] of an [P, rows, n] tile: kept dims dense, each row n apart
            row_strides = []
            stride = n
            for c in reversed(kept):
                row_strides.insert(0, stride)
                stride *= c
            real = [*zip(row_strides, kept), (1, length)]
            net = _Network(tc, words, descending, work, pc)
            ties = net.ties
            tc.emit(Iota(dst=_ap(ties[0], pc, [(1, rows * n)]), pattern=((0, rows), (1, n)) if rows > 1 else ((1, n),)))
            pad = [(n, rows), (1, n - length)]
            if n > length:  # padding: last in the order (its key), after every real element (its tie)
                tc.emit(TensorScalar(dst=_ap(ties[0], pc, pad, offset=length), src=_ap(ties[0], pc, pad, offset=length),
                                     op0="add", operand0=float(2 * n), engine=pick("vector", "gpsimd")))
            for w, (dtype, view, pad_key) in enumerate(words):
                key = net.keys[w][0]
                if n > length:
                    tc.emit(Memset(dst=_ap(key, pc, pad, offset=length), value=pad_key, engine=pick("vector", "gpsimd")))
                xs = tc.full(tc.load(("x", w), view, box, w, dtype))
                if dtype != "float32":
                    tc.emit(TensorCopy(dst=_ap(key, pc, real), src=xs, engine="gpsimd"))
                    continue
                ok = tile_ap(tc.buffer("ok", "float32", free=work), pc, kept + [length])
                tc.emit(TensorTensor(dst=ok, in0=xs, in1=xs, op="equal", engine=pick("vector", "gpsimd")))
                tc.emit(Select(dst=_ap(key, pc, real), predicate=ok, on_true=xs, on_false=float("inf"),
                               engine=pick("vector", "gpsimd")))
                # tie = position + n * ok (descending: NaN first) or position - n * ok (NaN last)
                tc.emit(ScalarTensorTensor(dst=_ap(ties[0], pc, real), src=ok, op0="multiply",
                                           operand0=float(n if descending else -n), op1="add",
                                           in1=_ap(ties[0], pc, real), engine=pick("vector", "gpsimd")))
            cur = 0
            half = rows * n // 2
            for k, j in _stages(n):
                cur = net.stage(cur, k, j, n, rows, half)
            index = _ap(ties[1 - cur], pc, real)  # the tile the last stage did not write
            tc.emit(TensorScalar(dst=index, src=_ap(ties[cur], pc, real), op0="mod", operand0=float(n),
                                 engine=pick("vector", "gpsimd")))
            tc.store(dest, box, len(words), index)
    ctx.group_log.append({"kind": "argsort", "shape": list(space), "dim": dim, "padded": n, "tiles": len(plan.boxes),
                          "keys": [d for d, _, _ in words]})
