"""Semantics of the scanning and accumulating VectorE instructions (``isa/accumulators.py``)."""

from __future__ import annotations

import numpy as np

from ..isa import ops
from ..isa.accumulators import ACCUMULATOR_IDENTITY, RangeSelect, SelectReduce, TensorScalarCumulative, TensorTensorScan
from ..memory.access_pattern import AccessPattern
from .semantics import _flat_rows, handles

_ACCUMULATE = {"add": np.add, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


def _accumulators(ex, ap: AccessPattern) -> np.ndarray:
    """The accumulator registers of the partitions ``ap`` covers (a view: writes update them)."""
    return ex.engine_state.vector_acc[ap.partition_start: ap.partition_start + ap.partition_count]


def _column(ex, operand, role: str, rows: int) -> np.ndarray:
    """An immediate or a [P, 1] tile as a (P,) fp32 column."""
    if isinstance(operand, AccessPattern):
        return ex.read_f32(operand, role).reshape(rows)
    return np.full(rows, operand, dtype=np.float32)


def _accumulate(acc: np.ndarray, cmd: str, op: str, values: np.ndarray | None, start=None) -> None:
    """Apply ``reduce_cmd`` to the accumulators ``acc`` with this instruction's row results."""
    if cmd == "idle":
        return
    if cmd in ("reset", "reset_reduce"):
        acc[...] = ACCUMULATOR_IDENTITY[op]
    elif cmd == "load_reduce":
        acc[...] = start
    if cmd != "reset" and values is not None:
        acc[...] = ops.ARITHMETIC_OPS[op](acc, values)


@handles(TensorScalarCumulative)
def _tensor_scalar_cumulative(ex, inst: TensorScalarCumulative):
    data = _flat_rows(ex.read_f32(inst.src, "src"))
    rows = data.shape[0]
    imm0 = _column(ex, inst.imm0, "imm0", rows)[:, None]
    values = np.asarray(ops.ARITHMETIC_OPS[inst.op0](imm0, data) if inst.reverse0 else ops.ARITHMETIC_OPS[inst.op0](data, imm0),
                        dtype=np.float32)
    acc = _accumulators(ex, inst.src)
    if inst.reduce_cmd == "reset_reduce":
        acc[...] = ACCUMULATOR_IDENTITY[inst.op1]
    elif inst.reduce_cmd == "load_reduce":
        acc[...] = _column(ex, inst.imm1, "imm1", rows)
    if inst.op1 in _ACCUMULATE:  # commutative: a running reduction, in fp32 and in element order
        out = _ACCUMULATE[inst.op1].accumulate(np.concatenate([acc[:, None], values], axis=1), axis=1, dtype=np.float32)[:, 1:]
    else:  # subtract: acc = x - acc, element after element
        out = np.empty_like(values)
        running = acc.astype(np.float32)
        for i in range(values.shape[1]):
            running = values[:, i] - running
            out[:, i] = running
    acc[...] = out[:, -1]
    ex.write(inst.dst, out)


@handles(TensorTensorScan)
def _tensor_tensor_scan(ex, inst: TensorTensorScan):
    d0 = _flat_rows(ex.read_f32(inst.data0, "data0"))
    d1 = _flat_rows(ex.read_f32(inst.data1, "data1"))
    op0, op1 = ops.ARITHMETIC_OPS[inst.op0], ops.ARITHMETIC_OPS[inst.op1]
    previous = _column(ex, inst.initial, "initial", d0.shape[0])
    out = np.empty_like(d0)
    for i in range(d0.shape[1]):
        first = op0(previous, d0[:, i]) if inst.reverse0 else op0(d0[:, i], previous)
        previous = np.asarray(op1(d1[:, i], first) if inst.reverse1 else op1(first, d1[:, i]), dtype=np.float32)
        out[:, i] = previous
    ex.write(inst.dst, out)


def _reduce_rows_into(ex, inst, values: np.ndarray) -> None:
    acc = _accumulators(ex, inst.dst)
    _accumulate(acc, inst.reduce_cmd, inst.reduce_op, np.max(values, axis=1) if values.shape[1] else None)
    if inst.reduce_res is not None:
        ex.write(inst.reduce_res, acc.reshape(-1, 1))


@handles(SelectReduce)
def _select_reduce(ex, inst: SelectReduce):
    pred = _flat_rows(ex.read(inst.predicate, "predicate")) != 0
    if inst.reverse_pred:
        pred = ~pred
    on_true = _flat_rows(ex.read_f32(inst.on_true, "on_true"))
    on_false = _column(ex, inst.on_false, "on_false", on_true.shape[0])[:, None]
    out = np.where(pred, on_true, on_false).astype(np.float32)
    ex.write(inst.dst, out)
    _reduce_rows_into(ex, inst, out)  # the engine reduces its fp32 results, before dst's rounding


@handles(RangeSelect)
def _range_select(ex, inst: RangeSelect):
    on_true = _flat_rows(ex.read_f32(inst.on_true, "on_true"))
    rows, cols = on_true.shape
    index = (np.float32(inst.range_start) + np.arange(cols, dtype=np.float32))[None, :]
    b0 = _column(ex, inst.bound0, "bound0", rows)[:, None]
    b1 = _column(ex, inst.bound1, "bound1", rows)[:, None]
    keep = (ops.ARITHMETIC_OPS[inst.comp_op0](index, b0) != 0) & (ops.ARITHMETIC_OPS[inst.comp_op1](index, b1) != 0)
    out = np.where(keep, on_true, np.float32(inst.on_false_value)).astype(np.float32)
    ex.write(inst.dst, out)
    # The reduction sees the fp32 results (a bf16 dst holds -inf for FP32_MIN; reduce_res keeps fp32).
    _reduce_rows_into(ex, inst, out)
