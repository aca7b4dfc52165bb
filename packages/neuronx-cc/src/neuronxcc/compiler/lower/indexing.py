"""Gathers and scatters: indirect DMA with the indices on partitions (software DGE on GpSimd).

``DmaIndirect`` moves one *row* per partition between an HBM table and SBUF: ``table[index[p]]``,
where the table's rows are ``partition_stride`` elements apart and a row is any access pattern.
Index tiles are ``[P, 1]`` int32 columns loaded by DMA (int64 indices are cast; out-of-range values
stay out of range) or generated (iota/constant indices).

* ``gather(axis)`` (index_select, embedding): rows are the slices ``src.select(axis, v)`` - all
  other dims, through their strides, in chunks that fit SBUF - so any axis needs no transpose: a
  tile of 128 indices gathers 128 rows and one DMA stores them where the result wants them.
* ``index_add(axis, alpha)``: the same rows, scattered with ``accumulate=True`` (DMA compute
  adds in fp32) after multiplying by ``alpha`` on VectorE.
* ``take_along_axis(axis)`` (torch.gather) and ``scatter(axis, set|add)``: one element per index.
  The element's row number in a table starting at the tile's first line is
  ``idx + p * m`` (rows ``stride(axis)`` apart, ``m`` lines per partition step) or
  ``idx * stride(axis) + p * s`` (rows one element apart), computed exactly on VectorE (the
  planner keeps every row number below 2**24, where fp32 integer math is exact) from a GpSimd
  ``Iota``. A table spanning several lines cannot detect an index past the end of its own line,
  so a one-element indirect gather from that line's ``size(axis)`` rows checks the raw indices
  first whenever arithmetic was needed.

Out-of-range indices raise at run time, as the graph's reference does (``graph.index_out_of_bounds``):
the indirect DMA's ``oob_mode="error"`` stops with ``dma.index_out_of_bounds`` naming the index,
the dimension size (the table's rows) and the node's source line.

Scatter numerics follow the reference exactly: the result starts as the operand, updates apply in
index order (a later duplicate wins in ``set`` mode; ``add`` accumulates in fp32 in index order,
as ``np.add.at``). ``set`` moves values in their own dtype; ``add`` into anything but fp32 runs on
an fp32 copy, converted once at the end (integer adds only where fp32 is exact: ``integers.py``).
"""

from __future__ import annotations

import itertools
import math

from neuron_sim import dtypes
from neuron_sim.isa import DmaIndirect, Iota, ScalarTensorTensor, TensorScalar, TensorTensor

from ..dma import hbm_pattern
from ..emitter import onchip_dtype
from ..layout import Box, Form, FreeDim, merge_axes
from ..sbuf import Scope, column, tile_ap
from ..views import View
from .movement import hbm_view, materialize
from .registry import register_lowering
from .tiles import TileCtx

PARTITIONS = 128
ROW_CHUNK = 4096  # elements per partition of one gathered/scattered row piece
EXACT_LIMIT = 1 << 24  # integers below this survive the engines' fp32 arithmetic
BUFFERS = 3
# One element per index: the tiles are [P, 1] columns, so many can be in flight (each tile is a
# chain of small DMAs whose fixed latency would otherwise serialize the loop).
ELEMENT_BUFFERS = 16
ELEMENT_AHEAD = 12
INDIRECT_QUEUES = ("qGpSimdDynamic0", "qGpSimdDynamic1")


# --- shared helpers ------------------------------------------------------------------------------------


def _words(dtype: str, offset: int, dims: list[tuple[int, int]]):
    """8-byte elements (int64) move as pairs of int32 words: bit-exact, and SBUF holds int32."""
    if dtypes.itemsize(dtype) != 8:
        return dtype, offset, dims
    dims = [(2 * s, c) for s, c in dims if c > 1]
    if dims and dims[-1][0] == 2:
        dims[-1] = (1, 2 * dims[-1][1])
    else:
        dims.append((1, 2))
    return "int32", 2 * offset, dims


def _queue(ctx) -> str:
    n = ctx.em.counts.get("DMA_INDIRECT", 0)
    return INDIRECT_QUEUES[n % len(INDIRECT_QUEUES)]


