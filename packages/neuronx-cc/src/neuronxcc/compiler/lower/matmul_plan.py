"""Planning a dot_general on TensorE: canonical axes, tiles, and the order that reuses operand stripes.

**Canonical form.** ``out[b, m, n] = sum_k lhs[b, m, k] * rhs[b, k, n]`` where b, m, n and k are each
any number of dims in any positions of the operands. Every operand and result is a *form* over that
space - per-dim element strides (0 where it does not vary) - so transposed, sliced or broadcast
operands cost nothing here. Dims of one kind that every form walks contiguously are merged
(``[B, H, T, D]`` attention merges B and H). Then

* the longest K axis goes on partitions (``<= 128`` rows per matmul pass; the other K axes and the
  128-chunks are the *K steps*, accumulated in one PSUM bank),
* the longest M axis is the stationary's free dim and the result's partitions (``<= 128``),
* the longest N axis is the moving free dim (``<= 512`` fp32 columns: one PSUM bank),
* every other axis (batch, further M or N axes) is an *outer* loop; when a result tile is narrow,
  ``G`` positions of the longest outer axis are *packed* side by side in one PSUM bank, so a batch
  of tiny matmuls shares its loads, its evacuation and its stores (64 x [4x8]@[8x4] is one load
  per operand, 64 matmuls, one copy, one store).

**Stripes.** An operand is loaded as stripes ``[K rows, (K step, packed position, column)]``: one M
tile of lhs (stationary) or one N tile of rhs (moving) with all its K steps (or a group of them
when K is too long to keep). An operand whose K dim is contiguous in HBM and whose free dim is not
(``[M, K]`` lhs, ``[N, K]`` weights) would need element-granular DMAs; it is loaded row-major
instead (long runs) and transposed 128x128 at a time on TensorE (``Transpose`` into PSUM, copied
out by VectorE/ScalarE) - the timing model's DMA transpose is element-granular, so TensorE wins
for every shape but the tiniest, where the strided DMA is kept.

**Order.** One operand is *resident* (a block of its stripes stays in SBUF while every stripe of
the other streams past), as in ``neuron_sim.programs.matmul``; which one, and the block size, come
from a small cost model (TensorE time including transposes, HBM traffic, the first loads). The
stripe buffers are managed as a cache with Belady's policy over the known step sequence, which
also yields, for each load, the last use of the buffer it overwrites - how far ahead it may be
prefetched.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

DMA_BYTES_PER_NS = 0.8 * 16 * 23.0  # all 16 DMA engines at the trn2 practical rate, less descriptor costs
DMA_RUN_NS = 10.0  # per contiguous run (descriptor), per engine
DMA_FIXED_NS = 2000.0
TRANSPOSE_COPY_NS = 400.0  # evacuating a PSUM bank of transposes (VectorE/ScalarE, split two ways)
STRIPE_RING = 3  # buffers of the streamed operand: one in use, two being filled


@dataclass(frozen=True)
class Ax:
    """One (merged) axis of the dot's iteration space: its size and per-form element strides."""

    size: int
    strides: tuple[int, ...]


def merge_axes(axes: list[Ax]) -> list[Ax]:
    """Drop size-1 axes; merge neighbours (outer first) that every form walks contiguously."""
    out: list[Ax] = []
    for a in axes:
        if a.size == 1:
            continue
        if out and all(p == s * a.size for p, s in zip(out[-1].strides, a.strides)):
            out[-1] = Ax(out[-1].size * a.size, a.strides)
            continue
        out.append(a)
    return out


def longest(axes: list[Ax], nforms: int) -> tuple[Ax, list[Ax]]:
    """The longest axis (the innermost on ties) and the others in order; a size-1 axis if none."""
    if not axes:
        return Ax(1, (0,) * nforms), []
    best = max(range(len(axes)), key=lambda i: (axes[i].size, i))
    return axes[best], axes[:best] + axes[best + 1:]


@dataclass(frozen=True)
class KStep:
    offsets: tuple[int, int]  # (lhs, rhs) element offsets from the stripe origin
    rows: int  # contraction rows on partitions (<= 128)
    combo: int  # index of the outer-K-axes combination (runs of one combo are contiguous along kp)
    chunk: int  # index of the 128-chunk along the partition K axis


@dataclass(frozen=True)
class OuterGroup:
    """A set of outer positions computed together: ``count`` packed positions of the packed axis."""

    offsets: tuple[int, ...]  # per form, of the first position
    count: int


