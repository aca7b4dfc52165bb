"""Lowering of a row-wise fused group (``fusion``: softmax, log_softmax, LayerNorm, ...) in one pass.

Every tile holds whole rows: rows on the partitions (and in the kept free dims), the reduced dims
in the free dims (``plan_tiles(whole_reduced=True)``). So per tile the inputs are loaded once and
everything happens on chip:

* full-space nodes compute on ``[P, *counts]`` tiles, as in any fused group;
* a reduction is finished in the tile that computed its input (VectorE ``TensorReduce`` along the
  free dims into an fp32 ``[P, kept]`` accumulator), rounded to its dtype like the store would;
* row nodes (``sum / N``, ``rsqrt(var + eps)``) compute on the ``[P, kept]`` row tiles;
* full-space nodes read a row value through a stride-0 pattern along the reduced dims (a
  ``[P, 1]`` per-partition scalar when a tile holds one row per partition: ScalarE/VectorE take it
  as a bias/scale operand).

Each node is the same operation, in the same order per element, as in the graph (and as the
multi-pass lowering did), so the results are unchanged; only the HBM round trips are gone.
"""

from __future__ import annotations

import math
from dataclasses import replace

from neuron_sim import AccessPattern, dtypes
from neuron_sim.graph.ops import VIEW_OPS
from neuron_sim.isa import TensorCopy
from neuron_sim.memory.access_pattern import SBUF

from ..emitter import Operand, onchip_dtype
from ..errors import CompileError
from ..fusion import view_chain
from ..layout import Form, FreeDim, free_limit, plan_tiles
from ..sbuf import Scope, broadcast, tile_ap
from ..views import View
from . import deferred
from . import reduce as reduce_lowering
from .elementwise_ops import lower_node, temps_needed
from .fused_common import empty_group, first_use_location, share_buffers, view_form
from .movement import materialize
from .tiles import TileCtx

# Tiles in flight (ring slots per role). A row-wise tile is small (one row per partition: a 128-long
# softmax row is 512 bytes) and its chain of a dozen dependent instructions is latency-bound, so many
# tiles in flight keep the engines busy; fewer are used when rows are long (see lower_rowwise).
BUFFERS = 8
# Rows at least this long get a partition each (tile = [128 rows, row]): row values are then [P, 1]
# columns, so the ops that read them are tensor_scalar (per-partition operand) rather than
# tensor_tensor over a stride-0 pattern, and a block of 128 rows is a tile the loop can pipeline.
ROW_COLUMN_MIN = 128
# Shorter rows: several per partition, but at least this many tiles when the tensor allows it - a
# one-pass loop is compute-bound, and the first load and last store only overlap work of other tiles
# (the planner's cost model sees DMA fixed costs, not that).
MIN_TILES = 8
MIN_FREE = 512  # ... but never tiles so small that per-instruction fixed costs dominate


def row_form(view: View, space, dims) -> tuple[Form, View]:
    """A row-shaped view (one number per row, row-major) as a form over ``space`` (stride 0 along
    the reduced ``dims``), and the view reshaped to ``space`` with the reduced dims of size 1."""
    keep = tuple(1 if d in dims else s for d, s in enumerate(space))
    if view.kind == "scalar":
        w = View.scalar(view.value, keep, view.dtype)
    else:
        w = view.reshape(keep)
    if w is None:
        return None, None
    strides = tuple(0 if d in dims else s for d, s in enumerate(w.strides))
    return Form(strides, w.offset, dtypes.itemsize(w.dtype) if w.kind == "hbm" else 0), w


