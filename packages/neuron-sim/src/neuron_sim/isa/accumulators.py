"""VectorE instructions that scan along the free dim or reduce into the engine's accumulators.

VectorE keeps one fp32 accumulator register per partition, shared by its accumulating
instructions (tensor_scalar_cumulative, select_reduce, range_select): ``reduce_cmd`` says what an
instruction does with it - ``idle`` leaves it, ``reset`` sets it to the reduce op's identity,
``reset_reduce`` resets then accumulates this instruction's result, ``reduce`` accumulates onto
what is there (chaining instructions), ``load_reduce`` loads a given value first. The register
starts undefined (NaN here) at each launch. Semantics: SDK ``nki.isa`` docs of NKI 0.6.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import PSUM, AccessPattern
from . import ops
from .base import check_memory, check_onchip, check_same_partitions, check_scalar_operand
from .vector import _Elementwise

REDUCE_CMDS = ("idle", "reset", "reduce", "reset_reduce", "load_reduce")
# Identity a ``reset`` leaves in the accumulator, per reduce op.
ACCUMULATOR_IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": float("-inf"), "minimum": float("inf")}
COMPARE_OPS = ("equal", "less", "less_equal", "greater", "greater_equal")

Operand = float | AccessPattern


def _check_reduce_cmd(cmd: str, allowed=REDUCE_CMDS) -> None:
    if cmd not in allowed:
        raise ValidationError("accumulator.reduce_cmd", f"reduce_cmd must be one of {list(allowed)}, got {cmd!r}")


def _check_column(ap: AccessPattern, like: AccessPattern, arch, role: str, engine: str) -> None:
    check_onchip(ap, arch, role)
    check_memory(ap, engine, role, writing=role == "reduce_res")
    if ap.free_size != 1:
        raise ValidationError("operand.shape", f"{role} holds one value per partition, got {ap.free_size} ({ap.describe()})")
    check_same_partitions(ap, like, role, "data")


@dataclass(kw_only=True, eq=False)
class TensorScalarCumulative(_Elementwise):
    """Per partition, along the free elements in order: ``acc = op1(op0(x, imm0), acc)`` (or
    ``op0(imm0, x)`` with ``reverse0``), ``dst[i] = acc``; ``acc`` starts as ``reduce_cmd`` says
    (``load_reduce``: ``imm1``) and stays in VectorE's accumulators afterwards."""

    opcode = "TENSOR_SCALAR_CUMULATIVE"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern
    op0: str
    imm0: Operand
    op1: str
    imm1: Operand | None = None
    reverse0: bool = False
    reduce_cmd: str = "reset_reduce"

    def reads(self):
        return [self.src] + [op for op in (self.imm0, self.imm1) if isinstance(op, AccessPattern)]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"))
        ops.check_op(self.op0, ops.ARITHMETIC_OPS, "ALU")
        if self.op1 not in ACCUMULATOR_IDENTITY:
            raise ValidationError("accumulator.op", f"the cumulative op is one of {list(ACCUMULATOR_IDENTITY)}, got {self.op1!r}")
        _check_reduce_cmd(self.reduce_cmd, ("reset_reduce", "reduce", "load_reduce"))
        for ap in (self.src, self.dst):
            if dtypes.dtype_name(ap.dtype) in ("int32", "uint32"):
                raise ValidationError("accumulator.dtype", f"tensor_scalar_cumulative does not take {ap.dtype} ({ap.describe()})")
        check_scalar_operand(self.imm0, self.src, arch, "imm0", self.engine)
        if self.reduce_cmd == "load_reduce" and self.imm1 is None:  # (imm1 is ignored by the other commands)
            raise ValidationError("accumulator.imm1", "reduce_cmd=load_reduce starts the accumulator from imm1: give imm1")
        check_scalar_operand(self.imm1, self.src, arch, "imm1", self.engine)


@dataclass(kw_only=True, eq=False)
class TensorTensorScan(_Elementwise):
    """Per partition: ``r[0] = op1(op0(d0[0], initial), d1[0])``, ``r[i] = op1(op0(d0[i], r[i-1]), d1[i])``
    (``reverse0``/``reverse1`` swap each op's operands); fp32 math."""

    opcode = "TENSOR_TENSOR_SCAN"
    engines = ("vector",)
    dst: AccessPattern
    data0: AccessPattern
    data1: AccessPattern
    initial: Operand
    op0: str
    op1: str
    reverse0: bool = False
    reverse1: bool = False

    def reads(self):
        return [self.data0, self.data1] + ([self.initial] if isinstance(self.initial, AccessPattern) else [])

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.data0, "data0"), (self.data1, "data1"))
        for op in (self.op0, self.op1):
            ops.check_op(op, ops.ARITHMETIC_OPS, "ALU")
        if self.data0.memory == PSUM and self.data1.memory == PSUM:
            raise ValidationError("tensor_tensor.both_psum", "tensor_tensor_scan cannot read both data0 and data1 from PSUM")
        check_scalar_operand(self.initial, self.data0, arch, "initial", self.engine)


