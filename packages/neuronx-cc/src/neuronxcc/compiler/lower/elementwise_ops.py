"""Instruction selection for one elementwise graph node on one tile.

Engines and forms, by op (numerics as neuron_sim.graph.ops: fp32 compute, rounding on write):

* ScalarE ``Activation`` for the unary ops in the activation table (exp, log, sqrt, rsqrt, tanh,
  sigmoid, sin, cos, atan, erf, relu, gelu, gelu_tanh, silu, softplus, reciprocal, square, sign and
  the *_dx derivatives);
* VectorE ``TensorScalar`` for abs and negate, and for every binary op whose other operand is one
  number (an immediate) or one number per partition (a ``[P, 1]`` column) - add/subtract/multiply
  may also go to ScalarE when it has less work queued;
* VectorE ``TensorTensor`` for binary, bitwise and compare ops on two tiles (bool results are
  written as 1/0 and stored as bool); bitwise ops on bool are the logical ALU ops;
* ``Select`` for select (``TensorCopy`` + ``CopyPredicated`` for 32-bit integers, whose values the
  fp32 datapath of Select would round);
* ``TensorCopy`` for convert (an engine write rounds as the graph's convert does), except
  integer-to-integer casts, which go through an SBUF->SBUF DMA (exact, as the graph's are);
* composites for what no engine has: floor/ceil/round (through the int32 write's round-to-even),
  trunc (x - fmod(x, 1)), tan (sin / cos), expm1 and log1p (accurate near 0), atan2.

An fp32 tensor_scalar read once by another elementwise node may be deferred and folded into that
node's instruction (``deferred.py``). copy and same-dtype converts cost nothing: the result is the operand's tile. Ops on immediates
only are folded at compile time with the graph's own numerics.
"""

from __future__ import annotations

import math

import numpy as np
from neuron_sim import dtypes
from neuron_sim.graph.ops import BITWISE, ELEMENTWISE_OPS, OPS
from neuron_sim.isa import (
    Activation,
    CopyPredicated,
    Memset,
    ScalarTensorTensor,
    Select,
    TensorCopy,
    TensorScalar,
    TensorTensor,
)

from ..emitter import Operand, is_exact_in_fp32, onchip_dtype
from ..errors import node_error
from ..sbuf import broadcast
from . import deferred

ACTIVATION_FUNCS = {
    "exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh", "sigmoid": "sigmoid", "sin": "sin",
    "cos": "cos", "atan": "arctan", "erf": "erf", "relu": "relu", "gelu": "gelu", "gelu_tanh": "gelu_apprx_tanh",
    "silu": "silu", "softplus": "softplus", "reciprocal": "reciprocal", "square": "square", "sign": "sign",
    "erf_dx": "erf_dx", "gelu_dx": "gelu_dx", "silu_dx": "silu_dx",
}
BINARY_ALU = {"add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide", "maximum": "maximum",
              "minimum": "minimum", "power": "power", "remainder": "mod", "fmod": "fmod"}
BITWISE_ALU = {"and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "shift_left": "left_shift",
               "shift_right": "right_shift"}
LOGICAL_ALU = {"and": "logical_and", "or": "logical_or", "xor": "logical_xor"}
COMPARE_ALU = {"EQ": "equal", "NE": "not_equal", "LT": "less", "LE": "less_equal", "GT": "greater", "GE": "greater_equal"}
SCALAR_ENGINE_OPS = ("add", "subtract", "multiply")
COMPOSITES = ("floor", "ceil", "round", "trunc", "tan", "expm1", "log1p", "atan2")
# fp32 temporaries a composite needs per tile (the SBUF budget counts them).
TEMPS = {"floor": 5, "ceil": 5, "round": 5, "trunc": 5, "tan": 2, "expm1": 4, "log1p": 5, "atan2": 5, "select": 0,
         "divide": 1}

# Ops whose lowering folds deferred operands (everything else writes them out first).
FOLDING_OPS = frozenset(ACTIVATION_FUNCS) | frozenset(BINARY_ALU) | {"negate", "compare"}
_TWO_23 = float(1 << 23)


