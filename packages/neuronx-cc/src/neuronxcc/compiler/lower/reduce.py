"""The reduction at the end of a fused group, one tile at a time.

Per tile, the reduced dims that lie along the free axis are reduced by VectorE ``TensorReduce``
(the tile is read through a permuted pattern so those dims are trailing), in fp32. Tiles that
cover the same results one after the other (the reduced extent did not fit one tile) accumulate
into an fp32 accumulator with ``TensorTensor``. When the partition axis itself is reduced
(``Box.part_reduced``: few results, long reductions) the per-partition partials are combined across
partitions: sums by TensorE - a matmul against a column of ones, accumulating in PSUM over the
tiles - and max/min/prod/and/or by GpSimd ``PartitionReduce``. The last tile of a run stores the
accumulator, rounded to the result dtype by the store's DMA cast.
"""

from __future__ import annotations

import math

from neuron_sim.isa import Matmul, Memset, PartitionReduce, TensorCopy, TensorReduce, TensorTensor
from neuron_sim.memory.access_pattern import PSUM

from ..emitter import Operand
from ..layout import Box
from ..sbuf import column, tile_ap

REDUCE_ALU = {"sum": "add", "max": "maximum", "min": "minimum", "prod": "multiply", "and": "logical_and", "or": "logical_or"}
MATMUL_DTYPES = ("float32", "bfloat16", "float16")
PSUM_CHUNK = 512  # fp32 columns of one PSUM bank: a matmul result must fit one


def kept_counts(box: Box) -> tuple[int, ...]:
    return tuple(d.count for d in box.free if not d.reduced) or (1,)


def reduce_tile(tc, key, op: str, x: Operand, box: Box) -> None:
    """Fold this tile of ``x`` into the accumulator of reduction ``key`` (op: sum/max/...)."""
    alu = REDUCE_ALU[op]
    pc = tc.pc
    kept_idx = [i for i, d in enumerate(box.free) if not d.reduced]
    red_idx = [i for i, d in enumerate(box.free) if d.reduced and d.count > 1]
    kept = kept_counts(box)
    nkept = math.prod(kept)
    src = tc.full(x)
    if box.part_reduced:
        target = tile_ap(tc.buffer((key, "partial"), "float32", free=tc.max_kept), pc, kept)
    else:
        acc = tile_ap(tc.buffer((key, "acc"), "float32", free=tc.max_kept, slot=tc.run), pc, kept)
        target = acc if box.first else tile_ap(tc.buffer((key, "partial"), "float32", free=tc.max_kept), pc, kept)
    if red_idx:
        # Kept dims first and reduced dims trailing: the same tile read through a permuted pattern.
        order = kept_idx + red_idx
        permuted = _with_free(src, tuple(src.free[i] for i in order))
        tc.emit(TensorReduce(dst=target, src=permuted, op=alu, axes=tuple(range(len(kept_idx) + 1, len(order) + 1)),
                             engine="vector"))
        partial = target
    else:  # nothing to reduce inside this tile: its (kept) values are the partial
        partial = _with_free(src, tuple(src.free[i] for i in kept_idx) or ((0, 1),))
        if not box.part_reduced and box.first:
            tc.emit(TensorCopy(dst=acc, src=partial, engine=tc.em.pick("vector", "scalar")))
    if box.part_reduced:
        _across_partitions(tc, key, alu, partial, box, nkept)
    elif not box.first:
        tc.emit(TensorTensor(dst=acc, in0=acc, in1=partial, op=alu))


def _across_partitions(tc, key, alu, partial, box: Box, nkept: int) -> None:
    pc = tc.pc
    if alu == "add":
        moving = partial
        if moving.dtype not in MATMUL_DTYPES or not moving.is_contiguous():  # TensorE takes dense float tiles
            dense = tile_ap(tc.buffer((key, "moving"), "float32", free=tc.max_kept), pc, (nkept,))
            tc.emit(TensorCopy(dst=dense, src=moving, engine=tc.em.pick("vector", "scalar")))
            moving = dense
        moving = _with_free(moving, ((1, nkept),))
        ones = _ones(tc, moving.dtype)
        banks = -(-nkept // PSUM_CHUNK)
        acc = tc.buffer((key, "psum"), "float32", free=banks * PSUM_CHUNK, memory=PSUM, count=1)
        for c in range(banks):
            lo, n = c * PSUM_CHUNK, min(PSUM_CHUNK, nkept - c * PSUM_CHUNK)
            chunk = moving.__class__(moving.memory, moving.dtype, moving.partition_start, pc, ((1, n),),
                                     moving.offset + lo * moving.itemsize)
            tc.emit(Matmul(dst=tile_ap(acc, 1, (n,), offset=lo), stationary=column(ones, pc), moving=chunk,
                           accumulate=not box.first))
        return
    acc = tile_ap(tc.buffer((key, "acc"), "float32", free=tc.max_kept, count=1), 1, (nkept,))
    target = acc if box.first else tile_ap(tc.buffer((key, "across"), "float32", free=tc.max_kept), 1, (nkept,))
    tc.emit(PartitionReduce(dst=target, src=partial, op=alu))
    if not box.first:
        tc.emit(TensorTensor(dst=acc, in0=acc, in1=target, op=alu))


def result(tc, key, box: Box) -> tuple:
    """(pattern, partitions) of the finished accumulator of ``key`` (call on a run's last tile)."""
    kept = kept_counts(box)
    if box.part_reduced:
        psum = tc.rings.get(((key, "psum"), "float32", PSUM))
        out = tile_ap(tc.buffer((key, "acc"), "float32", free=tc.max_kept, count=1), 1, kept)
        if psum is not None:  # sums: evacuate PSUM (DMA cannot read it)
            tc.emit(TensorCopy(dst=out, src=tile_ap(psum.at(0), 1, kept), engine=tc.em.pick("vector", "scalar")))
        return out, 1
    return tile_ap(tc.buffer((key, "acc"), "float32", free=tc.max_kept, slot=tc.run), tc.pc, kept), tc.pc


def _with_free(ap, free):
    return ap.__class__(ap.memory, ap.dtype, ap.partition_start, ap.partition_count, tuple(free), ap.offset)


def _ones(tc, dtype):
    key = ("ones", dtype)
    tile = tc.consts.get(key)
    if tile is None:
        tile = tc.consts[key] = tc.scope.sbuf(1, dtype)
        tc.em.emit(Memset(dst=column(tile, 128), value=1.0, engine="gpsimd"), hoist=True)
    return tile
