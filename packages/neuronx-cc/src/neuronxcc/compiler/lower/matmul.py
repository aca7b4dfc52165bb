"""Lowering of a matmul group: a dot_general on TensorE, its epilogue fused into the PSUM evacuation.

``matmul_plan`` puts the dot in canonical form and picks tiles, stripes and their order; this
module emits it:

* **loads** of operand stripes on the Sync engine's DMA queues (a dtype the PE array does not take
  is cast by the DMA: integers and bools to fp32; fp32 with anything makes both fp32), or - for an
  operand whose contraction dim is the contiguous one - row-major loads into a staging buffer and
  TensorE ``Transpose`` of 128x128 blocks into a PSUM bank, copied into the stripe by
  VectorE/ScalarE (several blocks per copy). Each load is prefetched as far ahead as the buffer it
  overwrites allows (and a few output tiles at most); transposes are emitted one output tile ahead,
  so TensorE does them between the matmuls of the previous tile while the copies run elsewhere;
* **matmuls**: per output tile and packed position, one ``Matmul`` per K step (K rows on
  partitions), the first overwriting and the rest accumulating in fp32 in one PSUM bank; banks
  rotate (6, or all 8 when nothing is transposed), so TensorE runs ahead of the evacuation;
* **the epilogue**: the bank is evacuated by VectorE/ScalarE (whichever has less queued) into the
  dot's dtype - rounding exactly where the graph rounds - and the epilogue's elementwise nodes run
  on that tile with the fused-loop instruction selection (``elementwise_ops``); an fp32 dot read
  only by one activation or binary op is read by it straight from PSUM. Only stored values (graph
  outputs, values read elsewhere) go back to HBM, on GpSimd's DMA queues.
"""

from __future__ import annotations

import itertools
import math

from neuron_sim import dtypes
from neuron_sim.isa import Matmul, Memset, TensorCopy, TensorTensor, Transpose
from neuron_sim.memory.access_pattern import PSUM, SBUF

from ..dma import hbm_pattern
from ..emitter import Operand, onchip_dtype
from ..errors import node_error
from ..layout import Box, FreeDim
from ..sbuf import ALIGN_BYTES, Scope, tile_ap
from ..views import View
from . import deferred
from .elementwise_ops import ACTIVATION_FUNCS, BINARY_ALU, lower_node, temps_needed
from .fused_common import share_buffers
from .matmul_operands import operand_dims, split_axis
from .matmul_plan import (
    DMA_BYTES_PER_NS,
    Side,
    k_steps,
    longest,
    matmul_ns,
    merge_axes,
    outer_groups,
    schedule,
    transposed_is_cheaper,
)
from .movement import TRANSPOSE_DTYPES, materialize
from .registry import register_lowering
from .tiles import TileCtx

TENSOR_INPUTS = ("bfloat16", "float16", "float32", "float8_e4m3", "float8_e5m2")
PRETRANSPOSE_MIN = 1 << 20  # elements: smaller operands are never worth an extra pass through HBM
PRETRANSPOSE_REPEATS = 1.5  # considered when the schedule would transpose an operand this many times over
PRETRANSPOSE_GAIN = 0.97  # taken when the estimate (pre-pass included) is below this fraction
PRETRANSPOSE_FIXED_NS = 5000.0
EPILOGUE_BUFFERS = 3
# Batches of tiny products go to VectorE (see MatmulLowering._vector_shape).
VECTOR_MAX_K = 16
VECTOR_MAX_RESULT = 512
VECTOR_MIN_BATCH = 32
STAGING_SLOTS = 2
HELD_PER_LEAF = 4  # column tiles of one broadcast row kept on chip (each [128, <= 512] fp32)
LA_MAX = 16
TRANSPOSE_BANKS = 3  # PSUM banks for transposes: TensorE fills one while others are copied out
DMA_CHUNK_BYTES = 256 * 1024  # one stripe DMA moves at most this much (finer dependencies)
STAGING_CHUNK_BYTES = 128 * 1024
# Ops that may read the fp32 product straight from PSUM (one read; VectorE/ScalarE instructions).
PSUM_READERS = frozenset(ACTIVATION_FUNCS) | frozenset(BINARY_ALU) | {"abs", "negate", "compare", "convert"}