def temps_needed(op: str) -> int:
    return TEMPS.get(op, 0)


def lower_node(tc, node, ins: list[Operand]) -> Operand:
    """Emit ``node`` for the current tile and return its result operand."""
    out_type = node.outputs[0].type
    dtype = onchip_dtype(out_type.dtype)
    op = node.op
    if all(i.is_imm for i in ins):
        return _fold(node, ins, dtype)
    if op not in FOLDING_OPS:  # only these take deferred operands (``deferred.py``)
        ins = [deferred.materialize(tc, i) for i in ins]
    if node.outputs[0].id in tc.integer_alu:
        return _integer_alu(tc, node, [deferred.materialize(tc, i) for i in ins], dtype)
    if op == "copy":
        return ins[0]
    if op == "convert":
        return _convert(tc, node, ins[0], dtype)
    if op in ACTIVATION_FUNCS:
        return _activation(tc, node, ins[0], ACTIVATION_FUNCS[op], dtype)
    if op == "abs":
        return _unary_alu(tc, node, ins[0], "abs", None, dtype)
    if op == "negate":
        return binary(tc, node, ins[0], Operand(ins[0].dtype, imm=-1.0), "multiply", dtype)
    if op == "divide" and dtypes.is_int(dtype):
        return _integer_divide(tc, node, ins, dtype)
    if op in BINARY_ALU:
        return binary(tc, node, ins[0], ins[1], BINARY_ALU[op], dtype)
    if op in BITWISE:
        return _bitwise(tc, node, ins, dtype)
    if op == "not":
        return _not(tc, node, ins[0], dtype)
    if op == "compare":
        return binary(tc, node, ins[0], ins[1], COMPARE_ALU[node.attrs["direction"]], dtype)
    if op == "select":
        return _select(tc, node, ins, dtype)
    if op in COMPOSITES:
        return _COMPOSITE[op](tc, node, ins, dtype)
    raise node_error(node, "compile.unsupported_op", f"no tile lowering for elementwise op {op!r}")


def _col_result(*ins: Operand) -> bool:
    return all(i.is_imm or i.is_col for i in ins)


def _fold(node, ins: list[Operand], dtype: str) -> Operand:
    arrays = [np.asarray(i.imm, dtype=np.float64 if dtypes.is_float(v.type.dtype) else None).astype(
        dtypes.to_numpy(v.type.dtype)) for i, v in zip(ins, node.inputs)]
    with np.errstate(all="ignore"):
        (result,) = OPS[node.op].evaluate(arrays, node.attrs, [v.type for v in node.outputs])
    value = np.asarray(result).reshape(-1)[0]
    if dtypes.is_float(node.outputs[0].type.dtype):
        return Operand(dtype, imm=float(value))
    return Operand(dtype, imm=int(value) if not isinstance(value, (bool, np.bool_)) else (1.0 if value else 0.0))


# --- single instructions ---------------------------------------------------------------------------


def _activation(tc, node, x: Operand, func: str, dtype: str, *, scale=1.0, bias=None, role=None) -> Operand:
    if x.pending is not None:  # x * scale + bias is the activation's own input stage
        folded = deferred.scale_bias(tc, x.pending.stages) if scale == 1.0 and bias is None else None
        if folded is None:
            x = deferred.materialize(tc, x)
        else:
            (scale, bias), x = folded, Operand(x.dtype, ap=x.pending.src)
    out = tc.result(role or node.outputs[0].id, dtype, col=x.is_col)
    src = x.col if x.is_col else x.ap
    tc.emit(Activation(dst=out.col if x.is_col else out.ap, src=src, func=func, scale=scale, bias=bias))
    return out


def _unary_alu(tc, node, x: Operand, op: str, operand, dtype: str, role=None) -> Operand:
    out = tc.result(role or node.outputs[0].id, dtype, col=x.is_col)
    engine = tc.em.pick("vector", "scalar") if op in SCALAR_ENGINE_OPS else "vector"
    tc.emit(TensorScalar(dst=out.col if x.is_col else out.ap, src=x.col if x.is_col else x.ap, op0=op, operand0=operand,
                         engine=engine))
    return out


