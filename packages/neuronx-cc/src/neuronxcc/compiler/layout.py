"""The tiling planner: maps an N-d iteration space onto [partitions <= 128, free] tiles.

The space is what a fused group iterates over (the shape of its elementwise values, or of its
reductions' input). Every operand and result is a *form* over the space: per-dim element strides
and an offset (an HBM view, an iota, an output tensor; a reduction's output has stride 0 along
the reduced dims). The planner

1. orders the dims kept-then-reduced and merges neighbours that every form walks contiguously
   (a contiguous elementwise chain of any rank becomes one axis: "flatten row-major");
2. picks the *partition axis* - the rows that go on partitions - and, when it is long and the
   rest is short, splits it into ``rows x cols`` so each partition gets a contiguous run
   (``[N] -> [ceil(N/F), F]``); the rows that do not fill a last ``cols`` run become a tail
   region, planned the same way (the partial last tile);
3. fills the free dims from the innermost axis outwards up to the free size that fits SBUF, chunks
   the axis that does not fit, and loops over the rest (kept loops outside reduced ones, so a
   reduction accumulates over consecutive tiles);
4. scores each choice of partition axis with a small DMA + instruction cost model and keeps the
   cheapest.

For a reduction the partition axis is a kept axis (each partition reduces its own rows along the
free axis), or - when few results are kept and the reduced extent is long - a reduced axis whose
partials are then combined across partitions (``Box.part_reduced``).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from neuron_sim import Architecture

PARTITIONS = 128
MAX_FREE_DIMS = 4
DEFAULT_MAX_FREE = 4096  # elements per partition per tile: >= 2 KiB DMA runs, engine ops well above MIN_II
# Smaller tiles than the SBUF budget allows are also tried: more tiles let loads, compute and
# stores overlap, fewer tiles pay fewer fixed DMA costs; the cost model picks.
PIPELINE_MIN_FREE = 256


@dataclass(frozen=True)
class Form:
    """One operand or result over the space: element strides per dim and an element offset."""

    strides: tuple[int, ...]
    offset: int = 0
    itemsize: int = 0  # bytes moved per element by DMA; 0 for forms generated on chip (no DMA cost)


@dataclass(frozen=True)
class Axis:
    size: int
    strides: tuple[int, ...]  # per form
    reduced: bool


@dataclass(frozen=True)
class FreeDim:
    strides: tuple[int, ...]  # per form
    count: int
    reduced: bool


@dataclass(frozen=True)
class Box:
    """One tile: ``partitions`` rows (a partition axis step of ``part_strides``) x the free dims."""

    offsets: tuple[int, ...]  # per form, elements
    partitions: int
    part_strides: tuple[int, ...]
    part_reduced: bool
    free: tuple[FreeDim, ...]
    first: bool = True  # first tile of its run of a reduction's accumulation
    last: bool = True

    @property
    def counts(self) -> tuple[int, ...]:
        return tuple(d.count for d in self.free)

    @property
    def free_size(self) -> int:
        return math.prod(self.counts)

    def pattern(self, form: int) -> tuple[int, int, list[tuple[int, int]]]:
        """(offset, partition stride, [(stride, count), ...]) of form ``form`` in this tile."""
        return self.offsets[form], self.part_strides[form], [(d.strides[form], d.count) for d in self.free]


@dataclass
class TilePlan:
    boxes: list[Box]
    max_partitions: int
    max_free: int  # largest free size of any box (what a tile buffer must hold)
    part_reduced: bool  # the partition axis is a reduced axis: partials combine across partitions
    free_limit: int  # the free size the planner aimed for

    @property
    def max_kept(self) -> int:
        """Largest number of kept (not reduced) elements per partition of any box."""
        return max(math.prod(d.count for d in b.free if not d.reduced) for b in self.boxes)


def free_limit(arch: Architecture, bytes_per_element: int, *, buffers: int = 2, max_free: int = DEFAULT_MAX_FREE,
               sbuf_fraction: float = 0.7) -> int:
    """Largest free size whose ``buffers`` sets of tiles (``bytes_per_element`` per column) fit SBUF."""
    room = int(arch.sbuf_usable_bytes_per_partition * sbuf_fraction) // max(1, buffers * bytes_per_element)
    return max(1, min(max_free, room))


def merge_axes(shape, forms: list[Form], reduced=()) -> list[Axis]:
    """Kept dims then reduced dims, size-1 dims dropped, neighbours every form walks contiguously merged."""
    reduced = set(reduced)
    order = [d for d in range(len(shape)) if d not in reduced] + [d for d in range(len(shape)) if d in reduced]
    merged: list[Axis] = []
    for d in order:
        if shape[d] == 1:
            continue
        ax = Axis(int(shape[d]), tuple(f.strides[d] for f in forms), d in reduced)
        if merged:
            prev = merged[-1]
            if prev.reduced == ax.reduced and all(p == s * ax.size for p, s in zip(prev.strides, ax.strides)):
                merged[-1] = Axis(prev.size * ax.size, ax.strides, ax.reduced)
                continue
        merged.append(ax)
    return merged


def plan_tiles(shape, forms: list[Form], reduced=(), *, limit: int, allow_partition_reduce: bool = False,
               partition_reduce_max_kept: int = 2048, reduced_innermost: bool = False, main_form: int = 0,
               ops_per_tile: int = 1, whole_reduced: bool = False) -> TilePlan:
    """Plan the tiles of ``shape``; see the module docstring. ``limit`` is the free-size budget.

    ``whole_reduced``: every tile holds the whole reduced extent of its rows (row-wise groups read a
    reduction's result in the tile that computed it); the caller makes sure it fits ``limit``.
    """
    axes = merge_axes(shape, forms, reduced)
    offsets = tuple(f.offset for f in forms)
    zeros = tuple(0 for _ in forms)
    if not axes:  # a scalar (or all dims of size 1): one element on one partition
        box = Box(offsets, 1, zeros, False, (FreeDim(zeros, 1, False),))
        return TilePlan([box], 1, 1, False, limit)
    kept_size = math.prod(a.size for a in axes if not a.reduced)
    candidates = [(i, False) for i, a in enumerate(axes) if not a.reduced]
    n_kept_axes = sum(not a.reduced for a in axes)
    if (allow_partition_reduce and any(a.reduced for a in axes) and kept_size <= min(limit, partition_reduce_max_kept)
            and n_kept_axes < MAX_FREE_DIMS):
        candidates += [(i, True) for i, a in enumerate(axes) if a.reduced and a.size > 1]
    if not candidates:  # everything reduced, reductions must stay within partitions: one row
        candidates = [(None, False)]
    limits = [limit]
    while limits[-1] // 2 >= PIPELINE_MIN_FREE and len(limits) < 4:
        limits.append(limits[-1] // 2)
    if whole_reduced:
        row = math.prod(a.size for a in axes if a.reduced)
        limits = [lim for lim in limits if lim >= row] or [max(limit, row)]
        reduced_innermost = True
    best = None
    for lim in limits:
        for p, across in candidates:
            if across and kept_size > lim:  # every kept result must stay in the free dims
                continue
            boxes = _layout(axes, p, across, offsets, lim, reduced_innermost, main_form)
            cost = _cost(boxes, forms, ops_per_tile, across)
            if best is None or cost < best[0]:
                best = (cost, boxes, across)
        if len(best[1]) >= 64:  # already many tiles: smaller ones only add fixed costs
            break
    _, boxes, across = best
    return TilePlan(boxes, max(b.partitions for b in boxes), max(b.free_size for b in boxes), across, limit)


# --- layout of one choice of partition axis --------------------------------------------------------


def _layout(axes, p, across, offsets, limit, reduced_innermost, main_form) -> list[Box]:
    rest = [a for i, a in enumerate(axes) if i != p]
    boxes: list[Box] = []
    if p is None:
        boxes += _region_boxes(None, None, offsets, rest, limit, across, reduced_innermost, main_form)
    else:
        inner = math.prod(a.size for a in rest)
        for pax, lo, base in _split(axes[p], inner, limit, offsets):
            boxes += _region_boxes(pax, lo, base, rest, limit, across, reduced_innermost, main_form)
    _mark_runs(boxes, across)
    return boxes


def _split(pax: Axis, inner: int, limit: int, base) -> list[tuple[Axis, Axis | None, tuple]]:
    """Regions of the partition axis: ``rows x cols`` (cols moved into the free dims) plus a tail."""
    n = pax.size
    if n <= PARTITIONS or inner >= limit:
        return [(pax, None, base)]
    lo = min(-(-n // PARTITIONS), limit // inner)
    if lo <= 1:
        return [(pax, None, base)]
    tiles = -(-n // (PARTITIONS * lo))
    lo = -(-n // (PARTITIONS * tiles))  # even out the rows over the partition tiles
    # A row length that divides n exactly leaves no tail tile (21000 = 125 x 168, not 127 x 165 + 45).
    for exact in range(lo, min(limit // inner, lo + max(1, lo // 4)) + 1):
        if n % exact == 0:
            lo = exact
            break
    hi, tail = n // lo, n % lo
    regions = [(Axis(hi, tuple(s * lo for s in pax.strides), pax.reduced), Axis(lo, pax.strides, pax.reduced), base)]
    if tail:
        tail_base = tuple(b + hi * lo * s for b, s in zip(base, pax.strides))
        regions += _split(Axis(tail, pax.strides, pax.reduced), inner, limit, tail_base)
    return regions


def _region_boxes(pax, lo, base, rest, limit, across, reduced_innermost, main_form) -> list[Box]:
    nforms = len(base)
    zeros = (0,) * nforms
    free_axes = list(rest) + ([lo] if lo is not None else [])

    def forced_inner(a: Axis) -> bool:
        # Across-partition reductions keep every kept result in the free dims; scans and arg
        # reductions walk their axis along the free dims.
        return (across and not a.reduced) or (reduced_innermost and a.reduced)

    # Outer -> inner: larger strides of the main form outside, so DMA runs are long.
    order = sorted(free_axes, key=lambda a: (forced_inner(a), -abs(a.strides[main_form]) if a.strides else 0))
    free: list[tuple[Axis, int]] = []
    loops: list[tuple] = []  # ("axis", axis) | ("chunk", axis, chunk)
    size, stopped = 1, False
    for a in reversed(order):
        if stopped or len(free) == MAX_FREE_DIMS:
            loops.insert(0, ("axis", a))
            stopped = True
            continue
        if size * a.size <= limit:
            free.insert(0, (a, a.size))
            size *= a.size
            continue
        chunk = limit // size
        if chunk >= 2 or not free:
            free.insert(0, (a, max(1, chunk)))
            loops.insert(0, ("chunk", a, max(1, chunk)))
            size *= max(1, chunk)
        else:
            loops.insert(0, ("axis", a))
        stopped = True
    if pax is not None and pax.size > PARTITIONS:
        loops.insert(0, ("part", pax))
    # Kept loops outside reduced loops (stable): a reduction's tiles for one result are consecutive.
    loops.sort(key=lambda spec: spec[1].reduced)

    ranges = []
    for spec in loops:
        a = spec[1]
        if spec[0] == "part":
            ranges.append(range(-(-a.size // PARTITIONS)))
        elif spec[0] == "chunk":
            ranges.append(range(-(-a.size // spec[2])))
        else:
            ranges.append(range(a.size))
    p_count = pax.size if pax is not None else 1
    p_strides = pax.strides if pax is not None else zeros
    p_reduced = pax.reduced if pax is not None else False
    boxes = []
    for idx in itertools.product(*ranges):
        offs = list(base)
        partitions = min(p_count, PARTITIONS)
        counts = {id(a): c for a, c in free}
        kept_key = []
        for spec, i in zip(loops, idx):
            a = spec[1]
            step = PARTITIONS if spec[0] == "part" else spec[2] if spec[0] == "chunk" else 1
            for f in range(nforms):
                offs[f] += i * step * a.strides[f]
            if spec[0] == "part":
                partitions = min(PARTITIONS, a.size - i * PARTITIONS)
            elif spec[0] == "chunk":
                counts[id(a)] = min(spec[2], a.size - i * spec[2])
            if not a.reduced:
                kept_key.append(i)
        dims = tuple(FreeDim(a.strides, counts[id(a)], a.reduced) for a, _ in free) or (FreeDim(zeros, 1, False),)
        box = Box(tuple(offs), partitions, p_strides, p_reduced, dims)
        boxes.append((tuple(kept_key), box))
    # Stash the key for run marking (kept loop indices; a region boundary separates runs too).
    return [_KeyedBox(key, box, id(pax)) for key, box in boxes]


class _KeyedBox:
    __slots__ = ("key", "box", "region")

    def __init__(self, key, box, region):
        self.key, self.box, self.region = key, box, region


def _mark_runs(items: list, across: bool) -> None:
    """Replace keyed boxes by boxes whose first/last flags delimit each accumulation run."""
    boxes = []
    n = len(items)

    def run(item):
        # Across partitions every region adds into the same kept results (all in the free dims);
        # otherwise a region of the split partition axis holds results of its own.
        return item.key if across else (item.key, item.region)

    for i, item in enumerate(items):
        first = i == 0 or run(items[i - 1]) != run(item)
        last = i == n - 1 or run(items[i + 1]) != run(item)
        b = item.box
        boxes.append(Box(b.offsets, b.partitions, b.part_strides, b.part_reduced, b.free, first, last))
    items[:] = boxes


# --- cost model used to choose between layouts ------------------------------------------------------
#
# Per tile: the loads (one DMA per operand, the queues in parallel, each paying a fixed latency),
# the compute (ops_per_tile instructions over the free size) and the stores. Tiles pipeline:
# tile i computes while tile i+1 loads and tile i-1 stores.

_DMA_BYTES_PER_NS = 23.0  # per DMA engine (trn2 practical rate)
_DMA_CHUNK_NS = 10.0  # per contiguous run (descriptor)
_DMA_FIXED_NS = 1300.0  # trigger to first byte
_DMA_ISSUE_NS = 150.0  # per DMA, serialized on its queue and trigger engine
_ENGINE_GHZ = 0.96
_INSTRUCTION_NS = 120.0  # fixed cost of each compute instruction (access overhead, semaphores)


def _run_elements(dims: list[tuple[int, int]]) -> int:
    run, expected = 1, 1
    for stride, count in reversed(dims):
        if count == 1:
            continue
        if stride != expected:
            break
        run *= count
        expected *= count
    return run


def _dma_ns(box: Box, form: int, itemsize: int) -> float:
    engines = -(-box.partitions // 8)
    dims = [(d.strides[form], d.count) for d in box.free if d.strides[form] != 0 and d.count > 1]
    elems = box.partitions * math.prod(c for _, c in dims)
    chunks = max(elems / _run_elements(dims), box.partitions)
    return elems * itemsize / (engines * _DMA_BYTES_PER_NS) + chunks * _DMA_CHUNK_NS / engines + _DMA_ISSUE_NS


def _cost(boxes: list[Box], forms: list[Form], ops_per_tile: int, across: bool) -> float:
    # Forms with itemsize are DMA'd; the caller lists outputs last, but which forms are loads and
    # which are stores does not change the estimate much: split them evenly by position.
    moved = [f for f, form in enumerate(forms) if form.itemsize]
    half = max(1, len(moved) // 2)
    loads, stores, compute = [], [], []
    for b in boxes:
        loads.append(sum(_dma_ns(b, f, forms[f].itemsize) for f in moved[:half]))
        stores.append(sum(_dma_ns(b, f, forms[f].itemsize) for f in moved[half:]))
        c = ops_per_tile * (max(64, b.free_size) / _ENGINE_GHZ + _INSTRUCTION_NS)
        if across:
            kept = math.prod(d.count for d in b.free if not d.reduced)
            c += 2 * max(64, 4 * kept) / _ENGINE_GHZ
        compute.append(c)
    n = len(boxes)
    total = _DMA_FIXED_NS + loads[0]
    for i in range(n):
        nxt = loads[i + 1] if i + 1 < n else 0.0
        prev = stores[i - 1] if i > 0 else 0.0
        total += max(compute[i], nxt + prev)
    return total + _DMA_FIXED_NS + stores[-1]