def indirect(ctx, direction, onchip, view: View, offset, rows, row_stride, dims, index, accumulate=False):
    """A DmaIndirect between ``onchip`` ([P, w]) and ``rows`` rows of ``view``'s tensor."""
    dtype, off, words = _words(view.dtype, offset, list(dims))
    stride = row_stride * (2 if dtype != view.dtype else 1)
    table = hbm_pattern(view.tensor, dtype, off, stride, rows, [d for d in words if d[1] > 1] or [(1, 1)])
    ctx.em.emit(DmaIndirect(direction=direction, onchip=onchip, table=table, index=index, accumulate=accumulate,
                            oob_mode="error", engine="gpsimd", queue=_queue(ctx)))


def _onchip_dtype(dtype: str) -> str:
    return "int32" if dtypes.itemsize(dtype) == 8 else onchip_dtype(dtype)


def _elements(dtype: str) -> int:
    """On-chip elements per graph element (2 int32 words for an 8-byte type)."""
    return 2 if dtypes.itemsize(dtype) == 8 else 1


def position_tiles(shape, forms: list[Form], part: int | None, pc_max: int, spread: tuple[int, int] | None = None):
    """Tiles over ``shape``: chunks of ``pc_max`` along merged axis ``part`` on partitions, loops over
    the other axes (outer first; each ascending). Yields (offsets per form, partitions, partition
    strides per form).

    ``spread = (form, block)``: the scatter target's form and its dependency block (elements; the
    timing model tracks an HBM tensor in coarse blocks). Writes to one block depend on each other,
    and a DMA trigger waiting for one stalls its engine's in-order stream, so consecutive tiles
    should write different blocks: loops that revisit the same lines (stride 0 in the target) go
    outermost - they keep ascending, which is all a scatter's order means - and the innermost loop
    over lines visits them interleaved across blocks."""
    axes = merge_axes(shape, forms)
    zeros = tuple(0 for _ in forms)
    base = tuple(f.offset for f in forms)
    if not axes:
        yield base, 1, zeros
        return
    # (count, step, strides, is the partition chunk loop)
    loops = [(a.size, 1, a.strides, False) for i, a in enumerate(axes) if i != part]
    pax = axes[part] if part is not None else None
    if pax is not None:
        loops.append((-(-pax.size // pc_max), pc_max, pax.strides, True))
    orders = [range(loop[0]) for loop in loops]
    if spread is not None:
        form, block = spread
        loops.sort(key=lambda loop: loop[2][form] != 0)
        orders = [range(loop[0]) for loop in loops]
        if loops and loops[-1][2][form]:
            count, step, strides, _ = loops[-1]
            per_block = -(-block // abs(step * strides[form]))
            if 1 < per_block < count:  # consecutive entries one block apart
                orders[-1] = [b + o for o in range(per_block) for b in range(0, count - o, per_block)]
    for index in itertools.product(*orders):
        offs = tuple(b + sum(i * loop[1] * loop[2][f] for i, loop in zip(index, loops)) for f, b in enumerate(base))
        pc = 1
        for i, (_, step, _, chunk) in zip(index, loops):
            if chunk:
                pc = min(pc_max, pax.size - i * step)
        yield offs, pc, pax.strides if pax is not None else zeros


def row_chunks(shape, forms: list[Form], limit: int = ROW_CHUNK, max_dims: int = 3):
    """Pieces of one row (the dims a gather/scatter moves per index): full inner axes up to ``limit``
    elements, a chunk of the next, loops over the rest. Yields (offsets per form, [(count, strides)])."""
    axes = merge_axes(shape, forms)
    base = tuple(f.offset for f in forms)
    if not axes:
        yield base, []
        return
    free, loops, size = [], [], 1
    for a in reversed(axes):
        if loops or len(free) == max_dims:
            loops.insert(0, (a, 1))
            continue
        if size * a.size <= limit:
            free.insert(0, (a, a.size))
            size *= a.size
            continue
        chunk = max(1, limit // size)
        free.insert(0, (a, chunk))
        loops.insert(0, (a, chunk))
    ranges = [range(0, a.size, step) for a, step in loops]
    for index in itertools.product(*ranges):
        offs = [b + sum(i * a.strides[f] for i, (a, _) in zip(index, loops)) for f, b in enumerate(base)]
        counts = {id(a): c for a, c in free}
        for i, (a, step) in zip(index, loops):
            if id(a) in counts:
                counts[id(a)] = min(step, a.size - i)
        yield tuple(offs), [(counts[id(a)], a.strides) for a, _ in free]


def _box(offsets, pc, part_strides) -> Box:
    zeros = tuple(0 for _ in offsets)
    return Box(tuple(offsets), pc, tuple(part_strides), False, (FreeDim(zeros, 1, False),))


def index_column(tc, view: View, offsets, pc, part_strides, form: int):
    """This tile's indices as an int32 [pc, 1] SBUF column."""
    op = tc.load(("index", form), view, _box(offsets, pc, part_strides), form, "int32")
    return tc.colap(op)


def pipeline(n: int, load, commit, ahead: int = 1) -> None:
    """Emit ``load(t)`` ``ahead`` tiles before ``commit(t)``: loads of the next tile overlap the
    indirect DMAs of this one, and commits stay in tile order (a scatter's order is its meaning)."""
    for t in range(n + ahead):
        if t < n:
            load(t)
        if t >= ahead:
            commit(t - ahead)


# --- gather / index_add: whole rows ---------------------------------------------------------------------


def _read_operands(ctx, node):
    """(source in HBM, indices, destination) of a gather-like node, or None for an empty result
    (its destination is still placed)."""
    ctx.em.location = node.location or f"<{node.op}>"  # run-time index errors name the op at least
    src_v, idx_v = node.inputs
    out = node.outputs[0]
    dest = ctx.destination(out)
    ctx.views[out.id] = dest
    if out.type.num_elements == 0:
        return None
    return hbm_view(ctx, src_v), ctx.resolve(idx_v), dest


@register_lowering("gather")
def lower_gather(ctx, group) -> None:
    (node,) = group.nodes
    operands = _read_operands(ctx, node)
    if operands is None:
        return
    src, idx, dest = operands
    out = node.outputs[0]
    rank = len(src.shape)
    axis = node.attrs["axis"] % rank
    nidx = len(idx.shape)
    # positions: the index dims; row: the other dims of src (pre then post), as placed in the result
    out_pos = dest.strides[axis:axis + nidx]
    row_shape = src.shape[:axis] + src.shape[axis + 1:]
    row_src = src.strides[:axis] + src.strides[axis + 1:]
    row_out = dest.strides[:axis] + dest.strides[axis + nidx:]
    chunks = list(row_chunks(row_shape, [Form(row_src, src.offset), Form(row_out, dest.offset)],
                             ROW_CHUNK // _elements(src.dtype)))
    pos_forms = [Form(idx.strides, idx.offset), Form(out_pos, 0)]
    tiles = list(position_tiles(idx.shape, pos_forms, _longest(idx.shape, pos_forms), PARTITIONS))
    chip = _onchip_dtype(src.dtype)
    width = max(math.prod(c for c, _ in dims) for _, dims in chunks) * _elements(src.dtype)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, width, buffers=BUFFERS)
        work = [(t, c) for t in range(len(tiles)) for c in range(len(chunks))]
        cols = {}

        def load(k):
            t, c = work[k]
            offsets, pc, pstrides = tiles[t]
            if c == 0:  # one index column per tile, in a ring rotating by tile (chunks reuse it)
                tc.set_box(_box(offsets, pc, pstrides), t)
                cols[t] = index_column(tc, idx, offsets, pc, pstrides, 0)
            tc.set_box(_box(offsets, pc, pstrides), k)
            (src_off, _), dims = chunks[c]
            w = math.prod(n for n, _ in dims) * _elements(src.dtype)
            buf = tile_ap(tc.buffer("rows", chip), pc, (w,))
            indirect(ctx, "gather", buf, src, src_off, src.shape[axis], src.strides[axis],
                     [(s[0], n) for n, s in dims], cols[t])

        def commit(k):
            t, c = work[k]
            offsets, pc, pstrides = tiles[t]
            (_, out_off), dims = chunks[c]
            tc.slot = k
            w = math.prod(n for n, _ in dims) * _elements(src.dtype)
            buf = tile_ap(tc.buffer("rows", chip), pc, (w,))
            dtype, off, words = _words(dest.dtype, out_off + offsets[1], [(s[1], n) for n, s in dims])
            part = pstrides[1] * (2 if dtype != dest.dtype else 1)
            ctx.em.store(hbm_pattern(dest.tensor, dtype, off, part, pc, [d for d in words if d[1] > 1]), buf)

        pipeline(len(work), load, commit)
    ctx.group_log.append({"kind": "gather", "shape": list(out.type.shape), "tiles": len(tiles), "row_chunks": len(chunks)})


def _longest(shape, forms) -> int | None:
    axes = merge_axes(shape, forms)
    if not axes:
        return None
    return max(range(len(axes)), key=lambda i: (axes[i].size, i))


def _accumulator(ctx, operand: View, out, exact_direct: bool):
    """Where a scatter accumulates: the result itself (initialized to the operand) when that is
    exact, else an fp32 scratch copy. Returns (target view, result view, finish callback)."""
    dest = ctx.destination(out)
    ctx.views[out.id] = dest
    if exact_direct:
        if not (operand.kind == "hbm" and operand.tensor == dest.tensor and operand.strides == dest.strides
                and operand.offset == dest.offset):
            materialize(ctx, operand, dest)
        return dest, dest, lambda: None
    scratch = ctx.internal(out.type.shape, "float32", f"_acc{out.id}")
    materialize(ctx, operand, scratch)  # the DMA casts through fp32: the reference's f32(operand)
    return scratch, dest, lambda: materialize(ctx, scratch, dest)


@register_lowering("index_add")
def lower_index_add(ctx, group) -> None:
    (node,) = group.nodes
    ctx.em.location = node.location or f"<{node.op}>"  # run-time index errors name the op at least
    op_v, idx_v, srcv = node.inputs
    out = node.outputs[0]
    operand = ctx.resolve(op_v)
    target, dest, finish = _accumulator(ctx, operand, out, out.type.dtype == "float32")
    idx = ctx.resolve(idx_v)
    source = ctx.resolve(srcv)
    rank = out.type.rank
    axis = node.attrs["axis"] % rank
    alpha = float(node.attrs.get("alpha", 1.0))
    n = idx.num_elements
    if n == 0 or out.type.num_elements == 0:
        finish()
        return
    flat_idx = idx.reshape((n,)) or hbm_view(ctx, idx_v).reshape((n,))
    row_shape = target.shape[:axis] + target.shape[axis + 1:]
    row_t = target.strides[:axis] + target.strides[axis + 1:]
    row_s = source.strides[:axis] + source.strides[axis + 1:]
    chunks = list(row_chunks(row_shape, [Form(row_t, target.offset), Form(row_s, source.offset)]))
    pos_forms = [Form(flat_idx.strides, flat_idx.offset), Form((source.strides[axis],), 0)]
    tiles = list(position_tiles((n,), pos_forms, 0, PARTITIONS))
    width = max(math.prod(c for c, _ in dims) for _, dims in chunks)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, width, buffers=BUFFERS)
        work = [(t, c) for t in range(len(tiles)) for c in range(len(chunks))]
        cols, rows = {}, {}

        def load(k):
            t, c = work[k]
            offsets, pc, pstrides = tiles[t]
            if c == 0:
                tc.set_box(_box(offsets, pc, pstrides), t)
                cols[t] = index_column(tc, flat_idx, offsets, pc, pstrides, 0)
            (_, src_off), dims = chunks[c]
            counts = [m for m, _ in dims] or [1]
            box = Box((src_off + offsets[1],), pc, (pstrides[1],), False,
                      tuple(FreeDim((s[1],), m, False) for m, s in dims) or (FreeDim((0,), 1, False),))
            tc.set_box(box, k)
            vals = tc.load("source", source, box, 0, "float32")
            buf = tc.full(vals)
            if alpha != 1.0 or vals.is_imm or not buf.is_contiguous():
                scaled = tile_ap(tc.buffer("scaled", "float32"), pc, (math.prod(counts),))
                ctx.em.emit(TensorScalar(dst=scaled, src=buf, op0="multiply", operand0=alpha,
                                         engine=ctx.em.pick("vector", "scalar")))
                buf = scaled
            rows[k] = tile_ap_like(buf, pc, math.prod(counts))

        def commit(k):
            t, c = work[k]
            (t_off, _), dims = chunks[c]
            indirect(ctx, "scatter", rows.pop(k), target, t_off, target.shape[axis], target.strides[axis],
                     [(s[0], m) for m, s in dims], cols[t], accumulate=True)

        pipeline(len(work), load, commit)
    finish()
    ctx.group_log.append({"kind": "index_add", "shape": list(out.type.shape), "tiles": len(tiles),
                          "fp32_copy": target is not dest})


def tile_ap_like(ap, partitions: int, width: int):
    """``ap`` (dense) as a flat [partitions, width] pattern."""
    return ap.__class__(ap.memory, ap.dtype, ap.partition_start, partitions, ((1, width),), ap.offset)


# --- take_along_axis / scatter: one element per index --------------------------------------------------


class ElementPlan:
    """How a tile of index positions addresses single elements of a target along ``axis``."""

    def __init__(self, shape, axis: int, idx: View, target: View, extra: list[View]):
        self.axis = axis
        self.V = target.shape[axis]
        t_strides = tuple(0 if d == axis else s for d, s in enumerate(target.strides))
        self.forms = [Form(idx.strides, idx.offset), Form(t_strides, target.offset)]
        self.forms += [Form(v.strides, v.offset) for v in extra]
        self.t_axis = target.strides[axis]
        axes = merge_axes(shape, self.forms)
        best = None
        for p in range(len(axes)) if axes else [None]:
            for option in ("rows", "elements"):
                plan = self._option(axes, p, option)
                if plan is None:
                    continue
                tiles, pc, mult, check, arithmetic = plan
                key = (tiles, check, arithmetic)
                if best is None or key < best[0]:
                    best = (key, p, option, pc, mult, check, arithmetic)
        _, self.part, self.option, self.pc, self.mult, self.check, self.arithmetic = best
        block = -(-math.prod(target.shape) // 256)  # neuron_sim.timing.plan.MAX_HBM_BLOCKS
        self.tiles = list(position_tiles(shape, self.forms, self.part, self.pc, spread=(1, block)))

    def _option(self, axes, p, option):
        V, t_ax = self.V, self.t_axis
        size = axes[p].size if p is not None else 1
        ts = axes[p].strides[1] if p is not None else 0
        others = math.prod(a.size for i, a in enumerate(axes) if i != p)
        if ts < 0 or t_ax < 0:
            return None
        if option == "rows":  # rows stride(axis) apart: index = idx + p * (ts / stride(axis))
            if ts == 0:
                mult = 0
            elif t_ax == 0 or ts % t_ax:
                return None
            else:
                mult = ts // t_ax
            pc = min(PARTITIONS, size)
            if mult:
                pc = max(1, min(pc, (EXACT_LIMIT - V) // mult + 1)) if V < EXACT_LIMIT else 1
            arithmetic = mult != 0 and pc > 1
        else:  # rows one element apart: index = idx * stride(axis) + p * ts
            if (V - 1) * t_ax >= EXACT_LIMIT:
                return None
            mult = ts
            pc = min(PARTITIONS, size)
            if ts:
                pc = max(1, min(pc, (EXACT_LIMIT - 1 - (V - 1) * t_ax) // ts + 1))
            arithmetic = t_ax != 1 or (mult != 0 and pc > 1)
        tiles = others * -(-size // pc)
        return tiles, pc, mult, arithmetic, arithmetic

    def table(self, pc: int) -> tuple[int, int]:
        """(rows, row stride) of the table a tile of ``pc`` partitions addresses."""
        if self.option == "rows":
            return self.V + (pc - 1) * self.mult, self.t_axis
        return (self.V - 1) * self.t_axis + (pc - 1) * self.mult + 1, 1


def element_indices(ctx, tc, plan: ElementPlan, idx: View, target: View, offsets, pc, pstrides, consts):
    """The int32 row numbers of one tile (and the bounds check of its raw indices when arithmetic hid them)."""
    raw = index_column(tc, idx, offsets, pc, pstrides, 0)
    if not plan.arithmetic:
        return raw
    # a raw-index check against the V rows of the tile's first line
    probe = tile_ap(tc.buffer("probe", _onchip_dtype(target.dtype)), pc, (_elements(target.dtype),))
    indirect(ctx, "gather", probe, target, offsets[1], plan.V, plan.t_axis, [(1, 1)], raw)
    key = plan.mult
    ramp = consts.get(key)
    if ramp is None:  # p * mult for every partition, generated once
        ramp = consts[key] = tc.scope.sbuf(1, "int32")
        ctx.em.emit(Iota(dst=column(ramp, PARTITIONS), pattern=((1, 1),), offset=0, channel_multiplier=int(key)))
    rows = column(tc.buffer("rows_index", "int32"), pc)
    if plan.option == "rows":
        ctx.em.emit(TensorTensor(dst=rows, in0=raw, in1=column(ramp, pc), op="add", engine="vector"))
    else:
        ctx.em.emit(ScalarTensorTensor(dst=rows, src=raw, op0="multiply", operand0=float(plan.t_axis), op1="add",
                                       in1=column(ramp, pc), engine="vector"))
    return rows


@register_lowering("take_along_axis")
def lower_take_along_axis(ctx, group) -> None:
    (node,) = group.nodes
    operands = _read_operands(ctx, node)
    if operands is None:
        return
    src, idx, dest = operands
    out = node.outputs[0]
    axis = node.attrs["axis"] % len(src.shape)
    plan = ElementPlan(idx.shape, axis, idx, src, [dest])
    chip = _onchip_dtype(src.dtype)
    w = _elements(src.dtype)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, w, buffers=ELEMENT_BUFFERS)
        consts, index = {}, {}

        def load(t):
            offsets, pc, pstrides = plan.tiles[t]
            tc.set_box(_box(offsets, pc, pstrides), t)
            index[t] = element_indices(ctx, tc, plan, idx, src, offsets, pc, pstrides, consts)
            rows, stride = plan.table(pc)
            buf = tile_ap(tc.buffer("values", chip), pc, (w,))
            indirect(ctx, "gather", buf, src, offsets[1], rows, stride, [(1, 1)], index.pop(t))

        def commit(t):
            offsets, pc, pstrides = plan.tiles[t]
            tc.slot = t
            buf = tile_ap(tc.buffer("values", chip), pc, (w,))
            dtype, off, words = _words(dest.dtype, offsets[2], [(1, 1)])
            part = pstrides[2] * (2 if dtype != dest.dtype else 1)
            ctx.em.store(hbm_pattern(dest.tensor, dtype, off, part, pc, [d for d in words if d[1] > 1]), buf)

        pipeline(len(plan.tiles), load, commit, ELEMENT_AHEAD)
    ctx.group_log.append({"kind": "take_along_axis", "shape": list(out.type.shape), "tiles": len(plan.tiles),
                          "table": plan.option, "checked": plan.check})


@register_lowering("scatter")
def lower_scatter(ctx, group) -> None:
    (node,) = group.nodes
    ctx.em.location = node.location or f"<{node.op}>"  # run-time index errors name the op at least
    op_v, idx_v, upd_v = node.inputs
    out = node.outputs[0]
    mode = node.attrs.get("mode", "set")
    dtype = out.type.dtype
    # set mode moves the values: exact in their own dtype (8-byte ones excepted: on chip they are
    # int32); add mode accumulates in fp32 (the DMA's read-modify-write), so other dtypes add on an
    # fp32 copy converted once at the end, as the graph rounds.
    direct = dtype == "float32" or (mode == "set" and dtypes.itemsize(dtype) <= 4)
    operand = ctx.resolve(op_v)
    target, _, finish = _accumulator(ctx, operand, out, direct)
    idx = ctx.resolve(idx_v)
    if idx.num_elements == 0 or out.type.num_elements == 0:
        finish()
        return
    updates = ctx.resolve(upd_v)
    axis = node.attrs["axis"] % out.type.rank
    # the updates used are the leading idx.shape block of the updates tensor
    upd = updates.slice([0] * len(idx.shape), list(idx.shape))
    plan = ElementPlan(idx.shape, axis, idx, target, [upd])
    chip = _onchip_dtype(target.dtype)
    with Scope(ctx.builder) as scope:
        tc = TileCtx(ctx.em, scope, 1, buffers=ELEMENT_BUFFERS)
        consts, index, values = {}, {}, {}

        def load(t):
            offsets, pc, pstrides = plan.tiles[t]
            box = _box(offsets, pc, pstrides)
            tc.set_box(box, t)
            index[t] = element_indices(ctx, tc, plan, idx, target, offsets, pc, pstrides, consts)
            values[t] = tc.colap(tc.load("updates", upd, box, 2, chip))

        def commit(t):
            offsets, pc, _ = plan.tiles[t]
            rows, stride = plan.table(pc)
            indirect(ctx, "scatter", values.pop(t), target, offsets[1], rows, stride, [(1, 1)], index.pop(t),
                     accumulate=mode == "add")

        pipeline(len(plan.tiles), load, commit, ELEMENT_AHEAD)
    finish()
    ctx.group_log.append({"kind": "scatter", "mode": mode, "shape": list(out.type.shape), "tiles": len(plan.tiles),
                          "table": plan.option, "checked": plan.check, "fp32_copy": not direct})