def binary(tc, node, a: Operand, b: Operand, alu: str, dtype: str, role=None) -> Operand:
    """``a alu b`` in the cheapest form: tensor_scalar when one side is a number (per partition),
    folding a deferred operand's stages in (``deferred.py``); the result itself may stay deferred
    when the lowering allows it (``tc.deferrable``)."""
    col = _col_result(a, b)
    out = tc.result(role or node.outputs[0].id, dtype, col=col)
    dst = out.col if col else out.ap
    if not col and (a.pending is not None or b.pending is not None or node.outputs[0].id in tc.deferrable):
        return _binary_folded(tc, node, a, b, alu, dtype, out)
    if col:  # both per-partition: compute on [P, 1] columns
        if a.is_imm or b.is_imm:
            tensor, scalar, reverse = (b, a, True) if a.is_imm else (a, b, False)
            _tensor_scalar(tc, dst, tensor.col, alu, scalar.imm, reverse)
        else:
            tc.emit(TensorTensor(dst=dst, in0=a.col, in1=b.col, op=alu))
        return out
    if b.is_imm or b.is_col:
        _tensor_scalar(tc, dst, a.ap, alu, b.scalar, False)
    elif a.is_imm or a.is_col:
        _tensor_scalar(tc, dst, b.ap, alu, a.scalar, True)
    else:
        _tensor_tensor(tc, dst, a, b, alu)
    return out


def _tensor_tensor(tc, dst, a: Operand, b: Operand, alu: str) -> None:
    """``a alu b`` on two tiles; ``x * x`` may instead be ScalarE's ``square`` (one pass at ScalarE's
    rate instead of VectorE/GpSimd's two-input rate; bit-identical in fp32) when ScalarE would
    finish it first."""
    tt = TensorTensor(dst=dst, in0=a.ap, in1=b.ap, op=alu)
    if alu == "multiply" and a.ap == b.ap and dtypes.is_float(a.dtype) and dtypes.is_float(dst.dtype):
        act = Activation(dst=dst, src=a.ap, func="square")
        if tc.em.best_engine(act)[1] < tc.em.best_engine(tt)[1]:
            tc.emit(act)
            return
    tc.emit(tt)


def _binary_folded(tc, node, a: Operand, b: Operand, alu: str, dtype: str, out: Operand) -> Operand:
    if b.is_imm or b.is_col or a.is_imm or a.is_col:
        tensor, scalar, reverse = (a, b, False) if (b.is_imm or b.is_col) else (b, a, True)
        stages = deferred.stages_of(tensor)
        if len(stages) >= deferred.MAX_STAGES:
            tensor, stages = deferred.materialize(tc, tensor), ()
        stages = stages + ((alu, scalar.scalar, reverse),)
        result = Operand(dtype, ap=out.ap, pending=deferred.Pending(deferred.source(tensor), stages))
        if node.outputs[0].id in tc.deferrable and dtype == "float32":
            return result
        return deferred.materialize(tc, result)
    # Two tiles: a deferred side with one stage becomes scalar_tensor_tensor's first stage.
    first, other, reverse1 = (a, b, False) if len(deferred.stages_of(a)) == 1 else (b, a, True)
    if len(deferred.stages_of(first)) == 1:
        other = deferred.materialize(tc, other)
        (op0, operand0, reverse0), = first.pending.stages
        tc.emit(ScalarTensorTensor(dst=out.ap, src=first.pending.src, op0=op0, operand0=operand0, reverse0=reverse0,
                                   op1=alu, in1=other.ap, reverse1=reverse1))
        return out
    a, b = deferred.materialize(tc, a), deferred.materialize(tc, b)
    _tensor_tensor(tc, out.ap, a, b, alu)
    return out


def _tensor_scalar(tc, dst, src, alu, operand, reverse) -> None:
    # ScalarE takes add/multiply with an immediate or a [P, 1] tile operand (the per-partition scale
    # and bias of its activation datapath): row-wise groups' "x - mean", "x * rstd" balance there.
    engine = tc.em.pick("vector", "scalar") if alu in SCALAR_ENGINE_OPS else "vector"
    tc.emit(TensorScalar(dst=dst, src=src, op0=alu, operand0=operand, reverse0=reverse, engine=engine))