def aligned(elements: int, itemsize: int) -> int:
    """``elements`` rounded up to whole 64-byte blocks: neighbouring K steps of a stripe never share a
    block, so the timing model sees no false dependency between the DMAs/copies filling them."""
    return -(-elements * itemsize // ALIGN_BYTES) * ALIGN_BYTES // itemsize


def tensor_dtype(dtype: str) -> str:
    """The PE array input type an operand of ``dtype`` is loaded as (cast by the DMA)."""
    return dtype if dtype in TENSOR_INPUTS else "float32"


@register_lowering("matmul")
def lower_matmul(ctx, group) -> None:
    dot, epilogue = group.nodes[0], group.nodes[1:]
    out = dot.outputs[0]
    stores = ctx.stored_values(group)
    dests = [ctx.destination(v) for v in stores]
    if out.type.num_elements == 0:
        for v, d in zip(stores, dests):
            ctx.views[v.id] = d
        return
    (lhs_view, ldims), (rhs_view, rdims) = (_hbm_operand(ctx, v) for v in dot.inputs)
    if not _merges_ok(dot, ldims, rdims):  # merged dims the canonical form cannot take: copy them dense
        (lhs_view, ldims), (rhs_view, rdims) = (_hbm_operand(ctx, v, merged=False) for v in dot.inputs)
    produced = {v.id for n in group.nodes for v in n.outputs} | set(group.aliases)
    leaves, seen = [], set()
    for n in epilogue:
        for v in n.inputs:
            if v.id not in produced and v.id not in seen:
                seen.add(v.id)
                leaves.append(v)
    # Epilogue nodes over a reshape of the product (``Group.alt_spaces``) see their operands and
    # results as the product's shape: the same bytes in the same order.
    shape = tuple(out.type.shape)
    leaf_views = [_as_product(ctx, ctx.resolve(v), shape, f"_e{v.id}") for v in leaves]
    args = (ctx, group, dot, epilogue, lhs_view, rhs_view, leaves, leaf_views, stores,
            [_as_product(ctx, d, shape, None) for d in dests])
    lowering = MatmulLowering(*args, dims=(ldims, rdims))
    if lowering._vector_shape() is None and not lowering.merged:
        lowering = _maybe_pretranspose(lowering, args)
    lowering.run()
    for v, d in zip(stores, dests):
        ctx.views[v.id] = d


def _transposed_layout(lowering, i: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The dim order (batch, contraction, free) an operand is rewritten in so that its free dims
    are the contiguous ones, and the scratch shape."""
    a = lowering.dot.attrs
    batch, contract = (tuple(a.get("lhs_batch", ())), tuple(a.get("lhs_contract", ()))) if i == 0 else (
        tuple(a.get("rhs_batch", ())), tuple(a.get("rhs_contract", ())))
    view = lowering.views[i]
    perm = batch + contract + tuple(d for d in range(len(view.shape)) if d not in batch + contract)
    return perm, tuple(view.shape[d] for d in perm)


def _maybe_pretranspose(lowering, args):
    """An operand that would be transposed on TensorE for every stripe it streams through (neither
    operand fits SBUF transposed, e.g. a 4096x4096 activation times a 16384x4096 weight) is cheaper
    transposed once into an HBM scratch and then loaded directly: compare the estimates."""
    lowering.plan()
    best = (lowering.sched.estimate_ns, lowering, ())
    ctx = lowering.ctx
    for i, op in enumerate(lowering.ops):
        view = lowering.views[i]
        if not op.transposed or view.dtype not in TRANSPOSE_DTYPES or view.num_elements < PRETRANSPOSE_MIN:
            continue
        transposed = sum(lowering._fill_bytes(f) // op.itemsize for f in lowering.sched.fills if f.operand == i)
        if transposed < PRETRANSPOSE_REPEATS * view.num_elements:
            continue
        perm, shape = _transposed_layout(lowering, i)
        inverse = tuple(perm.index(d) for d in range(len(perm)))
        alt_views = list(args[4:6])
        alt_views[i] = View.hbm("<pretransposed>", shape, view.dtype).transpose(inverse)
        alt = MatmulLowering(*args[:4], *alt_views, *args[6:])
        alt.plan()
        prepass = 2 * view.num_elements * dtypes.itemsize(view.dtype) / DMA_BYTES_PER_NS + PRETRANSPOSE_FIXED_NS
        if alt.sched.estimate_ns + prepass < PRETRANSPOSE_GAIN * best[0]:
            best = (alt.sched.estimate_ns + prepass, alt, (i, perm, shape))
    if not best[2]:
        return lowering
    alt = best[1]
    i, perm, shape = best[2]
    view = lowering.views[i]
    scratch = ctx.internal(shape, view.dtype, f"_mmT{lowering.dot.inputs[i].id}")
    ctx.em.location = lowering.dot.location
    materialize(ctx, view.transpose(perm), scratch)  # TensorE transposes, once
    inverse = tuple(perm.index(d) for d in range(len(perm)))
    views = list(alt.views)
    views[i] = scratch.transpose(inverse)
    alt.views = tuple(views)
    alt.pretransposed = i
    return alt


def _hbm_operand(ctx, v, merged: bool = True) -> tuple[View, list]:
    """(view, per-dim strides or merged source axes) of a dot operand (``matmul_operands``)."""
    view, dims = operand_dims(ctx, v) if merged else (ctx.resolve(v), None)
    if view.kind == "hbm":
        return view, dims if dims is not None else list(view.strides)
    # a constant or iota operand: write it out once
    dense = ctx.internal(view.shape, view.dtype, f"_mm{v.id}")
    materialize(ctx, view, dense)
    return dense, list(dense.strides)


def _as_product(ctx, view: View, shape: tuple, hint: str | None) -> View:
    """``view`` (of an epilogue value's shape) reshaped to the product's ``shape`` (same element
    count, row-major); a view strides cannot say so is copied dense first (``hint``: its name)."""
    if tuple(view.shape) == shape:
        return view
    seen = view.reshape(shape)
    if seen is None:
        dense = ctx.internal(view.shape, view.dtype, hint or "_e")
        materialize(ctx, view, dense)
        seen = dense.reshape(shape)
    return seen


def _merges_ok(dot, ldims, rdims) -> bool:
    """Merged source axes are taken on batch and free dims, merged the same way on both operands;
    a merged contraction dim would split K into short passes (each costs a full TensorE pass)."""
    a = dot.attrs
    lc, rc = tuple(a.get("lhs_contract", ())), tuple(a.get("rhs_contract", ()))
    if any(isinstance(ldims[d], list) for d in lc) or any(isinstance(rdims[d], list) for d in rc):
        return False
    for dl, dr in zip(a.get("lhs_batch", ()), a.get("rhs_batch", ())):
        left, right = ldims[dl], rdims[dr]
        if isinstance(left, list) and isinstance(right, list) and [n for n, _ in left] != [n for n, _ in right]:
            return False
    return True


class MatmulLowering:
    def __init__(self, ctx, group, dot, epilogue, lhs, rhs, leaves, leaf_views, stores, dests, dims=None):
        self.ctx, self.group, self.dot, self.epilogue = ctx, group, dot, epilogue
        self.em = ctx.em
        self.arch = ctx.arch
        self.views = (lhs, rhs)
        # per operand dim: its element stride, or the source axes it merges (``matmul_operands``)
        self.dims = dims or (list(lhs.strides), list(rhs.strides))
        self.merged = any(isinstance(d, list) for ds in self.dims for d in ds)
        self.leaves, self.leaf_views = leaves, leaf_views
        self.stores, self.dests = stores, dests
        self.out = dot.outputs[0]
        self.sched = None
        self.pretransposed = None  # the operand first transposed into an HBM scratch, if any
        self.held = {}  # epilogue operands kept for the output tiles that share them (``_leaf``)
        self._canonical()

    # --- canonical form -------------------------------------------------------------------------
    def _canonical(self) -> None:
        a = self.dot.attrs
        L, R = self.views
        Ld, Rd = self.dims
        lshape, rshape = (v.type.shape for v in self.dot.inputs)
        lb, rb, lc, rc = (tuple(a.get(k, ())) for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"))
        lfree = [d for d in range(len(lshape)) if d not in lb + lc]
        rfree = [d for d in range(len(rshape)) if d not in rb + rc]
        outs = list(self.leaf_views) + list(self.dests)  # forms 2..: everything shaped like the result
        self.nforms = 2 + len(outs)
        shape = self.out.type.shape
        nb, nm = len(lb), len(lfree)

        def ax(size, l_stride, r_stride, d):  # a dim merged from several source axes is several axes
            return split_axis(size, [l_stride, r_stride] + [v.strides[d] if d is not None else 0 for v in outs])

        batch = [x for i in range(nb) for x in ax(shape[i], Ld[lb[i]], Rd[rb[i]], i)]
        ms = [x for j, d in enumerate(lfree) for x in ax(shape[nb + j], Ld[d], 0, nb + j)]
        ns = [x for j, d in enumerate(rfree) for x in ax(shape[nb + nm + j], 0, Rd[d], nb + nm + j)]
        ks = [x for dl, dr in zip(lc, rc) for x in ax(lshape[dl], Ld[dl], Rd[dr], None)]
        ks.sort(key=lambda k: (-abs(k.strides[0]), -abs(k.strides[1])))
        self.kp, self.kouter = longest(merge_axes(ks), self.nforms)
        mp, mouter = longest(merge_axes(ms), self.nforms)
        np_, nouter = longest(merge_axes(ns), self.nforms)
        self.outer = merge_axes(batch) + mouter + nouter
        self.base = (L.offset, R.offset) + tuple(v.offset for v in outs)
        self.k_elems = math.prod(k.size for k in ks)

        te, P = self.arch.tensor, self.arch.num_partitions
        tm, tn = min(te.cols, P), te.moving_fmax
        self.pack = None
        count = 1
        if self.outer and np_.size < tn:
            p = max(range(len(self.outer)), key=lambda i: (self.outer[i].size, i))
            count = min(self.outer[p].size, tn // max(1, np_.size))
            if count >= 2:
                self.pack = p
            else:
                count = 1
        ld, rd = tensor_dtype(L.dtype), tensor_dtype(R.dtype)
        if "float32" in (ld, rd):
            ld = rd = "float32"
        varies = [self.pack is not None and self.outer[self.pack].strides[i] != 0 for i in (0, 1)]
        self.ops = (Side(0, ld, dtypes.itemsize(ld), mp, tm, varies[0]),
                    Side(1, rd, dtypes.itemsize(rd), np_, min(tn, max(1, np_.size)), varies[1]))
        rows = self.kp.size * math.prod(k.size for k in self.kouter)
        for op in self.ops:
            i = op.index
            cols = op.tile * (count if op.varies else 1)
            op.transposed = (self.kp.strides[i] == 1 and op.free.strides[i] != 1 and op.free.size > 1
                             and self.kp.size > 1 and op.itemsize in (2, 4) and transposed_is_cheaper(rows, cols, op.itemsize))
        self.count = count
        self.groups = outer_groups(self.outer, self.pack, count, self.base)
        self.ksteps = k_steps(self.kp, self.kouter, self.arch.num_partitions)

    # --- SBUF budget ------------------------------------------------------------------------------
    def _epilogue_bytes(self) -> tuple[dict, int, int]:
        stored = {v.id for v in self.stores}
        self.defer = deferred.deferrable_values(self.epilogue, self.ctx.consumers, stored)
        roles, role_bytes = share_buffers(self.epilogue, stored, self.defer, self.group.aliases)
        per = role_bytes + 4 * max([temps_needed(n.op) for n in self.epilogue] + [0])
        per += sum(dtypes.itemsize(onchip_dtype(v.dtype)) for v in self.leaf_views if v.kind != "scalar")
        per += 2 * 4  # the evacuated product, a PSUM value stored
        max_free = self.count * self.ops[1].tile
        return roles, max_free, EPILOGUE_BUFFERS * per * max_free + 1024

    def _staging_bytes(self, kg_size: int) -> int:
        total = 0
        for op in self.ops:
            if op.transposed:
                cols = op.tile * (self.count if op.varies else 1)
                total += STAGING_SLOTS * -(-cols // 128) * kg_size * self.arch.num_partitions * op.itemsize
        return total

    # --- emission -----------------------------------------------------------------------------------
    def plan(self) -> None:
        """Tiles, stripes and their order (``self.sched``); nothing is emitted."""
        if getattr(self, "sched", None) is not None:
            return
        self.roles, self.max_free, epi_bytes = self._epilogue_bytes()
        budget = int(0.8 * self.arch.sbuf_usable_bytes_per_partition) - epi_bytes
        out_tile_bytes = sum(self.ops[0].tile * self.ops[1].tile * self.count * dtypes.itemsize(d.dtype) for d in self.dests)
        try:
            self.sched = schedule(self.groups, self.ops, self.ksteps, budget, self._staging_bytes,
                                  out_tile_bytes, self.count, self._acc_banks())
        except MemoryError as err:
            raise node_error(self.dot, "compile.matmul_sbuf", f"{err} (budget {budget} bytes per partition)") from None

    def run(self) -> None:
        ctx = self.ctx
        self.em.location = self.dot.location
        if self._vector_shape() is not None:
            self._run_vector()
            return
        self.plan()
        roles, max_free = self.roles, self.max_free
        sched = self.sched
        self.psum_store_dtype = None
        with Scope(ctx.builder) as scope:
            self.scope = scope
            self._allocate(scope)
            tc = TileCtx(self.em, scope, max_free, buffers=EPILOGUE_BUFFERS)
            tc.roles = roles
            tc.deferrable = self.defer
            self.tc = tc
            self._emit_all()
        n_tiles = sum(1 for s in sched.steps if s.last)
        ctx.group_log.append({
            "kind": "matmul", "ops": [n.op for n in self.group.nodes], "shape": list(self.out.type.shape),
            "engine": "tensor",
            "m": self.ops[0].free.size, "n": self.ops[1].free.size, "k": self.k_elems, "tiles": n_tiles,
            "k_steps": len(self.ksteps), "k_groups": len(sched.kgroups), "pack": self.count,
            "resident": sched.order, "block": sched.block,
            "transposed": [op.transposed for op in self.ops], "loads": len(sched.fills),
            "pretransposed": self.pretransposed,
        })

    def _allocate(self, scope: Scope) -> None:
        sched = self.sched
        P = self.arch.num_partitions
        kg_max = max(len(k) for k in sched.kgroups) if self.ksteps else 0
        self.stripes, self.staging, self.kcols, self.pieces = [], [], [], []
        for op, slots in zip(self.ops, sched.slots):
            cols = max(1, kg_max * aligned(op.tile * (self.count if op.varies else 1), op.itemsize))
            self.stripes.append([scope.sbuf(cols, op.dtype) for _ in range(slots if self.ksteps else 0)])
            self.pieces.append([self._staging_pieces(kg, op.itemsize) for kg in range(len(sched.kgroups))])
            # staging columns of one row block (row blocks start on 64-byte boundaries too)
            self.kcols.append(aligned(max([p[-1][2] for p in self.pieces[-1] if p] + [1]), op.itemsize))
            if op.transposed and self.ksteps:
                nrb = -(-op.tile * (self.count if op.varies else 1) // P)
                self.staging.append([scope.sbuf(nrb * self.kcols[-1], op.dtype) for _ in range(STAGING_SLOTS)])
            else:
                self.staging.append([])
        bank_fp32 = self.arch.psum_bank_bytes // 4
        transposed = [op for op in self.ops if op.transposed]
        n_acc = self._acc_banks()
        self.acc_banks = [scope.psum(bank_fp32, "float32") for _ in range(n_acc)]
        self.tr_banks = {}
        for op in transposed:
            if op.dtype not in self.tr_banks:
                self.tr_banks[op.dtype] = [scope.psum(self.arch.psum_bank_bytes // op.itemsize, op.dtype)
                                           for _ in range(TRANSPOSE_BANKS)]
        self.tr_cursor = 0

    def _acc_banks(self) -> int:
        return self.arch.psum_banks - (TRANSPOSE_BANKS if any(op.transposed for op in self.ops) else 0)

    def _emit_all(self) -> None:
        sched = self.sched
        steps, fills = sched.steps, sched.fills
        step_ns = max(1.0, sum(self._step_ns(s) for s in steps) / max(1, len(steps)))
        fill_ns = max([self._fill_bytes(f) / DMA_BYTES_PER_NS for f in fills] + [0.0]) + 1500.0
        self.la_dma = max(2, min(LA_MAX, math.ceil(fill_ns / step_ns) + 1))
        self.la_tr = 1
        self.step_ns = step_ns
        self.dma_i = self.tr_i = 0
        self.staged = [0, 0]  # transposed fills of each operand whose DMAs were emitted
        self.transposed_done = [[], []]  # per operand: transposes-emitted flags in staging order
        self.staging_index = {}
        self.acc_cursor = 0
        self.acc_of = {}
        self.evacs = 0
        for t, st in enumerate(steps):
            self._advance(t, False)
            self._compute(st)
            self._advance(t, True)

    def _advance(self, t, after) -> None:
        """Emit the loads and transposes due before (``after``: right after) step ``t``'s matmuls."""
        sched, fills, n = self.sched, self.sched.fills, len(self.sched.fills)
        la_dma, la_tr = self.la_dma, self.la_tr
        staged, transposed_done, staging_index = self.staged, self.transposed_done, self.staging_index

        def can_dma(f) -> bool:
            # the buffer's previous stripe must have had its last reader emitted
            if f.prev_last_use >= t + after or f.first_use > t + la_dma:
                return False
            op = self.ops[f.operand]
            if op.transposed:
                k = staged[f.operand]
                if k >= STAGING_SLOTS and not transposed_done[f.operand][k - STAGING_SLOTS]:
                    return False
            return True

        dma_i, tr_i = self.dma_i, self.tr_i
        progress = True
        while progress:
            progress = False
            if dma_i < n and can_dma(fills[dma_i]):
                f = fills[dma_i]
                if self.ops[f.operand].transposed:
                    k = staged[f.operand]
                    staging_index[id(f)] = k
                    transposed_done[f.operand].append(False)
                    staged[f.operand] += 1
                    self._load_rows(f, self.staging[f.operand][k % STAGING_SLOTS])
                else:
                    self._load_direct(f)
                dma_i += 1
                progress = True
            # Transposes for the next step go ahead of this step's matmuls (their copies then
            # overlap them) only if the model expects their rows in by then; else after.
            if tr_i < dma_i and (fills[tr_i].first_use <= t or (fills[tr_i].first_use <= t + la_tr and (
                    after or sched.fill_ready.get(id(fills[tr_i]), 0.0) <= sched.step_start[t]))):
                f = fills[tr_i]
                if self.ops[f.operand].transposed:
                    k = staging_index[id(f)]
                    self._transpose(f, self.staging[f.operand][k % STAGING_SLOTS])
                    transposed_done[f.operand][k] = True
                tr_i += 1
                progress = True
        self.dma_i, self.tr_i = dma_i, tr_i

    def _step_ns(self, st) -> float:
        g = self.groups[st.group].count
        n = self.ops[1].sizes[st.nt][1]
        return g * max(1, len(self.sched.kgroups[st.kg])) * matmul_ns(n, self.ops[1].dtype)

    def _fill_bytes(self, f) -> int:
        op = self.ops[f.operand]
        cols = op.sizes[f.tile][1] * (self.groups[f.group].count if op.varies else 1)
        return cols * sum(self.ksteps[j].rows for j in self.sched.kgroups[f.kg]) * op.itemsize

    # --- stripe loads -------------------------------------------------------------------------------
    def _stripe_geometry(self, f):
        op = self.ops[f.operand]
        grp = self.groups[f.group]
        start, size = op.sizes[f.tile]
        g = grp.count if op.varies else 1
        origin = grp.offsets[op.index] + start * op.free.strides[op.index]
        return op, g, size, origin

    def _runs(self, kg: int):
        """Runs of consecutive K steps of one outer-K combination: (first local index, steps)."""
        idx = self.sched.kgroups[kg]
        runs, cur = [], []
        for local, j in enumerate(idx):
            ks = self.ksteps[j]
            if cur:
                prev = self.ksteps[cur[-1][1]]
                if prev.combo == ks.combo and prev.rows == ks.rows and ks.chunk == prev.chunk + 1:
                    cur.append((local, j))
                    continue
                runs.append(cur)
            cur = [(local, j)]
        if cur:
            runs.append(cur)
        return runs

    def _load_direct(self, f) -> None:
        op, g, size, origin = self._stripe_geometry(f)
        i = op.index
        tile = self.stripes[i][f.slot]
        view = self.views[i]
        width = g * size
        kstride = aligned(width, op.itemsize)
        pack_stride = self.outer[self.pack].strides[i] if self.pack is not None else 0
        for run in self._runs(f.kg):
            rows = self.ksteps[run[0][1]].rows
            step = self.kp.strides[i] * rows  # chunks of a run are equal: consecutive rows x stride apart
            per = max(1, DMA_CHUNK_BYTES // max(1, rows * width * op.itemsize))
            for c in range(0, len(run), per):
                part = run[c:c + per]
                local0, j0 = part[0]
                dims = [(step, len(part)), (pack_stride, g), (op.free.strides[i], size)]
                dims = [d for d in dims if d[1] > 1]
                src = hbm_pattern(view.tensor, view.dtype, origin + self.ksteps[j0].offsets[i], self.kp.strides[i], rows, dims)
                dst = tile_ap(tile, rows, (len(part), width), strides=(kstride, 1), offset=local0 * kstride)
                self.em.load(dst, src)

    def _load_rows(self, f, staging) -> None:
        """Row-major staging of a stripe that is transposed on TensorE: rows are (position, column)."""
        op, g, size, origin = self._stripe_geometry(f)
        i = op.index
        view = self.views[i]
        P = self.arch.num_partitions
        pack_stride = self.outer[self.pack].strides[i] if self.pack is not None else 0
        uniform = g == 1 or pack_stride == size * op.free.strides[i]
        total = g * size
        kcols = self.kcols[i]
        for r0 in range(0, total, P):
            r1 = min(total, r0 + P)
            segments = [(r0, r1)] if uniform else [(max(r0, q * size), min(r1, (q + 1) * size))
                                                   for q in range(r0 // size, -(-r1 // size))]
            for s0, s1 in segments:
                q, c = divmod(s0, size)
                row_origin = origin + q * pack_stride + c * op.free.strides[i]
                for part, cols, _ in self.pieces[i][f.kg]:
                    j0 = self.sched.kgroups[f.kg][part[0]]
                    length = sum(self.ksteps[self.sched.kgroups[f.kg][k]].rows for k in part)
                    src = hbm_pattern(view.tensor, view.dtype, row_origin + self.ksteps[j0].offsets[i],
                                      op.free.strides[i], s1 - s0, [(self.kp.strides[i], length)])
                    dst = tile_ap(staging, s1 - s0, (length,), offset=(r0 // P) * kcols + cols[0],
                                  partition_start=s0 - r0)
                    self.em.load(dst, src)

    def _staging_pieces(self, kg: int, itemsize: int) -> list[tuple[list[int], list[int], int]]:
        """Row-major staging of one row block: pieces of consecutive K steps, each moved by one DMA
        (contiguous on both sides) and starting on a 64-byte boundary (no false dependency between
        pieces), so the first transposes can start after the first piece. Entries: (local K step
        indices, their staging columns, the end column of the piece)."""
        if not self.ksteps:
            return []
        P = self.arch.num_partitions
        per = max(1, STAGING_CHUNK_BYTES // (P * P * itemsize))
        pieces, col = [], 0
        for run in self._runs(kg):
            for c in range(0, len(run), per):
                part = [local for local, _ in run[c:c + per]]
                cols = []
                for local in part:
                    cols.append(col)
                    col += self.ksteps[self.sched.kgroups[kg][local]].rows
                pieces.append((part, cols, col))
                col = aligned(col, itemsize)
        return pieces

    def _transpose(self, f, staging) -> None:
        op, g, size, _ = self._stripe_geometry(f)
        tile = self.stripes[op.index][f.slot]
        P = self.arch.num_partitions
        total = g * size
        kstride = aligned(total, op.itemsize)
        kcols = self.kcols[op.index]
        column = {local: c for part, cols, _ in self.pieces[op.index][f.kg] for local, c in zip(part, cols)}
        idx = self.sched.kgroups[f.kg]
        per_bank = self.arch.psum_bank_bytes // (P * op.itemsize)
        banks = self.tr_banks[op.dtype]
        for r0 in range(0, total, P):
            nrows = min(P, total - r0)
            k = 0
            while k < len(idx):  # runs of K steps with equal rows, a PSUM bank at a time
                rows = self.ksteps[idx[k]].rows
                e = k
                while e < len(idx) and e - k < per_bank and self.ksteps[idx[e]].rows == rows:
                    e += 1
                bank = banks[self.tr_cursor % len(banks)]
                self.tr_cursor += 1
                for s, local in enumerate(range(k, e)):
                    src = tile_ap(staging, nrows, (rows,), offset=(r0 // P) * kcols + column[local])
                    self.em.emit(Transpose(dst=tile_ap(bank, rows, (nrows,), offset=s * P), src=src, engine="tensor"))
                dst = tile_ap(tile, rows, (e - k, nrows), strides=(kstride, 1), offset=k * kstride + r0)
                src = tile_ap(bank, rows, (e - k, nrows), strides=(P, 1))
                self.em.emit(TensorCopy(dst=dst, src=src, engine=self.em.pick("vector", "scalar")))
                k = e

    # --- matmuls and the epilogue -----------------------------------------------------------------
    def _compute(self, st) -> None:
        lhs, rhs = self.ops
        grp = self.groups[st.group]
        G = grp.count
        ms, ns = lhs.sizes[st.mt][1], rhs.sizes[st.nt][1]
        gl, gr = (G if lhs.varies else 1), (G if rhs.varies else 1)
        lstride, rstride = aligned(gl * ms, lhs.itemsize), aligned(gr * ns, rhs.itemsize)
        tile = (st.group, st.mt, st.nt)  # a tile's K groups may interleave with other tiles' (k-outer)
        if st.first:
            self.acc_of[tile] = self.acc_banks[self.acc_cursor % len(self.acc_banks)]
            self.acc_cursor += 1
        acc = self.acc_of.pop(tile) if st.last else self.acc_of[tile]
        idx = self.sched.kgroups[st.kg]
        if not self.ksteps:  # contraction over nothing: the product is zero
            self.em.emit(Memset(dst=tile_ap(acc, ms, (G * ns,)), value=0.0, engine="vector"))
        else:
            ltile, rtile = self.stripes[0][st.slots[0]], self.stripes[1][st.slots[1]]
            for g in range(G):
                for local, j in enumerate(idx):
                    rows = self.ksteps[j].rows
                    stationary = tile_ap(ltile, rows, (ms,), offset=local * lstride + (g if lhs.varies else 0) * ms)
                    moving = tile_ap(rtile, rows, (ns,), offset=local * rstride + (g if rhs.varies else 0) * ns)
                    self.em.emit(Matmul(dst=tile_ap(acc, ms, (ns,), offset=g * ns), stationary=stationary,
                                        moving=moving, accumulate=not (st.first and local == 0)))
        if st.last:
            self._epilogue(st, acc, ms, ns, G)

    def _box(self, st, ms, ns, G) -> Box:
        lhs, rhs = self.ops
        grp = self.groups[st.group]
        mstart, nstart = lhs.sizes[st.mt][0], rhs.sizes[st.nt][0]
        mp, np_ = lhs.free, rhs.free
        offsets = tuple(grp.offsets[f] + mstart * mp.strides[f] + nstart * np_.strides[f] for f in range(2, self.nforms))
        free = [FreeDim(np_.strides[2:], ns, False)]
        if self.pack is not None:
            free.insert(0, FreeDim(self.outer[self.pack].strides[2:], G, False))
        return Box(offsets, ms, mp.strides[2:], False, tuple(free))

    def _epilogue(self, st, acc, ms, ns, G) -> None:
        box = self._box(st, ms, ns, G)
        self.tc.set_box(box, self.evacs)
        self.evacs += 1
        self._finish_tile(box, tile_ap(acc, ms, self.tc.counts))

    def _finish_tile(self, box: Box, product) -> None:
        """The epilogue of one result tile: ``product`` (fp32, PSUM or SBUF) -> the dot's dtype ->
        the epilogue nodes -> stores of the values read elsewhere (``tc`` is set to ``box``)."""
        tc, em = self.tc, self.em
        psum = product
        out = self.out
        stored = {v.id for v in self.stores}
        aliases = self.group.aliases
        readers = [n for n in self.epilogue for x in n.inputs if aliases.get(x.id, x.id) == out.id]
        direct = (out.type.dtype == "float32" and out.id not in stored and len(readers) == 1
                  and readers[0].op in PSUM_READERS)
        if direct or (out.type.dtype == "float32" and psum.memory != PSUM):
            env = {out.id: Operand("float32", ap=psum)}
        else:
            dot = tc.result(("dot", out.id), onchip_dtype(out.type.dtype))
            em.emit(TensorCopy(dst=dot.ap, src=psum, engine=em.pick("vector", "scalar")))
            env = {out.id: dot}
        for k, (v, view) in enumerate(zip(self.leaves, self.leaf_views)):
            env[v.id] = self._leaf(k, v, view, box)
        for n in self.epilogue:
            em.location = n.location
            env[n.outputs[0].id] = lower_node(tc, n, [env[aliases.get(x.id, x.id)] for x in n.inputs])
        for k, (v, dest) in enumerate(zip(self.stores, self.dests)):
            src = tc.full(env[v.id])
            if src.memory == PSUM:  # DMA cannot read PSUM: copy the value out first
                copy = tc.result(("stored", v.id), onchip_dtype(v.type.dtype))
                em.emit(TensorCopy(dst=copy.ap, src=src, engine=em.pick("vector", "scalar")))
                src = copy.ap
            tc.store(dest, box, len(self.leaves) + k, src)
        em.location = self.dot.location

    def _leaf(self, k: int, v, view: View, box: Box) -> Operand:
        """Epilogue operand ``k`` on this output tile. A row broadcast over the tile's rows (a bias:
        partition stride 0, so its DMA moves the row once per partition) is the same tile for every
        output tile of the same columns: loaded once into a buffer it keeps, not once per tile."""
        tc = self.tc
        offset, part_stride, dims = box.pattern(k)
        if view.kind != "hbm" or part_stride != 0 or tc.pc == 1:
            return tc.load(("leaf", v.id), view, box, k)
        held = self.held.setdefault(v.id, {})
        key = (offset, tuple(dims), tc.pc, box.counts)
        op = held.get(key)
        if op is None:
            if len(held) >= HELD_PER_LEAF:
                return tc.load(("leaf", v.id), view, box, k)
            role = ("held", v.id, len(held))
            tc.rings[(role, onchip_dtype(view.dtype), SBUF)] = tc.scope.ring(tc.max_free, onchip_dtype(view.dtype), 1)
            op = held[key] = tc.load(role, view, box, k)
        return op

    # --- batches of tiny products on VectorE --------------------------------------------------------
    def _vector_shape(self):
        """(partition axis, other outer axes) when the dot is a batch of tiny products better done on
        VectorE: with K tiny, TensorE stripes would use K partitions (one DMA engine per 8) and
        load in runs of a few bytes; with the batch on partitions instead, every operand loads in
        contiguous rows and a tile of 128 products costs 2K - 1 VectorE instructions."""
        mp, np_ = self.ops[0].free, self.ops[1].free
        if self.kouter or not self.outer or self.kp.size == 0:
            return None
        if self.kp.size > VECTOR_MAX_K or mp.size * np_.size > VECTOR_MAX_RESULT:
            return None
        p = max(range(len(self.outer)), key=lambda i: (self.outer[i].size, i))
        if self.outer[p].size < VECTOR_MIN_BATCH:
            return None
        return self.outer[p], self.outer[:p] + self.outer[p + 1:]

    def _run_vector(self) -> None:
        ctx, em = self.ctx, self.em
        part, loops = self._vector_shape()
        mp, np_, kp = self.ops[0].free, self.ops[1].free, self.kp
        M, N, K = mp.size, np_.size, kp.size
        roles, _, _ = self._epilogue_bytes()
        P = self.arch.num_partitions
        dts = [d if d not in ("int64", "uint64") else "float32" for d in (self.views[0].dtype, self.views[1].dtype)]
        dts = [onchip_dtype(d) for d in dts]
        tiles = 0
        with Scope(ctx.builder) as scope:
            tc = TileCtx(em, scope, max(M * N, M * K, K * N), buffers=EPILOGUE_BUFFERS)
            tc.roles = roles
            tc.deferrable = self.defer
            self.tc = tc
            combos = itertools.product(*[range(a.size) for a in loops])
            tapes = []
            for combo in combos:
                base = [o + sum(i * a.strides[f] for i, a in zip(combo, loops)) for f, o in enumerate(self.base)]
                for c0 in range(0, part.size, P):
                    pc = min(P, part.size - c0)
                    offs = [b + c0 * part.strides[f] for f, b in enumerate(base)]
                    box = Box(tuple(offs[2:]), pc, part.strides[2:], False,
                              (FreeDim(mp.strides[2:], M, False), FreeDim(np_.strides[2:], N, False)))
                    tc.set_box(box, tiles)
                    em.record()
                    lhs = self._vector_load("lhs", 0, dts[0], offs[0], pc, part, [(mp, M), (kp, K)])
                    rhs = self._vector_load("rhs", 1, dts[1], offs[1], pc, part, [(kp, K), (np_, N)])
                    acc = tile_ap(tc.buffer("acc", "float32"), pc, (M, N))
                    engine = em.pick("vector", "gpsimd")
                    for k in range(K):
                        a = lhs.__class__(lhs.memory, lhs.dtype, lhs.partition_start, pc, ((K, M), (0, N)),
                                          lhs.offset + k * lhs.itemsize)
                        b = rhs.__class__(rhs.memory, rhs.dtype, rhs.partition_start, pc, ((0, M), (1, N)),
                                          rhs.offset + k * N * rhs.itemsize)
                        if k == 0:
                            em.emit(TensorTensor(dst=acc, in0=a, in1=b, op="multiply", engine=engine))
                        else:
                            tmp = tile_ap(tc.buffer("product", "float32"), pc, (M, N))
                            em.emit(TensorTensor(dst=tmp, in0=a, in1=b, op="multiply", engine=engine))
                            em.emit(TensorTensor(dst=acc, in0=acc, in1=tmp, op="add", engine=engine))
                    self._finish_tile(box, acc)
                    tapes.append(em.stop())
                    tiles += 1
            em.pipelined(tapes, EPILOGUE_BUFFERS)
        ctx.group_log.append({
            "kind": "matmul", "ops": [n.op for n in self.group.nodes], "shape": list(self.out.type.shape),
            "m": M, "n": N, "k": K, "tiles": tiles, "engine": "vector", "batch": part.size,
        })

    def _vector_load(self, role, index, dtype, offset, pc, part, dims):
        """A [pc, a, b] tile of operand ``index``: the batch on partitions, dense in SBUF."""
        view = self.views[index]
        counts = [n for _, n in dims]
        tile = tile_ap(self.tc.buffer(role, dtype), pc, (math.prod(counts),))
        src = hbm_pattern(view.tensor, view.dtype, offset, part.strides[index], pc,
                          [(a.strides[index], n) for a, n in dims if n > 1])
        self.em.load(tile, src)
        return tile