@dataclass
class Side:
    """How one matmul operand (0: lhs, stationary; 1: rhs, moving) is tiled."""

    index: int
    dtype: str  # TensorE input dtype (the DMA casts to it)
    itemsize: int
    free: Ax  # the M (lhs) or N (rhs) axis
    tile: int  # free columns per stripe
    varies: bool  # varies along the packed axis (else each position uses the same stripe columns)
    transposed: bool = False  # loaded row-major and transposed on TensorE

    @property
    def sizes(self) -> list[tuple[int, int]]:
        return [(s, min(self.tile, self.free.size - s)) for s in range(0, self.free.size, self.tile)]


@dataclass
class Step:
    """One K group of one output tile: the matmuls of ``group`` x lhs tile ``mt`` x rhs tile ``nt``."""

    group: int
    mt: int
    nt: int
    kg: int
    first: bool  # first K group of the tile: the matmuls start the accumulation
    last: bool  # last K group: evacuate after it
    slots: list = field(default_factory=lambda: [0, 0])  # stripe buffer slot of each operand


@dataclass
class Fill:
    """Loading one stripe into a buffer slot, first needed at step ``first_use``."""

    operand: int
    key: tuple
    slot: int
    first_use: int
    prev_last_use: int  # last step reading the slot's previous stripe (-1: none)
    group: int
    tile: int
    kg: int


@dataclass
class Schedule:
    order: str  # "lhs" (lhs stripes resident) or "rhs"
    block: int  # resident stripes per block
    kgroups: list[list[int]]  # K step indices per K group
    steps: list[Step]
    fills: list[Fill]
    slots: tuple[int, int]  # buffer slots per operand
    estimate_ns: float
    step_start: list = field(default_factory=list)  # modelled TensorE start of each step
    fill_ready: dict = field(default_factory=dict)  # modelled arrival of each load, by id(fill)