def _is_tile(operand) -> bool:
    return not isinstance(operand, (int, float))


def _bitwise(tc, node, ins, dtype) -> Operand:
    a, b = ins
    types = [v.type.dtype for v in node.inputs]
    if all(t == "bool" for t in types) and node.op in LOGICAL_ALU:
        return binary(tc, node, a, b, LOGICAL_ALU[node.op], dtype)
    if not all(dtypes.is_int(onchip_dtype(t)) for t in types) or len({onchip_dtype(t) for t in types} | {dtype}) != 1:
        raise node_error(node, "compile.bitwise_dtype",
                         f"bitwise {node.op} is lowered for integer operands and result of one dtype (or and/or/xor on bool), "
                         f"got {types} -> {node.outputs[0].type.dtype}")
    return binary(tc, node, a, b, BITWISE_ALU[node.op], dtype)


def _not(tc, node, x: Operand, dtype: str) -> Operand:
    src_type = node.inputs[0].type.dtype
    if src_type == "bool" or dtype == "bool":
        return binary(tc, node, x, Operand(x.dtype, imm=0.0), "equal", dtype)
    if not dtypes.is_int(dtype):
        raise node_error(node, "compile.not_dtype", f"not is bitwise for integers and logical for bool, got {src_type}")
    return binary(tc, node, x, Operand(x.dtype, imm=-1), "bitwise_xor", dtype)


def _convert(tc, node, x: Operand, dtype: str) -> Operand:
    src = x.dtype
    if src == dtype:
        return x  # int64 <-> int32 on chip, or a no-op convert: same bits
    if dtypes.is_int(src) and dtypes.is_int(dtype):
        # Engines read integers as fp32 (values above 2**24 would round); a DMA casts exactly.
        out = tc.result(node.outputs[0].id, dtype, col=x.is_col)
        tc.em.copy_onchip(out.col if x.is_col else out.ap, x.col if x.is_col else x.ap)
        return out
    out = tc.result(node.outputs[0].id, dtype, col=x.is_col)
    tc.emit(TensorCopy(dst=out.col if x.is_col else out.ap, src=x.col if x.is_col else x.ap,
                       engine=tc.em.pick("vector", "scalar")))
    return out


def _select(tc, node, ins, dtype) -> Operand:
    pred, on_true, on_false = ins
    col = _col_result(pred, on_true, on_false)
    out = tc.result(node.outputs[0].id, dtype, col=col)
    dst = out.col if col else out.ap

    def ap(op: Operand):
        return tc.colap(op) if col else tc.full(op)

    if is_exact_in_fp32(dtype) and all(is_exact_in_fp32(o.dtype) for o in (on_true, on_false)):
        false_operand = float(on_false.imm) if on_false.is_imm else ap(on_false)
        tc.emit(Select(dst=dst, predicate=ap(pred), on_true=ap(on_true), on_false=false_operand))
        return out
    # 32-bit integers: start from on_false, then copy on_true where the predicate holds (bit-exact).
    if on_false.is_imm:
        tc.emit(Memset(dst=dst, value=int(on_false.imm), engine=tc.em.pick("vector", "gpsimd")))
    elif on_false.dtype == dtype:
        tc.emit(TensorCopy(dst=dst, src=ap(on_false), engine="vector"))
    else:
        tc.em.copy_onchip(dst, ap(on_false))
    src = ap(on_true)
    if on_true.dtype != dtype and dtypes.is_int(on_true.dtype):
        tmp = tc.result((node.outputs[0].id, "on_true"), dtype, col=col)
        tc.em.copy_onchip(tmp.col if col else tmp.ap, src)
        src = tmp.col if col else tmp.ap
    tc.emit(CopyPredicated(dst=dst, src=src, predicate=ap(pred)))
    return out


# --- GpSimd's integer ALU -----------------------------------------------------------------------------


