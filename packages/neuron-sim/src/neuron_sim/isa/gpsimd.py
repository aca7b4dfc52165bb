"""GpSimd instructions: index generation, affine masks, cross-partition reduction, local gathers.

GpSimd reaches SBUF only (no PSUM).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from . import ops
from .base import Instruction, check_memory, check_onchip, check_same_free_size, check_same_partitions

Pattern = tuple[tuple[int, int], ...]  # ((step, count), ...)


def _check_pattern(pattern: Pattern, dst: AccessPattern, what: str) -> None:
    if not pattern or len(pattern) > 4:
        raise ValidationError(f"{what}.pattern", f"{what} takes a pattern of 1 to 4 [step, count] pairs, got {list(pattern)}")
    n = 1
    for _, count in pattern:
        n *= count
    if n != dst.free_size:
        raise ValidationError(
            f"{what}.pattern", f"pattern {[list(p) for p in pattern]} yields {n} values per partition, dst holds {dst.free_size}"
        )


@dataclass(kw_only=True, eq=False)
class Iota(Instruction):
    """``dst[p, i...] = offset + p * channel_multiplier + sum(step_k * i_k)`` in int32, then cast."""

    opcode = "IOTA"
    engines = ("gpsimd",)
    dst: AccessPattern
    pattern: Pattern
    offset: int = 0
    channel_multiplier: int = 0

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_onchip(self.dst, arch, "dst")
        check_memory(self.dst, "gpsimd", "dst", writing=True)
        _check_pattern(self.pattern, self.dst, "iota")


@dataclass(kw_only=True, eq=False)
class AffineSelect(Instruction):
    """``dst = (affine(p, i) cmp 0) ? src : on_false_value`` with ``affine`` as in Iota (causal masks)."""

    opcode = "AFFINE_SELECT"
    engines = ("gpsimd",)
    dst: AccessPattern
    src: AccessPattern
    pattern: Pattern
    on_false_value: float
    offset: int = 0
    channel_multiplier: int = 0
    cmp_op: str = "greater_equal"

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        for ap, role, w in ((self.dst, "dst", True), (self.src, "src", False)):
            check_onchip(ap, arch, role)
            check_memory(ap, "gpsimd", role, writing=w)
        check_same_partitions(self.src, self.dst, "src", "dst")
        check_same_free_size(self.src, self.dst, "src", "dst")
        _check_pattern(self.pattern, self.dst, "affine_select")
        if self.cmp_op not in ops.COMPARISON_OPS:
            raise ValidationError("affine_select.cmp_op", f"cmp_op must be one of {ops.COMPARISON_OPS}, got {self.cmp_op!r}")


@dataclass(kw_only=True, eq=False)
class PartitionReduce(Instruction):
    """Reduce across partitions: ``dst[0, i] = op over p of src[p, i]``."""

    opcode = "PARTITION_REDUCE"
    engines = ("gpsimd",)
    dst: AccessPattern
    src: AccessPattern
    op: str

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        for ap, role, w in ((self.dst, "dst", True), (self.src, "src", False)):
            check_onchip(ap, arch, role)
            check_memory(ap, "gpsimd", role, writing=w)
        ops.check_op(self.op, ops.REDUCE_OPS, "reduce")
        if self.op in ops.BITVEC_OPS and not dtypes.is_int(self.src.dtype):
            raise ValidationError("alu.bitvec_dtype", f"bitwise reduce {self.op} needs integer data, got {self.src.dtype}")
        if self.dst.partition_count != 1:
            raise ValidationError("partition_reduce.dst", f"partition reduce writes one partition, dst spans {self.dst.partition_count}")
        check_same_free_size(self.src, self.dst, "src", "dst")


@dataclass(kw_only=True, eq=False)
class LocalGather(Instruction):
    """Gather within each group of 16 partitions (one GpSimd core's slice of SBUF).

    Each group flattens its 16 partitions of ``index`` partition-first (column by column) into one
    list and keeps the first ``num_valid_indices`` (default: all of them). Every partition ``p`` of
    the group then gathers, for the k-th index ``i``, the ``e = num_elem_per_idx`` elements
    ``src[p, i : i + e]`` of its own row (free elements, flattened) into ``dst[p, k*e : (k+1)*e]``
    - the numpy semantics of the SDK's ``nki.isa.local_gather`` docs.
    """

    opcode = "LOCAL_GATHER"
    engines = ("gpsimd",)
    dst: AccessPattern
    src: AccessPattern
    index: AccessPattern
    num_elem_per_idx: int = 1
    num_valid_indices: int | None = None

    def reads(self):
        return [self.src, self.index]

    def writes(self):
        return [self.dst]

    @property
    def valid_indices(self) -> int:
        """Indices each 16-partition group gathers with."""
        return self.num_valid_indices if self.num_valid_indices is not None else 16 * self.index.free_size

    def _validate(self, arch):
        for ap, role, w in ((self.dst, "dst", True), (self.src, "src", False), (self.index, "index", False)):
            check_onchip(ap, arch, role)
            check_memory(ap, "gpsimd", role, writing=w)
        check_same_partitions(self.src, self.dst, "src", "dst")
        check_same_partitions(self.index, self.dst, "index", "dst")
        if not dtypes.is_int(self.index.dtype):
            raise ValidationError("local_gather.index", f"index must be integers, got {self.index.dtype}")
        if self.num_elem_per_idx not in (1, 2, 4, 8, 16, 32):
            raise ValidationError("local_gather.num_elem_per_idx",
                                  f"num_elem_per_idx is one of 1, 2, 4, 8, 16, 32, got {self.num_elem_per_idx}")
        if not 0 < self.valid_indices <= 16 * self.index.free_size or self.valid_indices > 4096:
            raise ValidationError("local_gather.num_valid_indices",
                                  f"num_valid_indices {self.valid_indices} must be in 1..{min(4096, 16 * self.index.free_size)} "
                                  "(a group's 16 partitions of index, at most 4096)")
        if self.dst.free_size != self.valid_indices * self.num_elem_per_idx:
            raise ValidationError(
                "local_gather.shape",
                f"{self.valid_indices} indices x {self.num_elem_per_idx} elements != dst's {self.dst.free_size} per partition",
            )
        if self.src.partition_count % 16 or self.src.partition_start % 16:
            raise ValidationError("local_gather.partitions", "local_gather works on whole 16-partition groups")
