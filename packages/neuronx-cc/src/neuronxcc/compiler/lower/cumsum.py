"""cumsum along one dim.

The scanned dim goes along the free axis (other dims on partitions and in the free dims). Each tile
is loaded as fp32 (a DMA cast) and scanned on VectorE with log2(L) shifted adds (Hillis-Steele:
``y[k] += y[k - s]`` for s = 1, 2, 4, ..., ping-ponging between two tiles; the untouched prefix is
copied by ScalarE meanwhile). When the dim spans several tiles, the last column of each tile's
result is carried into the first element of the next before its scan. Results are rounded to the
output dtype by the store's DMA cast. The additions happen in a different order than a sequential
fp32 scan, so results agree with the graph's ``np.cumsum`` to fp32 rounding, not bit for bit.
"""

from __future__ import annotations

import math

from neuron_sim import dtypes
from neuron_sim.isa import TensorCopy, TensorTensor

from ..layout import free_limit, plan_tiles
from ..sbuf import Scope, tile_ap
from . import register_lowering
from .elementwise import view_form
from .tiles import TileCtx


def _with(ap, free, extra_offset=0):
    return ap.__class__(ap.memory, ap.dtype, ap.partition_start, ap.partition_count, tuple(free),
                        ap.offset + extra_offset * ap.itemsize)


def _scan_slice(ap, start, count):
    """Elements [start, start + count) of the last free dim of ``ap``."""
    stride, _ = ap.free[-1]
    return _with(ap, ap.free[:-1] + ((stride, count),), start * stride)


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
    plan = plan_tiles(space, forms, (dim,), limit=free_limit(ctx.arch, 12), reduced_innermost=True, main_form=1)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, plan.max_free)
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
            if not red_idx:  # the dim is 1 long: the sum is the value
                tc.store(dest, box, 1, loaded)
                continue
            y = _with(loaded, tuple(loaded.free[k] for k in order))  # the scanned dim last
            if not y.is_contiguous():  # broadcast or permuted: scan a dense copy
                work = tile_ap(tc.buffer("y0", "float32"), pc, dense)
                tc.emit(TensorCopy(dst=work, src=y, engine=ctx.em.pick("vector", "scalar")))
                y = work
            carry = tile_ap(tc.buffer("carry", "float32", slot=tc.run), pc, kept or (1,))
            carry = _with(carry, (carry.free if kept else ()) + ((1, 1),))  # [P, *kept, 1]
            if not box.first:
                head = _scan_slice(y, 0, 1)
                tc.emit(TensorTensor(dst=head, in0=head, in1=carry, op="add"))
            other = tile_ap(tc.buffer("y1", "float32"), pc, dense)
            cur, nxt = y, other
            shift = 1
            while shift < length:
                tc.emit(TensorTensor(dst=_scan_slice(nxt, shift, length - shift), in0=_scan_slice(cur, shift, length - shift),
                                     in1=_scan_slice(cur, 0, length - shift), op="add"))
                tc.emit(TensorCopy(dst=_scan_slice(nxt, 0, shift), src=_scan_slice(cur, 0, shift), engine="scalar"))
                cur, nxt = nxt, cur
                shift *= 2
            if not box.last:
                tail = _scan_slice(cur, length - 1, 1)
                tc.emit(TensorCopy(dst=carry, src=tail, engine=ctx.em.pick("vector", "scalar")))
            # Back to box order for the store (inverse of the permutation).
            inverse = [0] * len(order)
            for pos, k in enumerate(order):
                inverse[k] = pos
            stored = _with(cur, tuple(cur.free[inverse[k]] for k in range(len(order))))
            tc.store(dest, box, 1, stored)
    ctx.group_log.append({"kind": "cumsum", "shape": list(space), "tiles": len(plan.boxes),
                          "dtype": dtypes.dtype_name(out.type.dtype)})