def k_steps(kp: Ax, kouter: list[Ax], rows: int) -> list[KStep]:
    """The K passes: the partition K axis in even chunks of <= ``rows`` (500 -> 4 x 125, one DMA
    pattern for all), times the combinations of the other K axes."""
    if kp.size:
        rows = -(-kp.size // -(-kp.size // rows))
    steps = []
    combos = itertools.product(*[range(a.size) for a in kouter])
    for c, combo in enumerate(combos):
        base = [sum(i * a.strides[f] for i, a in zip(combo, kouter)) for f in (0, 1)]
        for j, start in enumerate(range(0, kp.size, rows)):
            steps.append(KStep((base[0] + start * kp.strides[0], base[1] + start * kp.strides[1]),
                               min(rows, kp.size - start), c, j))
    return steps


def outer_groups(outer: list[Ax], pack: int | None, count: int, offsets: tuple[int, ...]) -> list[OuterGroup]:
    ranges = [range(0, a.size, count) if i == pack else range(a.size) for i, a in enumerate(outer)]
    groups = []
    for index in itertools.product(*ranges):
        offs = tuple(o + sum(i * a.strides[f] for i, a in zip(index, outer)) for f, o in enumerate(offsets))
        n = min(count, outer[pack].size - index[pack]) if pack is not None else 1
        groups.append(OuterGroup(offs, n))
    return groups


def matmul_ns(n: int, dtype: str, clock_ghz: float = 2.4) -> float:
    return max(n, 64) * (4 if dtype == "float32" else 1) / clock_ghz


def transposed_is_cheaper(rows: int, cols: int, itemsize: int) -> bool:
    """Loading a [rows(K) x cols] block whose K is contiguous: strided DMA vs row-major + TensorE transpose."""
    engines = max(1, min(16, -(-rows // 8)))
    strided = rows * cols * DMA_RUN_NS / engines
    blocks = -(-rows // 128) * -(-cols // 128)
    transposed = blocks * (128 * (2 if itemsize == 4 else 1) / 2.4 + TRANSPOSE_COPY_NS / 4) + 600.0
    return strided > transposed


def _stripe_key(op: Side, group: OuterGroup, tile: int, kg: int) -> tuple:
    return (op.index, group.offsets[op.index], group.count if op.varies else 1, tile, kg)


def schedule(groups: list[OuterGroup], ops: tuple[Side, Side], ksteps: list[KStep], budget: int,
             staging_bytes, out_bytes_per_tile: float, pack_count: int, acc_banks: int = 6) -> Schedule:
    """Pick the resident operand, its block size and the K grouping; simulate the stripe cache.

    ``staging_bytes(k_steps_per_group)``: SBUF per partition for row-major staging of transposed loads.
    """
    nk = max(1, len(ksteps))
    tiles = (len(ops[0].sizes), len(ops[1].sizes))

    def stripe_bytes(op: Side, ksteps_in_group: int) -> int:
        return ksteps_in_group * op.tile * (pack_count if op.varies else 1) * op.itemsize

    best = None
    for resident in (0, 1):
        streamed = 1 - resident
        for kg_size in _kgroup_sizes(nk):
            rb = stripe_bytes(ops[resident], kg_size)
            sb = stripe_bytes(ops[streamed], kg_size)
            stg = staging_bytes(kg_size)
            if kg_size == nk:  # whole stripes: a block of resident ones (two while the next loads)
                room = budget - STRIPE_RING * sb - stg
                if room < rb:
                    continue
                if len(groups) == 1 and tiles[resident] * rb <= room:
                    options = [(tiles[resident], 1)]
                elif room < 2 * rb:  # one resident stripe at a time (the next loads after it)
                    options = [(1, 1)]
                else:
                    options = [(max(1, min(tiles[resident], room // (2 * rb))), 2)]
                while options[-1][0] > 1 and len(options) < 4:  # smaller blocks spread the loads out
                    options.append((-(-options[-1][0] // 2), 2))
            else:  # K too long to keep: both operands stream K group by K group
                options = []
                if STRIPE_RING * (rb + sb) + stg <= budget:
                    options.append((1, 1))
                # K groups outermost: every output tile of a batch position keeps its own PSUM bank
                # while each stripe is loaded once (the resident operand's stripes of one K group
                # are all kept while the other's stream past)
                if (tiles[0] * tiles[1] <= acc_banks and 2 * tiles[resident] * rb + STRIPE_RING * sb + stg <= budget
                        and tiles[0] * tiles[1] > 1):
                    options.append((tiles[resident], "k_outer"))
                if not options:
                    continue
            kgroups = [list(range(i, min(nk, i + kg_size))) for i in range(0, nk, kg_size)] if ksteps else [[]]
            for block, sets in options:
                sched = _simulate(groups, ops, resident, block, sets, kgroups, out_bytes_per_tile, ksteps)
                if best is None or sched.estimate_ns < best.estimate_ns:
                    best = sched
            break  # the largest K group that fits
    if best is None:
        raise MemoryError("no stripe layout of this dot_general fits SBUF")
    return best


def _kgroup_sizes(nk: int):
    size = nk
    while size >= 1:
        yield size
        if size == 1:
            return
        size = -(-size // 2)


def _simulate(groups, ops, resident, block, sets, kgroups, out_bytes_per_tile, ksteps) -> Schedule:
    res, stream = ops[resident], ops[1 - resident]
    steps: list[Step] = []
    nkg = len(kgroups)
    for gi in range(len(groups)):
        if sets == "k_outer":
            for k in range(nkg):
                for s in range(len(stream.sizes)):
                    for r in range(len(res.sizes)):
                        mt, nt = (r, s) if resident == 0 else (s, r)
                        steps.append(Step(gi, mt, nt, k, k == 0, k == nkg - 1))
            continue
        res_tiles = range(len(res.sizes))
        for b0 in range(0, len(res.sizes), block):
            blk = list(res_tiles[b0:b0 + block])
            for s in range(len(stream.sizes)):
                for r in blk:
                    mt, nt = (r, s) if resident == 0 else (s, r)
                    for k in range(nkg):
                        steps.append(Step(gi, mt, nt, k, k == 0, k == nkg - 1))
    caps = [STRIPE_RING, STRIPE_RING]
    if sets == "k_outer":  # one K group's resident stripes, and the next group's while it loads
        caps[resident] = 2 * block
    elif nkg == 1:  # the resident operand keeps a block (two while the next block loads)
        caps[resident] = block * sets
    fills: list[Fill] = []
    for o, op in enumerate(ops if ksteps else ()):  # a contraction over nothing loads nothing
        accesses = []
        for st in steps:
            tile = st.mt if o == 0 else st.nt
            accesses.append(_stripe_key(op, groups[st.group], tile, st.kg))
        caps[o] = min(caps[o], len(set(accesses)))
        slots, misses = _belady(accesses, caps[o])
        for t, slot in enumerate(slots):
            steps[t].slots[o] = slot
        for t, slot, prev in misses:
            st = steps[t]
            fills.append(Fill(o, accesses[t], slot, t, prev, st.group, st.mt if o == 0 else st.nt, st.kg))
    fills.sort(key=lambda f: (f.first_use, f.operand))
    order = ("lhs" if resident == 0 else "rhs") + (" k-outer" if sets == "k_outer" else "")
    sched = Schedule(order, block, kgroups, steps, fills, (caps[0], caps[1]), 0.0)
    sched.estimate_ns = _estimate(sched, ops, ksteps, groups, out_bytes_per_tile)
    return sched


def _belady(keys: list, cap: int) -> tuple[list[int], list[tuple[int, int, int]]]:
    """A Belady cache of ``cap`` slots over the access sequence ``keys``: the slot of every access,
    and the misses as (access index, slot, last access of the stripe the slot held before, or -1)."""
    n = len(keys)
    next_use = [math.inf] * n
    later: dict = {}
    for i in range(n - 1, -1, -1):
        next_use[i] = later.get(keys[i], math.inf)
        later[keys[i]] = i
    slot_key: list = [None] * cap
    slot_next = [math.inf] * cap
    slot_last = [-1] * cap
    where: dict = {}
    slots, misses = [], []
    for i, key in enumerate(keys):
        s = where.get(key)
        if s is None:
            empty = [j for j in range(cap) if slot_key[j] is None]
            if empty:
                s = empty[0]
            else:  # evict the stripe needed farthest in the future (never needed: the longest idle first)
                s = max(range(cap), key=lambda j: (slot_next[j], -slot_last[j]))
                del where[slot_key[s]]
            misses.append((i, s, slot_last[s]))
            slot_key[s] = key
            where[key] = s
        slot_next[s] = next_use[i]
        slot_last[s] = i
        slots.append(s)
    return slots, misses


def _estimate(sched: Schedule, ops, ksteps, groups, out_bytes_per_tile) -> float:
    """A small pipeline model of the schedule: loads leave one FIFO at full DMA bandwidth, in order
    of first use, each as soon as the buffer it overwrites is no longer read; a step's matmuls
    start when TensorE is free and its stripes (and their transposes) are in; each finished output
    tile's store takes its share of the bandwidth."""
    steps, fills, kgroups = sched.steps, sched.fills, sched.kgroups
    lhs, rhs = ops
    mm_dtype = "float32" if "float32" in (lhs.dtype, rhs.dtype) else lhs.dtype
    by_step: dict[int, list] = {}
    for f in fills:
        by_step.setdefault(f.first_use, []).append(f)
    dma = DMA_FIXED_NS
    tensor = 0.0
    for t, st in enumerate(steps):
        ready = 0.0
        transposes = 0.0
        for f in by_step.get(t, ()):
            op = ops[f.operand]
            cols = op.sizes[f.tile][1] * (groups[f.group].count if op.varies else 1)
            rows = sum(ksteps[k].rows for k in kgroups[f.kg]) if ksteps else 0
            # the buffer frees progressively as its last reader's matmuls pass it (the loads are
            # chunked by K steps and dependencies are tracked per 64-byte block): from that step's start
            free_at = sched.step_start[f.prev_last_use] if f.prev_last_use >= 0 else 0.0
            if op.transposed:  # rows load into staging early; only the transposes need the stripe free
                dma += rows * cols * op.itemsize / DMA_BYTES_PER_NS
                ready = max(ready, free_at)
            else:
                dma = max(dma, free_at) + rows * cols * op.itemsize / DMA_BYTES_PER_NS
            sched.fill_ready[id(f)] = dma
            ready = max(ready, dma)
            if op.transposed:
                transposes += len(kgroups[f.kg]) * -(-cols // 128) * 128 * (2 if op.itemsize == 4 else 1) / 2.4
        g = groups[st.group].count
        work = g * max(1, len(kgroups[st.kg])) * matmul_ns(rhs.sizes[st.nt][1], mm_dtype)
        sched.step_start.append(max(tensor, ready))
        tensor = max(tensor, ready) + transposes + work
        if st.last and dma > tensor:  # a store competes with loads only while they are behind
            dma += out_bytes_per_tile / DMA_BYTES_PER_NS
    return max(tensor, dma) + DMA_FIXED_NS