def _integer_alu(tc, node, ins, dtype) -> Operand:
    """``node`` on int32 (or uint32) tiles of any range, on GpSimd's integer ALU (exact, wrapping
    as the graph's integers do): tensor_tensor only (immediates become constant columns);
    compares write 1/0 in the integer type, then cast to bool (exact for 0 and 1)."""
    word = onchip_dtype(node.inputs[0].type.dtype)
    col = _col_result(*ins)

    def tile(op: Operand):
        return tc.colap(op) if col else tc.full(op)

    def tt(dst, a, b, alu):
        tc.emit(TensorTensor(dst=dst, in0=a, in1=b, op=alu, engine="gpsimd"))

    x = tile(ins[0])
    zero = tc.colap(Operand(word, imm=0))
    zero = zero if col else broadcast(zero, tc.counts)
    op = node.op
    target = tc.result(node.outputs[0].id, dtype, col=col) if dtype == word else None
    out = target if target is not None else tc.temp(0, word, col)
    dst = _ap(out)
    if op == "compare":
        tt(dst, x, tile(ins[1]), COMPARE_ALU[node.attrs["direction"]])
    elif op in INTEGER_ALU_BINARY:
        tt(dst, x, tile(ins[1]), INTEGER_ALU_BINARY[op])
    elif op == "negate":
        tt(dst, zero, x, "subtract")
    elif op == "abs":  # max(x, 0 - x): |INT_MIN| wraps to INT_MIN, as the graph's int32 does
        tt(dst, zero, x, "subtract")
        tt(dst, x, dst, "maximum")
    elif op == "square":
        tt(dst, x, x, "multiply")
    elif op == "relu":
        tt(dst, x, zero, "maximum")
    elif op == "sign":  # (x > 0) - (x < 0)
        below = _ap(tc.temp(1, word, col))
        tt(dst, x, zero, "greater")
        tt(below, x, zero, "less")
        tt(dst, dst, below, "subtract")
    else:
        raise node_error(node, "compile.internal", f"no integer-ALU lowering for {op}")
    if target is not None:
        return out
    result = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(TensorCopy(dst=_ap(result), src=dst, engine="vector"))  # 1/0 -> bool
    return result


INTEGER_ALU_BINARY = {"add": "add", "subtract": "subtract", "multiply": "multiply", "maximum": "maximum",
                      "minimum": "minimum"}
# The graph ops ``_integer_alu`` computes (the integer check sends only these to it).
INTEGER_ALU_OPS = frozenset({*INTEGER_ALU_BINARY, "compare", "negate", "abs", "square", "relu", "sign"})


# --- composites --------------------------------------------------------------------------------------


def _ap(op: Operand):
    return op.col if op.is_col else op.ap


def _round_parts(tc, x: Operand):
    """(r, small): r = x rounded half-to-even to an integer (valid where small), small = |x| < 2**23."""
    col = x.is_col
    as_int = tc.temp(0, "int32", col)
    r = tc.temp(1, "float32", col)
    small = tc.temp(2, "float32", col)
    tc.emit(TensorCopy(dst=_ap(as_int), src=_ap(x), engine="vector"))  # the int32 write rounds to nearest even
    tc.emit(TensorCopy(dst=_ap(r), src=_ap(as_int), engine=tc.em.pick("scalar", "vector")))
    # |x| < 2**23: the only values that are not integers already (NaN and inf compare false: kept as x).
    tc.emit(TensorScalar(dst=_ap(small), src=_ap(x), op0="abs", op1="less", operand1=_TWO_23, engine="vector"))
    return r, small


def _bits(ap):
    """A 4-byte float tile's bits, as int32 (bitvec ops work on them)."""
    return ap.__class__(ap.memory, "int32", ap.partition_start, ap.partition_count, ap.free, ap.offset)


def _sign_of(tc, r: Operand, x: Operand) -> None:
    """Give the integer-valued fp32 ``r`` (floor, ceil, round or trunc of ``x``: zero, or of ``x``'s
    sign) the sign bit of ``x``, so a zero result is -0.0 where ``x`` is negative, as numpy's and
    CPU's are: ``r |= x & 0x80000000`` on the bits (VectorE bitvec ops)."""
    src = x
    if x.dtype != "float32":  # half precision: its fp32 value has the same sign
        src = tc.temp(4, "float32", x.is_col)
        tc.emit(TensorCopy(dst=_ap(src), src=_ap(x), engine="vector"))
    tc.emit(ScalarTensorTensor(dst=_bits(_ap(r)), src=_bits(_ap(src)), op0="bitwise_and", operand0=-(1 << 31),
                               op1="bitwise_or", in1=_bits(_ap(r))))


