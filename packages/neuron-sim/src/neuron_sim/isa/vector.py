"""Elementwise, reduction and statistics instructions of VectorE (some also run on ScalarE/GpSimd).

All compute in fp32 and round on write, except bitvec ops, which work on integer bits, and a
tensor_tensor on GpSimd over int32 (or uint32) tiles only, which runs on GpSimd's integer ALU
(``ops.INTEGER_ALU_OPS``: exact 32-bit arithmetic).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import PSUM, AccessPattern
from . import ops
from .base import (
    Instruction,
    check_operand,
    check_same_free_size,
    check_same_partitions,
    check_scalar_operand,
)

Operand = float | AccessPattern | None


class _Elementwise(Instruction):
    """Shared checks: on-chip operands the engine can reach, equal partitions and element counts."""

    def _check_io(self, arch, dst: AccessPattern, *inputs: tuple[AccessPattern, str]) -> None:
        check_operand(dst, arch, self.engine, "dst", writing=True)
        for ap, role in inputs:
            check_operand(ap, arch, self.engine, role, writing=False)
            check_same_partitions(ap, dst, role, "dst")
            check_same_free_size(ap, dst, role, "dst")

    @staticmethod
    def _check_binary_op(op: str, *aps: AccessPattern) -> None:
        ops.check_op(op, ops.ALL_BINARY_OPS, "ALU")
        if op in ops.BITVEC_OPS:
            for ap in aps:
                if not dtypes.is_int(ap.dtype):
                    raise ValidationError(
                        "alu.bitvec_dtype", f"bitwise op {op} needs integer operands, got {ap.dtype} ({ap.describe()})"
                    )


@dataclass(kw_only=True, eq=False)
class TensorTensor(_Elementwise):
    opcode = "TENSOR_TENSOR"
    engines = ("vector", "gpsimd")
    dst: AccessPattern
    in0: AccessPattern
    in1: AccessPattern
    op: str

    def reads(self):
        return [self.in0, self.in1]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.in0, "in0"), (self.in1, "in1"))
        self._check_binary_op(self.op, self.dst, self.in0, self.in1)
        if self.in0.memory == PSUM and self.in1.memory == PSUM:
            raise ValidationError("tensor_tensor.both_psum", "tensor_tensor cannot read both inputs from PSUM")
        if (ops.integer_mode(self.engine, self.dst, self.in0, self.in1) and self.op not in ops.INTEGER_ALU_OPS
                and self.op not in ops.BITVEC_OPS):
            raise ValidationError(
                "alu.integer_mode_op",
                f"GpSimd's integer ALU (all tiles {self.dst.dtype}) has no modelled {self.op}; it computes "
                f"{sorted(ops.INTEGER_ALU_OPS)} exactly - run {self.op} on VectorE in fp32 instead")


@dataclass(kw_only=True, eq=False)
class TensorScalar(_Elementwise):
    """``dst = (src op0 operand0) op1 operand1``; an operand is an immediate or a [P, 1] tile.

    ``reverse0`` swaps the operands of op0 (``operand0 op0 src``); likewise ``reverse1``. ``op1`` is
    optional. A unary ALU op (``abs``, ``square``, ``rsqrt``...) takes no operand.
    """

    opcode = "TENSOR_SCALAR"
    engines = ("vector", "scalar", "gpsimd")
    dst: AccessPattern
    src: AccessPattern
    op0: str
    operand0: Operand = None
    reverse0: bool = False
    op1: str | None = None
    operand1: Operand = None
    reverse1: bool = False

    def reads(self):
        reads = [self.src]
        for operand in (self.operand0, self.operand1):  # a [P, 1] tile, or an immediate
            if isinstance(operand, AccessPattern):
                reads.append(operand)
        return reads

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"))
        for op, operand, role in ((self.op0, self.operand0, "operand0"), (self.op1, self.operand1, "operand1")):
            if op is None:
                if operand is not None:
                    raise ValidationError("tensor_scalar.operand", f"{role} given without an op")
                continue
            if op in ops.UNARY_ALU_OPS and operand is None:
                continue
            if operand is None:
                raise ValidationError("tensor_scalar.operand", f"op {op} needs {role}")
            self._check_binary_op(op, self.src, self.dst)
            check_scalar_operand(operand, self.src, arch, role, self.engine)
            if self.engine == "scalar" and op not in ("add", "multiply", "subtract", "bypass"):
                raise ValidationError(
                    "tensor_scalar.scalar_engine_op", f"ScalarE tensor_scalar supports add/subtract/multiply, not {op}"
                )
            if op in ops.BITVEC_OPS and self.engine != "vector":
                raise ValidationError("alu.bitvec_engine", f"bitwise op {op} runs on VectorE only")


@dataclass(kw_only=True, eq=False)
class ScalarTensorTensor(_Elementwise):
    """``dst = (src op0 operand0) op1 in1`` with operand0 an immediate or a [P, 1] tile."""

    opcode = "SCALAR_TENSOR_TENSOR"
    engines = ("vector", "gpsimd")
    dst: AccessPattern
    src: AccessPattern
    op0: str
    operand0: Operand
    op1: str
    in1: AccessPattern
    reverse0: bool = False
    reverse1: bool = False

    def reads(self):
        extra = [self.operand0] if isinstance(self.operand0, AccessPattern) else []
        return [self.src, self.in1] + extra

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"), (self.in1, "in1"))
        self._check_binary_op(self.op0, self.src)
        self._check_binary_op(self.op1, self.src, self.in1)
        check_scalar_operand(self.operand0, self.src, arch, "operand0", self.engine)


@dataclass(kw_only=True, eq=False)
class TensorReduce(_Elementwise):
    """Reduce the trailing free axes ``axes`` (1-based free-axis numbers, e.g. (1,) or (1, 2))."""

    opcode = "TENSOR_REDUCE"
    engines = ("vector", "gpsimd")
    dst: AccessPattern
    src: AccessPattern
    op: str
    axes: tuple[int, ...] = (1,)
    negate: bool = False

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_operand(self.dst, arch, self.engine, "dst", writing=True)
        check_operand(self.src, arch, self.engine, "src", writing=False)
        check_same_partitions(self.src, self.dst, "src", "dst")
        ops.check_op(self.op, ops.REDUCE_OPS, "reduce")
        nfree = len(self.src.free)
        axes = tuple(sorted(self.axes))
        if not axes or axes != tuple(range(nfree - len(axes) + 1, nfree + 1)):
            raise ValidationError(
                "reduce.axes",
                f"reductions run over trailing free axes (1..{nfree} for shape {list(self.src.shape)}), got {list(self.axes)}",
            )
        kept = 1
        for _, count in self.src.free[: nfree - len(axes)]:
            kept *= count
        if self.dst.free_size != kept:
            raise ValidationError(
                "reduce.dst_shape",
                f"reducing axes {list(axes)} of {list(self.src.shape)} leaves {kept} elements per partition, dst has {self.dst.free_size}",
            )
        if self.op in ops.BITVEC_OPS and not dtypes.is_int(self.src.dtype):
            raise ValidationError("alu.bitvec_dtype", f"bitwise reduce {self.op} needs integer data, got {self.src.dtype}")


@dataclass(kw_only=True, eq=False)
class TensorCopy(_Elementwise):
    """Copy with dtype conversion (bit-exact when dtypes match)."""

    opcode = "TENSOR_COPY"
    engines = ("vector", "scalar", "gpsimd")
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"))


@dataclass(kw_only=True, eq=False)
class CopyPredicated(_Elementwise):
    """``dst[i] = src[i]`` where ``predicate[i]`` is nonzero (zero if ``reverse``); dst kept elsewhere."""

    opcode = "TENSOR_COPY_PREDICATED"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern
    predicate: AccessPattern
    reverse: bool = False

    def reads(self):
        return [self.src, self.predicate, self.dst]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"), (self.predicate, "predicate"))


@dataclass(kw_only=True, eq=False)
class Select(_Elementwise):
    """``dst = predicate ? on_true : on_false`` elementwise; ``on_false`` may be an immediate."""

    opcode = "SELECT"
    engines = ("vector", "gpsimd")
    dst: AccessPattern
    predicate: AccessPattern
    on_true: AccessPattern
    on_false: float | AccessPattern

    def reads(self):
        extra = [self.on_false] if isinstance(self.on_false, AccessPattern) else []
        return [self.predicate, self.on_true] + extra

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        inputs = [(self.predicate, "predicate"), (self.on_true, "on_true")]
        if isinstance(self.on_false, AccessPattern):
            inputs.append((self.on_false, "on_false"))
        self._check_io(arch, self.dst, *inputs)


@dataclass(kw_only=True, eq=False)
class Memset(_Elementwise):
    opcode = "MEMSET"
    engines = ("vector", "gpsimd", "scalar")
    dst: AccessPattern
    value: float

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst)
        value = float(self.value)
        # math.isfinite first: int() of NaN/inf raises ValueError/OverflowError, not a rule error.
        if dtypes.is_int(self.dst.dtype) and (not math.isfinite(value) or value != int(value)):
            raise ValidationError("memset.value", f"memset of {self.dst.dtype} needs an integer value, got {self.value}")


@dataclass(kw_only=True, eq=False)
class Reciprocal(_Elementwise):
    """1/x on VectorE (more precise than ScalarE's table, ~8x slower)."""

    opcode = "RECIPROCAL"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"))


BN_STATS_FMAX = 512
BN_STATS_WIDTH = 6  # per chunk: count, mean, M2 ... as three (count, mean, m2) pairs
BN_AGGR_WIDTH = 2  # mean, variance


@dataclass(kw_only=True, eq=False)
class BnStats(_Elementwise):
    """Per-partition statistics of up to 512 elements: [count, mean, m2] stored twice (even/odd halves)."""

    opcode = "BN_STATS"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_operand(self.dst, arch, "vector", "dst", writing=True)
        check_operand(self.src, arch, "vector", "src", writing=False)
        check_same_partitions(self.src, self.dst, "src", "dst")
        if self.src.free_size > BN_STATS_FMAX:
            raise ValidationError("bn_stats.fmax", f"bn_stats reads at most {BN_STATS_FMAX} elements per partition, got {self.src.free_size}")
        if self.dst.free_size != BN_STATS_WIDTH or not dtypes.is_float(self.dst.dtype):
            raise ValidationError("bn_stats.dst", f"bn_stats writes {BN_STATS_WIDTH} float values per partition, dst is {self.dst.describe()}")


@dataclass(kw_only=True, eq=False)
class BnAggr(_Elementwise):
    """Combine bn_stats results (k x 6 values per partition) into [mean, variance]."""

    opcode = "BN_AGGR"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_operand(self.dst, arch, "vector", "dst", writing=True)
        check_operand(self.src, arch, "vector", "src", writing=False)
        check_same_partitions(self.src, self.dst, "src", "dst")
        if self.src.free_size % BN_STATS_WIDTH:
            raise ValidationError("bn_aggr.src", f"bn_aggr reads a multiple of {BN_STATS_WIDTH} stats per partition, got {self.src.free_size}")
        if self.dst.free_size != BN_AGGR_WIDTH:
            raise ValidationError("bn_aggr.dst", f"bn_aggr writes [mean, variance] (2 values) per partition, dst is {self.dst.describe()}")


@dataclass(kw_only=True, eq=False)
class StreamShuffle(_Elementwise):
    """Within each 32-partition quadrant, ``dst[q*32 + i] = src[q*32 + mask[i]]`` (255 keeps dst)."""

    opcode = "STREAM_SHUFFLE"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern
    mask: tuple[int, ...]

    def reads(self):
        return [self.src, self.dst] if 255 in self.mask else [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        # Unlike other elementwise ops, source and destination may span different partitions: a
        # one-partition source broadcast into a quadrant is the common use (weights to 32 rows).
        check_operand(self.dst, arch, "vector", "dst", writing=True)
        check_operand(self.src, arch, "vector", "src", writing=False)
        check_same_free_size(self.src, self.dst, "src", "dst")
        q = arch.quadrant
        if len(self.mask) != q or any(not (0 <= m < q or m == 255) for m in self.mask):
            raise ValidationError("shuffle.mask", f"shuffle mask needs {q} source ids in [0, {q}) or 255, got {list(self.mask)}")
        for r in range(self.dst.partition_count):
            m = self.mask[r % q]
            if m != 255 and (r // q) * q + m >= self.src.partition_count:
                raise ValidationError(
                    "shuffle.source",
                    f"destination partition {r} takes source partition {(r // q) * q + m}, but src spans "
                    f"{self.src.partition_count} partition(s)",
                )
