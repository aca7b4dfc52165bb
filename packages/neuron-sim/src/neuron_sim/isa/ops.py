"""ALU operations and the ScalarE activation function table.

Arithmetic ops cast their inputs to fp32 (as the engines do); bitvec ops work on the integer bits
and need integer operands. Each entry maps an op name (nki.language naming) to its numpy form.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ValidationError
from .erf import erf as _erf


def _predicates(result_dtype) -> dict:
    """Comparisons and logical ops: 1 where true and 0 where false, as ``result_dtype``."""
    def flag(test):
        return lambda a, b: test(a, b).astype(result_dtype)

    def logical(test):
        return lambda a, b: test(np.not_equal(a, 0), np.not_equal(b, 0)).astype(result_dtype)

    return {"equal": flag(np.equal), "not_equal": flag(np.not_equal), "greater": flag(np.greater),
            "greater_equal": flag(np.greater_equal), "less": flag(np.less), "less_equal": flag(np.less_equal),
            "logical_and": logical(np.logical_and), "logical_or": logical(np.logical_or),
            "logical_xor": logical(np.logical_xor)}


ARITHMETIC_OPS = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
    "power": np.power,
    "mod": np.mod,
    "fmod": np.fmod,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    **_predicates(np.float32),
    "bypass": lambda a, b: a,
}

BITVEC_OPS = {
    "bitwise_and": np.bitwise_and,
    "bitwise_or": np.bitwise_or,
    "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift,
    "right_shift": np.right_shift,
}

# Reductions allowed by tensor_reduce / partition reduce: op -> (numpy reduction, identity).
REDUCE_OPS = {
    "add": (np.add.reduce, 0.0),
    "subtract": (None, 0.0),  # a0 - a1 - a2 ...: handled by the executor
    "multiply": (np.multiply.reduce, 1.0),
    "maximum": (np.maximum.reduce, -np.inf),
    "minimum": (np.minimum.reduce, np.inf),
    "logical_and": (np.logical_and.reduce, 1.0),
    "logical_or": (np.logical_or.reduce, 0.0),
    "logical_xor": (np.logical_xor.reduce, 0.0),
    "bitwise_and": (np.bitwise_and.reduce, -1),
    "bitwise_or": (np.bitwise_or.reduce, 0),
    "bitwise_xor": (np.bitwise_xor.reduce, 0),
}

ALL_BINARY_OPS = {**ARITHMETIC_OPS, **BITVEC_OPS}

# GpSimd's integer ALU: a tensor_tensor on GpSimd whose tiles are all int32 (or all uint32) computes
# in native 32-bit integer arithmetic - exact for every 32-bit value, wrapping on overflow - instead
# of through fp32 (nki.isa.tensor_tensor, "int32/uint32 types", NKI 0.6: "uses native integer
# arithmetic. This ensures exact results for all 32-bit integer values"). Operands are taken as
# int64 here and the result wrapped to the tile's dtype. Division, modulo and power have no
# published integer semantics and are not modelled in this mode.
INTEGER_MODE_DTYPES = ("int32", "uint32")
INTEGER_ALU_OPS = {
    **{op: ARITHMETIC_OPS[op] for op in ("add", "subtract", "multiply", "maximum", "minimum", "abs_max", "abs_min")},
    **_predicates(np.int64),
    "bypass": ARITHMETIC_OPS["bypass"],
}


def integer_mode(engine: str, *aps) -> bool:
    """Whether an instruction on ``engine`` over these tiles runs on GpSimd's integer ALU."""
    return engine == "gpsimd" and len({ap.dtype for ap in aps}) == 1 and aps[0].dtype in INTEGER_MODE_DTYPES

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / np.float32(math.sqrt(2.0))))


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.float32(_SQRT_2_OVER_PI) * (x + np.float32(0.044715) * x * x * x)))


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return (1.0 / (1.0 + np.exp(-x))).astype(np.float32)


def _softplus(x):
    with np.errstate(over="ignore"):
        return np.logaddexp(np.float32(0.0), x).astype(np.float32)


def _mish(x):
    return x * np.tanh(_softplus(x))


def _gelu_sigmoid(x):
    return x * _sigmoid(np.float32(1.702) * x)


def _gelu_dx(x):
    # d/dx [x * Phi(x)] = Phi(x) + x * phi(x)
    return 0.5 * (1.0 + _erf(x / np.float32(math.sqrt(2.0)))) + x * np.exp(-0.5 * x * x) / np.float32(math.sqrt(2.0 * math.pi))


def _gelu_sigmoid_dx(x):
    s = _sigmoid(np.float32(1.702) * x)
    return s + np.float32(1.702) * x * s * (1.0 - s)


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _erf_dx(x):
    return np.float32(2.0 / math.sqrt(math.pi)) * np.exp(-x * x)


# Activation functions (ScalarE): name -> fp32 numpy function of one argument.
ACTIVATIONS = {
    "copy": lambda x: x,
    "identity": lambda x: x,
    "exp": np.exp,
    "log": np.log,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "tanh": np.tanh,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
    "gelu": _gelu,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": _gelu_sigmoid,
    "gelu_dx": _gelu_dx,
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "silu_dx": _silu_dx,
    "erf_dx": _erf_dx,
    "silu": lambda x: x * _sigmoid(x),
    "softplus": _softplus,
    "mish": _mish,
    "erf": _erf,
    "sin": np.sin,
    "cos": np.cos,
    "arctan": np.arctan,
    "square": np.square,
    "abs": np.abs,
    "sign": np.sign,
    "negative": np.negative,
}

# Unary ALU ops usable as tensor_scalar ops with no operand.
UNARY_ALU_OPS = {
    "abs": np.abs,
    "square": np.square,
    "relu": lambda x: np.maximum(x, np.float32(0.0)),
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
}

COMPARISON_OPS = ("equal", "not_equal", "greater", "greater_equal", "less", "less_equal")


def check_op(op: str, table: dict, kind: str) -> None:
    if op not in table:
        raise ValidationError("op.unknown", f"unknown {kind} op {op!r}; supported: {sorted(table)}")
