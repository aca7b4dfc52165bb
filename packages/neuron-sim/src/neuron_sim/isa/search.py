"""Search instructions: the 8 largest values of a row, where given values are, replacing them
(VectorE), and segment bounds (GpSimd). Semantics: SDK ``nki.isa`` docs of NKI 0.6."""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from .base import check_operand, check_same_partitions
from .vector import _Elementwise

MIN_SEARCH_ELEMENTS, MAX_SEARCH_ELEMENTS = 8, 16_384


def _check_search_io(inst, arch, dst: AccessPattern, data: AccessPattern, dst_elements: int | None,
                     vals: AccessPattern | None = None) -> None:
    """dst and data (and the 8 ``vals`` searched for) on chip, on the same partitions."""
    check_operand(dst, arch, inst.engine, "dst", writing=True)
    for ap, role in ((data, "data"), (vals, "vals")):
        if ap is not None:
            check_operand(ap, arch, inst.engine, role, writing=False)
            check_same_partitions(ap, dst, role, "dst")
    if not MIN_SEARCH_ELEMENTS <= data.free_size <= MAX_SEARCH_ELEMENTS:
        raise ValidationError("search.size", f"{inst.opcode} reads {MIN_SEARCH_ELEMENTS}-{MAX_SEARCH_ELEMENTS} elements per "
                                             f"partition, got {data.free_size} ({data.describe()})")
    if dst_elements is not None and dst.free_size != dst_elements:
        raise ValidationError("search.dst_shape", f"{inst.opcode} writes {dst_elements} elements per partition, dst holds "
                                                  f"{dst.free_size} ({dst.describe()})")
    if vals is not None and vals.free_size != 8:
        raise ValidationError("search.vals", f"vals holds 8 values per partition, got {vals.free_size}")


@dataclass(kw_only=True, eq=False)
class Max8(_Elementwise):
    """``dst[p] = the 8 largest values of src[p], descending`` (fp32 compare)."""

    opcode = "MAX8"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        _check_search_io(self, arch, self.dst, self.src, 8)


@dataclass(kw_only=True, eq=False)
class FindIndex8(_Elementwise):
    """``dst[p, j] = index of the first occurrence of vals[p, j] in data[p]`` (all ones if absent);
    duplicate vals take the matching positions in ascending order."""

    opcode = "FIND_INDEX8"
    engines = ("vector",)
    dst: AccessPattern
    data: AccessPattern
    vals: AccessPattern

    def reads(self):
        return [self.data, self.vals]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        _check_search_io(self, arch, self.dst, self.data, 8, self.vals)
        if dtypes.dtype_name(self.dst.dtype) not in ("uint16", "uint32"):
            raise ValidationError("search.index_dtype", f"indices are uint16 or uint32, got {self.dst.dtype}")


@dataclass(kw_only=True, eq=False)
class MatchReplace8(_Elementwise):
    """``dst = data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``;
    ``dst_idx`` (optional) gets the matched positions - duplicate vals are paired with matches in
    reverse (vals[7] first), the opposite of FindIndex8."""

    opcode = "MATCH_REPLACE8"
    engines = ("vector",)
    dst: AccessPattern
    data: AccessPattern
    vals: AccessPattern
    imm: float
    dst_idx: AccessPattern | None = None

    def reads(self):
        return [self.data, self.vals]

    def writes(self):
        return [self.dst] + ([self.dst_idx] if self.dst_idx is not None else [])

    def _validate(self, arch):
        _check_search_io(self, arch, self.dst, self.data, self.data.free_size, self.vals)
        if self.dst_idx is not None:
            check_operand(self.dst_idx, arch, self.engine, "dst_idx", writing=True)
            check_same_partitions(self.dst_idx, self.data, "dst_idx", "data")
            if self.dst_idx.free_size != 8:
                raise ValidationError("search.dst_shape", f"dst_idx holds 8 indices per partition, got {self.dst_idx.free_size}")


@dataclass(kw_only=True, eq=False)
class SequenceBounds(_Elementwise):
    """For segment ids ``s`` (one partition, n elements): ``dst[0, 0, i]`` = the first index of the
    segment ``s[i]`` belongs to, ``dst[0, 1, i]`` its last index + 1; padding (id 0) gets ``n``
    and ``-1``. Segments are runs of equal ids. GpSimd."""

    opcode = "SEQUENCE_BOUNDS"
    engines = ("gpsimd",)
    dst: AccessPattern
    segment_ids: AccessPattern

    def reads(self):
        return [self.segment_ids]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        for ap, role, writing in ((self.dst, "dst", True), (self.segment_ids, "segment_ids", False)):
            check_operand(ap, arch, self.engine, role, writing=writing)
            if dtypes.dtype_name(ap.dtype) not in ("float32", "int32"):
                raise ValidationError("sequence_bounds.dtype", f"{role} is float32 or int32, got {ap.dtype}")
        if self.segment_ids.partition_count != 1 or self.dst.partition_count != 1:
            raise ValidationError("sequence_bounds.partitions", "sequence_bounds works on one partition: segment ids [1, n]")
        if self.dst.free_size != 2 * self.segment_ids.free_size:
            raise ValidationError("sequence_bounds.dst_shape", f"dst holds a (start, end) pair per id: "
                                                               f"{2 * self.segment_ids.free_size} elements, got {self.dst.free_size}")


__all__ = ["Max8", "FindIndex8", "MatchReplace8", "SequenceBounds"]