def _round(tc, node, ins, dtype) -> Operand:
    (x,) = ins
    r, small = _round_parts(tc, x)
    _sign_of(tc, r, x)
    out = tc.result(node.outputs[0].id, dtype, col=x.is_col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(small), on_true=_ap(r), on_false=_ap(x)))
    return out


def _floor_ceil(tc, node, ins, dtype, up: bool) -> Operand:
    (x,) = ins
    r, small = _round_parts(tc, x)
    adjust = tc.temp(3, "float32", x.is_col)
    # floor = r - (r > x); ceil = r + (r < x): exact on integers.
    tc.emit(TensorTensor(dst=_ap(adjust), in0=_ap(r), in1=_ap(x), op="less" if up else "greater"))
    tc.emit(TensorTensor(dst=_ap(r), in0=_ap(r), in1=_ap(adjust), op="add" if up else "subtract"))
    _sign_of(tc, r, x)
    out = tc.result(node.outputs[0].id, dtype, col=x.is_col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(small), on_true=_ap(r), on_false=_ap(x)))
    return out


def _trunc(tc, node, ins, dtype) -> Operand:
    (x,) = ins
    col = x.is_col
    t = tc.temp(0, "float32", col)
    small = tc.temp(1, "float32", col)
    # fmod(x, 1) is exact and so is x - fmod(x, 1) (an integer no larger than |x|).
    tc.emit(ScalarTensorTensor(dst=_ap(t), src=_ap(x), op0="fmod", operand0=1.0, op1="subtract", in1=_ap(x), reverse1=True))
    _sign_of(tc, t, x)
    tc.emit(TensorScalar(dst=_ap(small), src=_ap(x), op0="abs", op1="less", operand1=_TWO_23, engine="vector"))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(small), on_true=_ap(t), on_false=_ap(x)))
    return out


def _integer_divide(tc, node, ins, dtype) -> Operand:
    """Integer division rounds toward zero (the graph's definition): the fp32 quotient, truncated
    as ``q - fmod(q, 1)``. Exact for operands below 2**24 in magnitude (the integer check admits no
    others): the quotient's rounding error is below 1/|b|, its distance to the next integer."""
    a, b = ins
    col = _col_result(a, b)
    q = deferred.materialize(tc, binary(tc, node, a, b, "divide", "float32", role=("temp", 0)))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(ScalarTensorTensor(dst=_ap(out), src=_ap(q), op0="fmod", operand0=1.0, op1="subtract", in1=_ap(q),
                               reverse1=True))
    return out


def _tan(tc, node, ins, dtype) -> Operand:
    (x,) = ins
    col = x.is_col
    s, c = tc.temp(0, "float32", col), tc.temp(1, "float32", col)
    tc.emit(Activation(dst=_ap(s), src=_ap(x), func="sin"))
    tc.emit(Activation(dst=_ap(c), src=_ap(x), func="cos"))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(TensorTensor(dst=_ap(out), in0=_ap(s), in1=_ap(c), op="divide"))
    return out


def _expm1(tc, node, ins, dtype) -> Operand:
    """exp(x) - 1, and 2 t / (1 - t) with t = tanh(x / 2) where |x| < 0.5 (no cancellation)."""
    (x,) = ins
    col = x.is_col
    big, t, d, sel = (tc.temp(i, "float32", col) for i in range(4))
    tc.emit(Activation(dst=_ap(big), src=_ap(x), func="exp"))
    tc.emit(TensorScalar(dst=_ap(big), src=_ap(big), op0="subtract", operand0=1.0, engine=tc.em.pick("vector", "scalar")))
    tc.emit(Activation(dst=_ap(t), src=_ap(x), func="tanh", scale=0.5))
    tc.emit(TensorScalar(dst=_ap(d), src=_ap(t), op0="multiply", operand0=-1.0, op1="add", operand1=1.0, engine="vector"))
    tc.emit(ScalarTensorTensor(dst=_ap(t), src=_ap(t), op0="multiply", operand0=2.0, op1="divide", in1=_ap(d)))
    tc.emit(TensorScalar(dst=_ap(sel), src=_ap(x), op0="abs", op1="less", operand1=0.5, engine="vector"))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(sel), on_true=_ap(t), on_false=_ap(big)))
    return out