@dataclass(kw_only=True, eq=False)
class SelectReduce(_Elementwise):
    """``dst = predicate ? on_true : on_false`` (``reverse_pred`` flips it); the max of each row
    goes through the accumulators (``reduce_cmd``) into ``reduce_res`` when given."""

    opcode = "SELECT_REDUCE"
    engines = ("vector",)
    dst: AccessPattern
    predicate: AccessPattern
    on_true: AccessPattern
    on_false: Operand
    reduce_res: AccessPattern | None = None
    reduce_cmd: str = "idle"
    reduce_op: str = "maximum"
    reverse_pred: bool = False

    def reads(self):
        return [self.predicate, self.on_true] + ([self.on_false] if isinstance(self.on_false, AccessPattern) else [])

    def writes(self):
        return [self.dst] + ([self.reduce_res] if self.reduce_res is not None else [])

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.predicate, "predicate"), (self.on_true, "on_true"))
        if self.predicate.memory == PSUM and self.on_true.memory == PSUM:
            raise ValidationError("select_reduce.both_psum", "select_reduce cannot read both predicate and on_true from PSUM")
        if not (dtypes.is_int(self.predicate.dtype) or dtypes.dtype_name(self.predicate.dtype) == "bool"):
            raise ValidationError("select_reduce.predicate_dtype", f"the predicate is an integer tile, got {self.predicate.dtype}")
        if dtypes.dtype_name(self.on_true.dtype) in ("tfloat32", "int32", "uint32"):
            raise ValidationError("select_reduce.dtype", f"on_true cannot be {self.on_true.dtype}")
        check_scalar_operand(self.on_false, self.on_true, arch, "on_false", self.engine)
        if self.reduce_op != "maximum":
            raise ValidationError("select_reduce.reduce_op", f"select_reduce reduces with maximum only, got {self.reduce_op!r}")
        _check_reduce_cmd(self.reduce_cmd)
        if self.reduce_res is not None:
            _check_column(self.reduce_res, self.on_true, arch, "reduce_res", self.engine)
            if not dtypes.is_float(self.reduce_res.dtype):
                raise ValidationError("select_reduce.reduce_res_dtype", f"reduce_res is a float tile, got {self.reduce_res.dtype}")


@dataclass(kw_only=True, eq=False)
class RangeSelect(_Elementwise):
    """``dst[p, i] = on_true[p, i]`` where ``comp_op0(range_start + i, bound0[p])`` and
    ``comp_op1(range_start + i, bound1[p])`` both hold, else ``on_false_value``; the max of each
    row goes through the accumulators (``reduce_cmd``) into ``reduce_res`` when given."""

    opcode = "RANGE_SELECT"
    engines = ("vector",)
    dst: AccessPattern
    on_true: AccessPattern
    comp_op0: str
    comp_op1: str
    bound0: AccessPattern
    bound1: AccessPattern
    on_false_value: float
    range_start: int = 0
    reduce_res: AccessPattern | None = None
    reduce_cmd: str = "reset_reduce"
    reduce_op: str = "maximum"

    def reads(self):
        return [self.on_true, self.bound0, self.bound1]

    def writes(self):
        return [self.dst] + ([self.reduce_res] if self.reduce_res is not None else [])

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.on_true, "on_true"))
        for op, role in ((self.comp_op0, "comp_op0"), (self.comp_op1, "comp_op1")):
            if op not in COMPARE_OPS:
                raise ValidationError("range_select.comp_op", f"{role} is one of {list(COMPARE_OPS)}, got {op!r}")
        for bound, role in ((self.bound0, "bound0"), (self.bound1, "bound1")):
            _check_column(bound, self.on_true, arch, role, self.engine)
            if dtypes.dtype_name(bound.dtype) != "float32":
                raise ValidationError("range_select.bound_dtype", f"{role} is float32, got {bound.dtype}")
        if not dtypes.is_float(self.on_true.dtype):
            raise ValidationError("range_select.dtype", f"on_true is a float tile, got {self.on_true.dtype}")
        if self.reduce_op != "maximum":
            raise ValidationError("range_select.reduce_op", f"range_select reduces with maximum only, got {self.reduce_op!r}")
        _check_reduce_cmd(self.reduce_cmd)
        if self.reduce_res is not None:
            _check_column(self.reduce_res, self.on_true, arch, "reduce_res", self.engine)


__all__ = ["TensorScalarCumulative", "TensorTensorScan", "SelectReduce", "RangeSelect", "REDUCE_CMDS",
           "ACCUMULATOR_IDENTITY"]