def lower_rowwise(ctx, group) -> None:
    nodes = group.nodes
    space = tuple(group.space)
    dims = tuple(group.reduce_dims)
    members = {id(n) for n in nodes}
    is_row = {id(n): id(n) in group.row_nodes for n in nodes}
    produced = {v.id: n for n in nodes for v in n.outputs}
    # Inputs that are this group's row values seen through view ops (broadcast back over rows, or
    # reshaped): read from the row tiles, never from HBM.
    row_reads = {}
    leaves, seen = [], set()
    for n in nodes:
        for v in n.inputs:
            if v.id in produced or v.id in seen:
                continue
            seen.add(v.id)
            root, _ = view_chain(v, ctx.producer)
            if root.id in group.row_values and id(ctx.producer.get(root.id)) in members:
                row_reads[v.id] = root.id
            else:
                leaves.append((v, is_row[id(n)]))
    # Row values read back in the group through view ops (reshape, broadcast) stay on chip.
    stored = [v for v in ctx.stored_values(group) if _read_outside(ctx, v, members)]
    stores = [v for v in stored if v.id not in group.row_values]
    row_stores = [v for v in stored if v.id in group.row_values]
    reductions = [n for n in nodes if n.op == "reduce"]

    if math.prod(space) == 0:  # fusion never makes an empty group row-wise; kept for safety
        empty_group(ctx, reductions, stores + [v for v in row_stores if ctx.producer[v.id].op != "reduce"])
        return

    forms, leaf_views = [], []
    for v, per_row in leaves:
        view = ctx.resolve(v)
        if per_row:
            form, w = row_form(view, space, dims)
            if form is None:  # strides cannot say the reshape: copy it dense first
                dense = ctx.internal(view.shape, view.dtype, f"_w{v.id}")
                materialize(ctx, view, dense)
                form, w = row_form(dense, space, dims)
            view = w
        else:
            form = view_form(view)
        forms.append(form)
        leaf_views.append(view)
    dests = [ctx.destination(v) for v in stores]
    forms += [view_form(d) for d in dests]
    row_dests = [ctx.destination(v) for v in row_stores]
    forms += [row_form(d, space, dims)[0] for d in row_dests]
    main = len(leaves) if dests else 0

    full_nodes = [n for n in nodes if not is_row[id(n)]]
    stored_ids = {v.id for v in stored}
    # Deferred ops stay among full-space nodes (row values are read through other paths).
    defer = deferred.deferrable_values(nodes, ctx.consumers, stored_ids,
                                       lambda p, c: not is_row[id(p)] and not is_row[id(c)])
    roles, role_bytes = share_buffers(full_nodes, {v.id for v in stores}, defer)
    per_element = sum(dtypes.itemsize(onchip_dtype(view.dtype)) for (v, r), view in zip(leaves, leaf_views)
                      if view.kind != "scalar" and not r)
    per_element += role_bytes + 4 * max([temps_needed(n.op) for n in nodes] + [0])  # accumulators are per row
    row = math.prod(space[d] for d in dims)
    # Row tiles hold one number per row: a few bytes per element of the row, rounded up.
    per_element += -(-4 * (len(group.row_values) + len(leaves)) // row)
    buffers = BUFFERS
    while buffers > 1 and free_limit(ctx.arch, per_element, buffers=buffers) < row:
        buffers -= 1  # fewer tiles in flight rather than a second pass over HBM
    limit = free_limit(ctx.arch, per_element, buffers=buffers)
    if limit < row:
        raise CompileError("compile.internal", f"a row of {row} elements does not fit SBUF in a row-wise group")
    if row >= ROW_COLUMN_MIN:
        limit = row
    else:
        per_partition = -(-math.prod(space) // 128)
        limit = min(limit, max(row, max(per_partition // MIN_TILES, MIN_FREE) // row * row))
    plan = plan_tiles(space, forms, dims, limit=limit, main_form=main, ops_per_tile=len(nodes), whole_reduced=True)
    if not all(b.first and b.last and not b.part_reduced for b in plan.boxes):
        raise CompileError("compile.internal", "row-wise group planned with rows split over tiles")

    # Leaves every tile reads the same way (w and b of a LayerNorm: one vector broadcast to every
    # row) are loop-invariant: loaded once, into a buffer of their own, instead of once per tile.
    first = plan.boxes[0]
    invariant = {k for k, ((v, per_row), view) in enumerate(zip(leaves, leaf_views))
                 if not per_row and view.kind == "hbm" and len(plan.boxes) > 1
                 and first.partitions == plan.max_partitions
                 and all(b.pattern(k) == first.pattern(k) and b.counts == first.counts for b in plan.boxes)}
    held = {}

    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, plan.max_free, buffers=buffers, max_kept=plan.max_kept)
        tc.roles = roles
        tc.deferrable = defer
        for n in nodes:  # row values: [P, kept] rings of their own
            if is_row[id(n)]:
                dtype = onchip_dtype(n.outputs[0].type.dtype)
                tc.rings[(n.outputs[0].id, dtype, SBUF)] = scope.ring(tc.max_kept, dtype, buffers)
        tapes = []
        for index, box in enumerate(plan.boxes):
            tc.set_box(box, index)
            full_counts = box.counts
            kept_free = tuple(d for d in box.free if not d.reduced) or (FreeDim(tuple(0 for _ in forms), 1, False),)
            kbox = replace(box, free=kept_free)
            kept_counts = kbox.counts
            ctx.em.record()
            full_env, row_env = {}, {}
            for k, ((v, per_row), view) in enumerate(zip(leaves, leaf_views)):
                ctx.em.location = first_use_location(nodes, v) or nodes[0].location
                if per_row:
                    tc.counts = kept_counts
                    row_env[v.id] = tc.load(("leaf", v.id), view, kbox, k)
                    tc.counts = full_counts
                elif k in invariant:
                    if k not in held:
                        dtype = onchip_dtype(view.dtype)
                        tc.rings[(("held", v.id), dtype, SBUF)] = scope.ring(tc.max_free, dtype, 1)
                        held[k] = tc.load(("held", v.id), view, box, k)
                    full_env[v.id] = _partitions(held[k], tc.pc)
                else:
                    full_env[v.id] = tc.load(("leaf", v.id), view, box, k)
            for n in nodes:
                ctx.em.location = n.location
                out = n.outputs[0]
                if n.op == "reduce":
                    reduce_lowering.reduce_tile(tc, out.id, n.attrs["kind"], full_env[n.inputs[0].id], box)
                    acc, _ = reduce_lowering.result(tc, out.id, box)
                    dtype = onchip_dtype(out.type.dtype)
                    if dtype != acc.dtype:  # consumers see the result rounded to its dtype, as stored
                        tile = tc.buffer(("row", out.id), dtype, free=tc.max_kept)
                        rounded = tile_ap(tile, tc.pc, kept_counts)
                        tc.emit(TensorCopy(dst=rounded, src=acc, engine=tc.em.pick("vector", "scalar")))
                        acc = rounded
                    row_env[out.id] = _kept_operand(dtype, acc, kept_counts)
                elif is_row[id(n)]:
                    tc.counts = kept_counts
                    ins = [row_env[row_reads.get(x.id, x.id)] for x in n.inputs]
                    row_env[out.id] = lower_node(tc, n, ins)
                    tc.counts = full_counts
                else:
                    ins = [full_env[x.id] if x.id in full_env else _spread(row_env[row_reads[x.id]], box)
                           for x in n.inputs]
                    full_env[out.id] = lower_node(tc, n, ins)
            for k, (v, dest) in enumerate(zip(stores, dests)):
                ctx.em.location = ctx.producer[v.id].location
                tc.store(dest, box, len(leaves) + k, tc.full(full_env[v.id]))
            for k, (v, dest) in enumerate(zip(row_stores, row_dests)):
                ctx.em.location = ctx.producer[v.id].location
                n = ctx.producer[v.id]
                if n.op == "reduce":  # the fp32 accumulator, rounded by the store's DMA cast
                    src, _ = reduce_lowering.result(tc, v.id, box)
                else:
                    tc.counts = kept_counts
                    src = tc.full(row_env[v.id])
                    tc.counts = full_counts
                tc.store(dest, box, len(leaves) + len(dests) + k, src, drop_reduced=True)
            tapes.append(ctx.em.stop())
        ctx.em.pipelined(tapes, buffers)
    for v, dest in zip(stores + row_stores, dests + row_dests):
        ctx.views[v.id] = dest
    ctx.group_log.append({"kind": "fused", "ops": [n.op for n in nodes], "shape": list(space), "tiles": len(plan.boxes),
                          "partitions": plan.max_partitions, "free": plan.max_free, "partition_reduce": False,
                          "rowwise": True})


def _read_outside(ctx, v, members) -> bool:
    """Whether ``v`` is a graph output or read (through view ops) by a node outside the group."""
    if v.id in ctx.output_names:
        return True
    for c in ctx.consumers[v.id]:
        if c.op in VIEW_OPS:
            if _read_outside(ctx, c.outputs[0], members):
                return True
        elif id(c) not in members:
            return True
    return False


def _partitions(op: Operand, pc: int) -> Operand:
    """``op`` on the first ``pc`` partitions (a held tile read by a shorter last tile)."""
    if op.is_imm or op.ap.partition_count == pc:
        return op
    return Operand(op.dtype, ap=replace(op.ap, partition_count=pc),
                   col=None if op.col is None else replace(op.col, partition_count=pc))


def _kept_operand(dtype: str, ap: AccessPattern, kept_counts) -> Operand:
    """A dense ``[P, kept]`` row tile as an operand of row nodes (a column when one row per partition)."""
    if math.prod(kept_counts) == 1:
        col = AccessPattern(ap.memory, ap.dtype, ap.partition_start, ap.partition_count, ((1, 1),), ap.offset)
        return Operand(dtype, ap=broadcast(col, kept_counts), col=col)
    return Operand(dtype, ap=ap)


def _spread(op: Operand, box) -> Operand:
    """A row operand (over the kept free dims) read over the whole tile: stride 0 along the row."""
    if op.is_imm:
        return op
    if op.is_col:
        return Operand(op.dtype, ap=broadcast(op.col, box.counts), col=op.col)
    ap = op.ap
    kept = iter(ap.free)
    free = []
    for d in box.free:
        if d.reduced:
            free.append((0, d.count))
        else:
            stride, count = next(kept)
            free.append((stride, count))
    return Operand(op.dtype, ap=AccessPattern(ap.memory, ap.dtype, ap.partition_start, ap.partition_count,
                                              tuple(free), ap.offset))
