"""cumsum along one dim.

The scanned dim goes along the free axis (other dims on partitions and in the free dims). Each tile
is loaded as fp32 (a DMA cast) and scanned on VectorE with log2(L) shifted adds (Hillis-Steele:
``y[k] += y[k - s]`` for s = 1, 2, 4, ..., ping-ponging between two tiles; the untouched prefix is
copied by ScalarE meanwhile). When the dim spans several tiles, the last column of each tile's
result is carried into the first element of the next before its scan. Results are rounded to the
output dtype by the store's DMA cast. The additions happen in a different order than a sequential
fp32 scan, so results agree with the graph's ``np.cumsum`` to fp32 rounding, not bit for bit.

With few scans and a long dim, the dim also goes on partitions, each holding the next contiguous
run: after the per-partition scans, TensorE adds to every partition the sum of the partitions
before it (a strictly upper-triangular ones matrix, built once by GpSimd AffineSelect, times the
partitions' totals) plus the running total of the earlier tiles (broadcast by a row of ones).
"""

from __future__ import annotations

import math

from neuron_sim import dtypes
from neuron_sim.isa import AffineSelect, Matmul, Memset, TensorCopy, TensorTensor
from neuron_sim.memory.access_pattern import PSUM

from ..layout import free_limit, plan_tiles
from ..sbuf import Scope, tile_ap
from .fused_common import view_form
from .registry import register_lowering
from .tiles import TileCtx


def _with(ap, free, extra_offset=0):
    return ap.__class__(ap.memory, ap.dtype, ap.partition_start, ap.partition_count, tuple(free),
                        ap.offset + extra_offset * ap.itemsize)


def _scan_slice(ap, start, count):
    """Elements [start, start + count) of the last free dim of ``ap``."""
    stride, _ = ap.free[-1]
    return _with(ap, ap.free[:-1] + ((stride, count),), start * stride)


ACROSS_MAX_KEPT = 16  # at most this many scans: the scanned dim may go on partitions too


def _scan(tc, ctx, y, dense, length):
    """Inclusive scan of ``y`` along its last free dim (Hillis-Steele, ping-pong with a second tile)."""
    cur, nxt = y, tile_ap(tc.buffer("y1", "float32"), y.partition_count, dense)
    shift = 1
    while shift < length:
        tc.emit(TensorTensor(dst=_scan_slice(nxt, shift, length - shift), in0=_scan_slice(cur, shift, length - shift),
                             in1=_scan_slice(cur, 0, length - shift), op="add"))
        tc.emit(TensorCopy(dst=_scan_slice(nxt, 0, shift), src=_scan_slice(cur, 0, shift), engine="scalar"))
        cur, nxt = nxt, cur
        shift *= 2
    return cur


def _unpermute(cur, order, red_idx, nfree):
    """The scanned tile (kept dims, scanned dim last) in the box's dim order, for the store."""
    if not red_idx:
        return _with(cur, cur.free[:-1])
    inverse = [0] * len(order)
    for pos, k in enumerate(order):
        inverse[k] = pos
    return _with(cur, tuple(cur.free[inverse[k]] for k in range(nfree)))


def _add_partition_offsets(tc, cur, kept, length, box) -> None:
    """Each partition holds the next run of the dim: add the sums of the partitions before it
    (TensorE: a strictly upper-triangular ones matrix times the partitions' totals, plus the
    running total of the earlier tiles broadcast by a row of ones) to all its elements."""
    pc = cur.partition_count
    nkept = math.prod(kept) if kept else 1
    k1 = kept or (1,)
    totals = _scan_slice(cur, length - 1, 1)  # [P, *kept, 1]: each partition's own sum
    totals = _with(totals, tuple(totals.free[:-1]) or ((0, 1),))
    dense_totals = tile_ap(tc.buffer("totals", "float32", free=tc.max_kept), pc, k1)
    tc.emit(TensorCopy(dst=dense_totals, src=totals, engine=tc.em.pick("vector", "scalar")))
    upper, ones_row, ones_col = _matrices(tc)
    offsets = tc.buffer("offsets", "float32", free=512, memory=PSUM)
    off = tile_ap(offsets, pc, (nkept,))
    moving = tile_ap(tc.buffer("totals", "float32", free=tc.max_kept), pc, (nkept,))
    tc.emit(Matmul(dst=off, stationary=tile_ap(upper, pc, (pc,)), moving=moving, accumulate=False))
    run_sb = tile_ap(tc.buffer("running_sb", "float32", free=tc.max_kept, count=1), 1, (nkept,))
    run_ps = tc.buffer("running", "float32", free=512, memory=PSUM, count=1)
    if not box.first:
        tc.emit(Matmul(dst=off, stationary=tile_ap(ones_row, 1, (pc,)), moving=run_sb, accumulate=True))
    if not box.last:  # running total for the next tiles, in PSUM, then to SBUF (TensorE reads SBUF)
        tc.emit(Matmul(dst=tile_ap(run_ps, 1, (nkept,)), stationary=_col(ones_col, pc), moving=moving,
                       accumulate=not box.first))
        tc.emit(TensorCopy(dst=run_sb, src=tile_ap(run_ps, 1, (nkept,)), engine=tc.em.pick("vector", "scalar")))
    wide = _with(tile_ap(offsets, pc, k1), (tile_ap(offsets, pc, k1).free if kept else ()) + ((0, length),))
    tc.emit(TensorTensor(dst=cur, in0=cur, in1=wide, op="add"))