def _log1p(tc, node, ins, dtype) -> Operand:
    """log(u) * x / (u - 1) with u = 1 + x rounded (Goldberg), and x itself where u == 1."""
    (x,) = ins
    col = x.is_col
    u, lg, d, ratio, zero = (tc.temp(i, "float32", col) for i in range(5))
    tc.emit(TensorScalar(dst=_ap(u), src=_ap(x), op0="add", operand0=1.0, engine=tc.em.pick("vector", "scalar")))
    tc.emit(Activation(dst=_ap(lg), src=_ap(u), func="log"))
    tc.emit(TensorScalar(dst=_ap(d), src=_ap(u), op0="subtract", operand0=1.0, engine=tc.em.pick("vector", "scalar")))
    tc.emit(TensorTensor(dst=_ap(ratio), in0=_ap(x), in1=_ap(d), op="divide"))
    tc.emit(TensorTensor(dst=_ap(lg), in0=_ap(lg), in1=_ap(ratio), op="multiply"))
    tc.emit(TensorScalar(dst=_ap(zero), src=_ap(d), op0="equal", operand0=0.0, engine="vector"))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(zero), on_true=_ap(x), on_false=_ap(lg)))
    return out


def _atan2(tc, node, ins, dtype) -> Operand:
    """arctan(y / x), plus pi (sign of y) where x < 0; 0 where y / x is NaN (both zero)."""
    y, x = ins
    col = _col_result(y, x)

    def ap(op):
        return tc.colap(op) if col else tc.full(op)

    q, a, neg, corr, ok = (tc.temp(i, "float32", col) for i in range(5))
    tc.emit(TensorTensor(dst=_ap(q), in0=ap(y), in1=ap(x), op="divide"))
    tc.emit(Activation(dst=_ap(a), src=_ap(q), func="arctan"))
    tc.emit(TensorScalar(dst=_ap(neg), src=ap(x), op0="less", operand0=0.0, engine="vector"))
    # corr = ((y >= 0) * 2pi - pi) * (x < 0)
    tc.emit(TensorScalar(dst=_ap(corr), src=ap(y), op0="greater_equal", operand0=0.0, op1="multiply",
                         operand1=2 * math.pi, engine="vector"))
    tc.emit(ScalarTensorTensor(dst=_ap(corr), src=_ap(corr), op0="subtract", operand0=math.pi, op1="multiply", in1=_ap(neg)))
    tc.emit(TensorTensor(dst=_ap(a), in0=_ap(a), in1=_ap(corr), op="add"))
    tc.emit(TensorTensor(dst=_ap(ok), in0=_ap(q), in1=_ap(q), op="equal"))
    out = tc.result(node.outputs[0].id, dtype, col=col)
    tc.emit(Select(dst=_ap(out), predicate=_ap(ok), on_true=_ap(a), on_false=0.0))
    return out


_COMPOSITE = {
    "floor": lambda tc, n, i, d: _floor_ceil(tc, n, i, d, up=False),
    "ceil": lambda tc, n, i, d: _floor_ceil(tc, n, i, d, up=True),
    "round": _round, "trunc": _trunc, "tan": _tan, "expm1": _expm1, "log1p": _log1p, "atan2": _atan2,
}

# Every op the graph defines as elementwise has a lowering here.
_MISSING = sorted(ELEMENTWISE_OPS - set(ACTIVATION_FUNCS) - set(BINARY_ALU) - set(BITWISE) - set(_COMPOSITE)
                  - {"copy", "convert", "abs", "negate", "not", "compare", "select"})
assert not _MISSING, f"elementwise ops without a lowering: {_MISSING}"
