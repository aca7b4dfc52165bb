"""Per-loop tile state shared by the tile-loop lowerings: buffers by role, hoisted constants,
and loading/storing one tile of a view."""

from __future__ import annotations

import math

import numpy as np
from neuron_sim import AccessPattern, dtypes
from neuron_sim.isa import DmaCopy, Iota, Memset, RandomWords
from neuron_sim.memory.access_pattern import SBUF

from ..dma import compact_dims, hbm_pattern, onchip_compact_strides
from ..emitter import Emitter, Operand, onchip_dtype
from ..layout import Box
from ..sbuf import Scope, broadcast, column, tile_ap
from ..views import View


class TileCtx:
    """What instruction selection sees of the loop: the current tile's shape and its buffers.

    Buffers are allocated lazily by *role* (a node, a leaf, a temporary) as rings of ``buffers``
    tiles of ``[128, max_free]``; consecutive tiles of the loop use consecutive ring slots, so a
    tile's loads overlap the previous tile's compute.
    """

    def __init__(self, em: Emitter, scope: Scope, max_free: int, buffers: int = 2, max_kept: int | None = None):
        self.em = em
        self.scope = scope
        self.max_free = max(1, max_free)
        self.max_kept = max(1, max_kept or max_free)  # per-result buffers of reductions
        self.buffers = buffers
        self.rings: dict = {}
        self.roles: dict = {}  # result role -> shared buffer role (values whose lifetimes do not overlap)
        self.consts: dict = {}
        self.deferrable: set = set()  # value ids whose tensor_scalar may stay deferred (``deferred.py``)
        self.integer_alu: set = set()  # value ids computed on GpSimd's integer ALU (``integers.py``)
        self.pc = 1
        self.counts: tuple[int, ...] = (1,)
        self.slot = 0
        self.run = -1  # index of the current accumulation run (a reduction's consecutive tiles)

    def set_box(self, box: Box, slot: int) -> None:
        self.pc = box.partitions
        self.counts = box.counts
        self.slot = slot
        if box.first:
            self.run += 1

    @property
    def free_size(self) -> int:
        return math.prod(self.counts)

    def emit(self, inst):
        return self.em.emit(inst)

    # --- buffers -----------------------------------------------------------------------------
    def buffer(self, role, dtype: str, free: int | None = None, memory: str = SBUF, count: int | None = None,
               slot: int | None = None):
        """This tile's buffer for ``role`` (``slot``: pick the ring entry yourself, e.g. per run)."""
        key = (role, dtype, memory)
        ring = self.rings.get(key)
        if ring is None:
            ring = self.rings[key] = self.scope.ring(free or self.max_free, dtype, count or self.buffers, memory)
        return ring.at(self.slot if slot is None else slot)

    def result(self, role, dtype: str, col: bool = False) -> Operand:
        tile = self.buffer(self.roles.get(role, role), dtype)
        if col:
            c = column(tile, self.pc)
            return Operand(dtype, ap=broadcast(c, self.counts), col=c)
        return Operand(dtype, ap=tile_ap(tile, self.pc, self.counts))

    def temp(self, index: int, dtype: str = "float32", col: bool = False) -> Operand:
        return self.result(("temp", index), dtype, col)

    def const_col(self, value, dtype: str) -> AccessPattern:
        """A ``[P, 1]`` tile holding ``value``, set once per loop (hoisted out of it)."""
        key = (np.asarray(value, dtype=np.float64).tobytes(), dtype)
        tile = self.consts.get(key)
        if tile is None:
            tile = self.consts[key] = self.scope.sbuf(1, dtype)
            self.em.emit(Memset(dst=column(tile, 128), value=_memset_value(value, dtype), engine=self.em.pick("vector", "gpsimd")),
                         hoist=True)
        return column(tile, self.pc)

    def generator_state(self, tensor: str) -> AccessPattern:
        """The [1, 4] tile of the generator state in HBM tensor ``tensor``, loaded once per loop."""
        key = ("generator state", tensor)
        tile = self.consts.get(key)
        if tile is None:
            tile = self.consts[key] = self.scope.sbuf(4, "int32")
            engine, queue = self.em.queues.load()
            self.em.emit(DmaCopy(dst=tile_ap(tile, 1, (4,)), src=hbm_pattern(tensor, "int32", 0, 0, 1, [(1, 4)]),
                                 engine=engine, queue=queue), hoist=True)
        return tile_ap(tile, 1, (4,))

    def full(self, op: Operand) -> AccessPattern:
        """``op`` as a full ``[P, *counts]`` pattern (immediates through a hoisted constant column)."""
        if op.is_imm:
            return broadcast(self.const_col(op.imm, op.dtype), self.counts)
        return op.ap

    def colap(self, op: Operand) -> AccessPattern:
        """``op`` as a ``[P, 1]`` pattern; ``op`` must be constant along the free dims."""
        if op.is_imm:
            return self.const_col(op.imm, op.dtype)
        return op.col

    # --- views in and out ----------------------------------------------------------------------
    def load(self, role, view: View, box: Box, form: int, dtype: str | None = None) -> Operand:
        """The tile ``box`` of ``view`` (form ``form`` of the plan) on chip, in ``dtype``."""
        dtype = dtype or onchip_dtype(view.dtype)
        offset, part_stride, dims = box.pattern(form)
        if view.kind == "scalar":
            return Operand(dtype, imm=_imm(view.value, dtype))
        strides, compact_size = onchip_compact_strides(dims)
        tile = self.buffer(role, dtype)
        if view.kind in ("iota", "random_words"):
            if compact_size == 1:
                dst = column(tile, self.pc)
                pattern = ((1, 1),)
            else:
                compact, _ = compact_dims(dims)
                dst = tile_ap(tile, self.pc, [c for _, c in compact])
                pattern = tuple(compact)
            if view.kind == "iota":
                self.emit(Iota(dst=dst, pattern=pattern, offset=int(offset), channel_multiplier=int(part_stride)))
            else:
                self.emit(RandomWords(dst=dst, key=self.generator_state(view.tensor), count=int(view.value), pattern=pattern,
                                      offset=int(offset), channel_multiplier=int(part_stride),
                                      engine=self.em.pick("vector", "gpsimd")))
        else:
            compact, _ = compact_dims(dims)
            dst = tile_ap(tile, self.pc, [c for _, c in compact] or (1,))
            src = hbm_pattern(view.tensor, view.dtype, offset, part_stride, self.pc, compact)
            self.em.load(dst, src)
        if compact_size == 1:
            c = column(tile, self.pc)
            return Operand(dtype, ap=broadcast(c, self.counts), col=c)
        return Operand(dtype, ap=tile_ap(tile, self.pc, self.counts, strides))

    def store(self, view: View, box: Box, form: int, src: AccessPattern, *, drop_reduced: bool = False,
              partitions: int | None = None) -> None:
        """Write ``src`` (this tile's values) into ``view``; ``drop_reduced`` skips the box's reduced dims."""
        offset, part_stride, dims = box.pattern(form)
        if drop_reduced:
            dims = [d for d, fd in zip(dims, box.free) if not fd.reduced]
        pc = partitions or self.pc
        dims = [(s, c) for s, c in dims if c > 1]
        self.em.store(hbm_pattern(view.tensor, view.dtype, offset, part_stride, pc, dims), src)


def _imm(value, dtype: str):
    """An immediate as the engines take it: bool as 0/1, integers exact, floats as Python floats."""
    if isinstance(value, (bool, np.bool_)):
        return 1.0 if value else 0.0
    if dtypes.is_int(dtype) or dtype == "bool":
        return int(value)
    return float(value)


def _memset_value(value, dtype: str):
    if dtype == "bool":
        return 1.0 if value else 0.0
    if dtypes.is_int(dtype):
        return int(value)
    return float(value)


__all__ = ["TileCtx", "Operand"]