def _col(tile, pc):
    return tile_ap(tile, pc, (1,))


def _matrices(tc):
    """Constant tiles: U[k, m] = (m > k) for [128, 128], a [1, 128] row and a [128, 1] column of ones."""
    mats = tc.consts.get("scan_matrices")
    if mats is None:
        ones = tc.scope.sbuf(128, "float32")
        upper = tc.scope.sbuf(128, "float32")
        row = tc.scope.sbuf(128, "float32", partitions=1)
        col = tc.scope.sbuf(1, "float32")
        tc.em.emit(Memset(dst=tile_ap(ones, 128, (128,)), value=1.0, engine="gpsimd"), hoist=True)
        # keep 1 where m - k - 1 >= 0 (m: the free index, k: the partition), else 0
        tc.em.emit(AffineSelect(dst=tile_ap(upper, 128, (128,)), src=tile_ap(ones, 128, (128,)), pattern=((1, 128),),
                                on_false_value=0.0, offset=-1, channel_multiplier=-1, cmp_op="greater_equal"), hoist=True)
        tc.em.emit(Memset(dst=tile_ap(row, 1, (128,)), value=1.0, engine="gpsimd"), hoist=True)
        tc.em.emit(Memset(dst=tile_ap(col, 128, (1,)), value=1.0, engine="gpsimd"), hoist=True)
        mats = tc.consts["scan_matrices"] = (upper, row, col)
    return mats


@register_lowering("cumsum")
def lower_cumsum(ctx, group) -> None:
    (node,) = group.nodes
    x, out = node.inputs[0], node.outputs[0]
    space = x.type.shape
    dest = ctx.destination(out)
    ctx.views[out.id] = dest
    if math.prod(space) == 0:
        return
    dim = node.attrs["dim"] % len(space)
    src = ctx.resolve(x)
    forms = [view_form(src), view_form(dest)]
    plan = plan_tiles(space, forms, (dim,), limit=free_limit(ctx.arch, 12), reduced_innermost=True, main_form=1,
                      allow_partition_reduce=True, partition_reduce_max_kept=ACROSS_MAX_KEPT)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, plan.max_free, max_kept=plan.max_kept)
        for i, box in enumerate(plan.boxes):
            tc.set_box(box, i)
            ctx.em.location = node.location
            pc = box.partitions
            kept_idx = [k for k, d in enumerate(box.free) if not d.reduced]
            red_idx = [k for k, d in enumerate(box.free) if d.reduced]
            order = kept_idx + red_idx
            kept = tuple(box.free[k].count for k in kept_idx)
            length = box.free[red_idx[0]].count if red_idx else 1
            dense = kept + (length,)
            loaded = tc.full(tc.load("x", src, box, 0, "float32"))  # in box order, as fp32 (a DMA cast)
            if not red_idx and not box.part_reduced:  # the dim is 1 long: the sum is the value
                tc.store(dest, box, 1, loaded)
                continue
            if not red_idx:  # one element of the dim per partition: scan a trailing [0, 1] dim
                loaded = _with(loaded, loaded.free + ((1, 1),))
                order = list(range(len(box.free))) + [len(box.free)]
            y = _with(loaded, tuple(loaded.free[k] for k in order))  # the scanned dim last
            if not y.is_contiguous():  # broadcast or permuted: scan a dense copy
                work = tile_ap(tc.buffer("y0", "float32"), pc, dense)
                tc.emit(TensorCopy(dst=work, src=y, engine=ctx.em.pick("vector", "scalar")))
                y = work
            if box.part_reduced:
                cur = _scan(tc, ctx, y, dense, length)
                _add_partition_offsets(tc, cur, kept, length, box)
                tc.store(dest, box, 1, _unpermute(cur, order, red_idx, len(box.free)))
                continue
            carry = tile_ap(tc.buffer("carry", "float32", slot=tc.run), pc, kept or (1,))
            carry = _with(carry, (carry.free if kept else ()) + ((1, 1),))  # [P, *kept, 1]
            if not box.first:
                head = _scan_slice(y, 0, 1)
                tc.emit(TensorTensor(dst=head, in0=head, in1=carry, op="add"))
            cur = _scan(tc, ctx, y, dense, length)
            if not box.last:
                tail = _scan_slice(cur, length - 1, 1)
                tc.emit(TensorCopy(dst=carry, src=tail, engine=ctx.em.pick("vector", "scalar")))
            tc.store(dest, box, 1, _unpermute(cur, order, red_idx, len(box.free)))
    ctx.group_log.append({"kind": "cumsum", "shape": list(space), "tiles": len(plan.boxes),
                          "dtype": dtypes.dtype_name(out.type.dtype)})
