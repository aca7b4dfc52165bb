"""Graph-level operations: shape rules and whole-tensor semantics with the engines' numerics.

Floats compute as the NeuronCore does - in fp32, with fp32 accumulation for reductions and
matmuls - and round to the output dtype on write (``dtypes.convert``: RNE). Integers are exact:
data movement moves values; compares, min/max, sums, cumsum, argmin/argmax, argsort, abs/negate, add,
subtract and multiply compute the mathematical result wrapped to the result dtype (two's
complement, as PyTorch and the GpSimd integer ALU do); integer division truncates and ``fmod``
takes the dividend's sign (StableHLO's ``divide``/``remainder``); integer-to-integer converts wrap.
``dot_general`` of integers is exact and wrapped too (TensorE multiplies in fp32, so a compiler
puts it there only where fp32 is exact); ops with a float operand or result compute integers in
fp32. A compiler lowers an integer op only where the engines give these exact results
(neuronxcc's integer check) and refuses it otherwise. The fast executor uses these definitions;
compiled ISA programs must agree with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..errors import IndexOutOfBoundsError, ValidationError
from ..isa import ops as alu
from ..isa import philox
from .matmul import matmul
from .tensor_type import TensorType

# Op facts: what compilers, executors and frameworks may assume about an op without knowing it
# by name. Each op's facts are given once, where it is registered below, and read from here
# (``has``, ``ops_with``, or the sets after the registry) - never copied into another table.
FACTS = {
    "elementwise": "element k of the result is computed from element k of each operand, all of the "
                   "result's shape (broadcasts are explicit broadcast_in_dim nodes)",
    "view": "the result re-indexes the operand's elements (no arithmetic): a strided view of it",
    "leaf": "the result is made from no operand (a constant or an iota)",
    "moves_data": "every result element is an operand element or a constant, unchanged (views, copies, "
                  "concatenation, padding, selection, gathers)",
    "correctly_rounded": "each element's result is the correctly rounded (or exact) fp32 value: an element "
                         "computed alone has the bits it has inside a whole array",
    "exact_on_integers": "on integer operands (and an integer result) the result is the exact integer one, "
                         "wrapped to the result dtype, not computed through fp32",
    "indexed_writes": "the result's elements are written where an index operand says (scatters)",
}


@dataclass(frozen=True)
class OpSpec:
    infer: Callable[[list[TensorType], dict], list[TensorType]]
    evaluate: Callable[[list[np.ndarray], dict, list[TensorType]], list[np.ndarray]]
    arity: int | None  # None: variadic
    facts: frozenset[str] = frozenset()  # keys of FACTS


OPS: dict[str, OpSpec] = {}


def _op(name: str, arity: int | None, *facts: str):
    unknown = set(facts) - set(FACTS)
    if unknown:
        raise ValueError(f"graph op {name!r}: unknown op facts {sorted(unknown)}; the facts are {sorted(FACTS)}")

    def register(pair):
        infer, evaluate = pair
        OPS[name] = OpSpec(infer, evaluate, arity, frozenset(facts))
        return pair

    return register


def has(op: str, fact: str) -> bool:
    """Whether graph op ``op`` has ``fact`` (a key of FACTS); False for an unknown op."""
    spec = OPS.get(op)
    return spec is not None and fact in spec.facts


def ops_with(fact: str) -> frozenset[str]:
    """The registered graph ops that have ``fact``."""
    if fact not in FACTS:
        raise ValueError(f"unknown op fact {fact!r}; the facts are {sorted(FACTS)}")
    return frozenset(name for name, spec in OPS.items() if fact in spec.facts)


def infer(op: str, types: list[TensorType], attrs: dict) -> list[TensorType]:
    spec = OPS.get(op)
    if spec is None:
        raise ValidationError("graph.unknown_op", f"unknown graph op {op!r}")
    if spec.arity is not None and len(types) != spec.arity:
        raise ValidationError("graph.arity", f"{op} takes {spec.arity} operand(s), got {len(types)}")
    return spec.infer(types, attrs)


def f32(a: np.ndarray) -> np.ndarray:
    """The engines' view of stored values: fp32 (integers too, as the ALUs compute)."""
    return a if a.dtype == np.float32 else a.astype(np.float32)


def is_integer(a: np.ndarray) -> bool:
    """Integer or bool data: computed exactly (see the module docstring)."""
    return a.dtype.kind in "iub"


def wrap(values: np.ndarray, dtype: str) -> np.ndarray:
    """Exact integer ``values`` as ``dtype``: two's-complement wrap for integers, nonzero for bool,
    the engines' rounding for floats."""
    name = dtypes.dtype_name(dtype)
    if name == "bool":
        return values != 0
    if dtypes.is_int(name):
        return values.astype(dtypes.to_numpy(name), copy=False)
    return dtypes.convert(values, name)


def _same(types, attrs):
    return [types[0]]


def _fail(rule: str, message: str):
    raise ValidationError(rule, message)


# --- elementwise ------------------------------------------------------------------------------

UNARY = {
    "abs": np.abs, "negate": np.negative, "exp": np.exp, "log": np.log, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "tanh": np.tanh, "sigmoid": alu.ACTIVATIONS["sigmoid"], "sin": np.sin,
    "cos": np.cos, "tan": np.tan, "atan": np.arctan, "erf": alu.ACTIVATIONS["erf"], "floor": np.floor, "ceil": np.ceil,
    "round": np.rint, "trunc": np.trunc, "sign": np.sign, "expm1": np.expm1, "log1p": np.log1p, "reciprocal": lambda x: 1.0 / x,
    "relu": alu.ACTIVATIONS["relu"], "gelu": alu.ACTIVATIONS["gelu"], "gelu_tanh": alu.ACTIVATIONS["gelu_apprx_tanh"],
    "silu": alu.ACTIVATIONS["silu"], "softplus": alu.ACTIVATIONS["softplus"], "square": np.square, "copy": lambda x: x,
    "erf_dx": alu.ACTIVATIONS["erf_dx"], "gelu_dx": alu.ACTIVATIONS["gelu_dx"], "silu_dx": alu.ACTIVATIONS["silu_dx"],
}
BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "power": np.power, "remainder": np.mod, "fmod": np.fmod, "atan2": np.arctan2,
}
BITWISE = {"and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
           "shift_left": np.left_shift, "shift_right": np.right_shift}
COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal, "GT": np.greater, "GE": np.greater_equal}


# Correctly rounded (or exact) functions: one element computed alone has the bits it has inside
# a whole array, whichever numpy loop computes it.
CORRECTLY_ROUNDED_UNARY = frozenset({"abs", "negate", "sqrt", "rsqrt", "reciprocal", "floor", "ceil", "round", "trunc",
                                     "sign", "square", "copy", "relu"})


def _identity(x):
    return x


# Unary ops with an exact integer form (integer operand and result).
INTEGER_UNARY = {
    "abs": np.abs, "negate": np.negative, "sign": np.sign, "square": np.square, "copy": _identity,
    "relu": lambda x: np.maximum(x, 0), "floor": _identity, "ceil": _identity, "round": _identity, "trunc": _identity,
}


def unary_evaluator(name, fn=None):
    """The evaluate function of unary op ``name``, computing with ``fn`` (default ``UNARY[name]``;
    an executor may pass a host-speed form of the same function, elementwise with the same bits)."""
    fn = UNARY[name] if fn is None else fn
    once = name in CORRECTLY_ROUNDED_UNARY
    exact = INTEGER_UNARY.get(name)

    def evaluate(arrays, attrs, out_types):
        a = arrays[0]
        with np.errstate(all="ignore"):
            if exact is not None and is_integer(a) and not dtypes.is_float(out_types[0].dtype):
                return [wrap(exact(a.astype(np.int64)), out_types[0].dtype)]
            if once and a.size > 1 and _uniform(a):  # GELU's rsqrt(2) broadcast over the tensor: one rsqrt
                one = f32(a[(slice(0, 1),) * a.ndim])
                value = dtypes.convert(np.asarray(fn(one), dtype=np.float32), out_types[0].dtype)
                return [np.broadcast_to(value, a.shape)]
            return [dtypes.convert(np.asarray(fn(f32(a)), dtype=np.float32), out_types[0].dtype)]

    return evaluate


def _unary_facts(name: str) -> tuple[str, ...]:
    return ("elementwise", *(("correctly_rounded",) if name in CORRECTLY_ROUNDED_UNARY else ()),
            *(("exact_on_integers",) if name in INTEGER_UNARY else ()), *(("moves_data",) if name == "copy" else ()))


for _name in UNARY:
    _op(_name, 1, *_unary_facts(_name))((_same, unary_evaluator(_name)))


def _check_same_shapes(op, types):
    if len({t.shape for t in types}) != 1:
        _fail("graph.shape", f"{op} needs operands of one shape (broadcast_in_dim first), got {[str(t) for t in types]}")


def _binary_infer(op):
    def infer_(types, attrs):
        _check_same_shapes(op, types)
        return [TensorType(types[0].shape, attrs.get("dtype", types[0].dtype))]

    return infer_


def _truncating_divide(a, b):
    """Integer division rounding toward zero (StableHLO ``divide`` on integers); x / 0 is 0."""
    q = np.floor_divide(a, b)
    return q + ((np.remainder(a, b) != 0) & ((a < 0) != (b < 0)))


def _integer_power(a, b):
    """``a ** b`` as PyTorch computes integer tensors: a negative exponent gives 1 / a**|b| rounded
    toward zero - 1 for a == 1, +-1 for a == -1, else 0 (a number as exponent it refuses)."""
    positive = np.power(a, np.maximum(b, 0))
    reciprocal = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(b < 0, reciprocal, positive)


# Binary ops with an exact integer form (integer operands and result), computed in int64.
INTEGER_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum,
    "divide": _truncating_divide, "remainder": np.mod, "fmod": np.fmod, "power": _integer_power,
}


def _binary_eval(name, fn, bitwise=False):
    exact = INTEGER_BINARY.get(name)

    def evaluate(arrays, attrs, out_types):
        a, b = arrays
        with np.errstate(all="ignore"):
            if bitwise:
                return [wrap(fn(a.astype(np.int64), b.astype(np.int64)), out_types[0].dtype)]
            if exact is not None and is_integer(a) and is_integer(b) and not dtypes.is_float(out_types[0].dtype):
                return [wrap(exact(a.astype(np.int64), b.astype(np.int64)), out_types[0].dtype)]
            return [dtypes.convert(np.asarray(fn(f32(a), f32(b)), dtype=np.float32), out_types[0].dtype)]

    return evaluate


for _name, _fn in BINARY.items():
    _op(_name, 2, "elementwise", *(("exact_on_integers",) if _name in INTEGER_BINARY else ()))(
        (_binary_infer(_name), _binary_eval(_name, _fn)))
for _name, _fn in BITWISE.items():
    _op(_name, 2, "elementwise")((_binary_infer(_name), _binary_eval(_name, _fn, bitwise=True)))


def _not_eval(arrays, attrs, out_types):
    a = arrays[0]
    if a.dtype == np.bool_ or out_types[0].dtype == "bool":
        return [a == 0]
    return [np.invert(a)]


_op("not", 1, "elementwise")((_same, _not_eval))


def _compare_infer(types, attrs):
    _check_same_shapes("compare", types)
    if attrs.get("direction") not in COMPARE:
        _fail("graph.attr", f"compare direction must be one of {sorted(COMPARE)}, got {attrs.get('direction')!r}")
    return [TensorType(types[0].shape, "bool")]


def _uniform(a: np.ndarray) -> bool:
    """Whether ``a`` is one element broadcast (every stride 0): a 0-d input reaching an
    elementwise op, such as a runtime scalar."""
    return not any(a.strides)


def _compare_eval(arrays, attrs, out_types):
    a, b = arrays
    compare = COMPARE[attrs["direction"]]
    view = _identity if is_integer(a) and is_integer(b) else f32  # integers compare exactly
    with np.errstate(invalid="ignore"):
        if _uniform(a) and _uniform(b):  # lerp's weight < 0.5: one comparison, broadcast
            one = (0,) * a.ndim
            return [np.broadcast_to(compare(view(a[one]), view(b[one])), a.shape)]
        return [compare(view(a), view(b))]


_op("compare", 2, "elementwise")((_compare_infer, _compare_eval))


def _select_infer(types, attrs):
    _check_same_shapes("select", types)
    if types[0].dtype != "bool":
        _fail("graph.dtype", f"select's predicate must be bool, got {types[0].dtype}")
    return [types[1]]


def _select_eval(arrays, attrs, out_types):
    pred, a, b = arrays
    dtype = dtypes.to_numpy(out_types[0].dtype)
    if _uniform(pred):  # one predicate for every element: the chosen operand as it is
        chosen = a if pred.reshape(-1)[:1].all() else b
        return [np.asarray(chosen).astype(dtype, copy=False)]
    return [np.where(pred, a, b).astype(dtype, copy=False)]


_op("select", 3, "elementwise", "moves_data")((_select_infer, _select_eval))


def _convert_infer(types, attrs):
    return [TensorType(types[0].shape, attrs["dtype"])]


def _convert_eval(arrays, attrs, out_types):
    a = arrays[0]
    target = out_types[0].dtype
    if is_integer(a):  # integer -> integer wraps; integer -> float rounds the exact value once
        return [wrap(a, target)]
    return [dtypes.convert(f32(a), target)]  # float -> integer: RNE, saturating (the engines' write)


_op("convert", 1, "elementwise")((_convert_infer, _convert_eval))


# --- shapes and data movement --------------------------------------------------------------------


def _broadcast_infer(types, attrs):
    shape, dims = tuple(attrs["shape"]), tuple(attrs["dims"])
    src = types[0].shape
    if len(dims) != len(src) or any(s not in (1, shape[d]) for s, d in zip(src, dims)):
        _fail("graph.broadcast", f"cannot broadcast {list(src)} into {list(shape)} along dims {list(dims)}")
    return [TensorType(shape, types[0].dtype)]


def _broadcast_eval(arrays, attrs, out_types):
    shape, dims = tuple(attrs["shape"]), tuple(attrs["dims"])
    src = arrays[0]
    expanded = [1] * len(shape)
    for s, d in zip(src.shape, dims):
        expanded[d] = s
    order = sorted(range(len(dims)), key=lambda i: dims[i])
    return [np.broadcast_to(src.transpose(order).reshape(expanded), shape)]


_op("broadcast_in_dim", 1, "view", "moves_data")((_broadcast_infer, _broadcast_eval))


def _reshape_infer(types, attrs):
    shape = tuple(attrs["shape"])
    if math.prod(shape) != types[0].num_elements:
        _fail("graph.reshape", f"cannot reshape {list(types[0].shape)} into {list(shape)}")
    return [TensorType(shape, types[0].dtype)]


_op("reshape", 1, "view", "moves_data")((_reshape_infer, lambda arrays, attrs, out: [arrays[0].reshape(tuple(attrs["shape"]))]))


def _transpose_infer(types, attrs):
    perm = tuple(attrs["perm"])
    if sorted(perm) != list(range(types[0].rank)):
        _fail("graph.transpose", f"{list(perm)} is not a permutation of {types[0].rank} dims")
    return [TensorType(tuple(types[0].shape[p] for p in perm), types[0].dtype)]


_op("transpose", 1, "view", "moves_data")((_transpose_infer, lambda arrays, attrs, out: [arrays[0].transpose(tuple(attrs["perm"]))]))


def _as_strided_infer(types, attrs):
    shape, strides, offset = tuple(attrs["shape"]), tuple(attrs["strides"]), int(attrs.get("offset", 0))
    n = types[0].num_elements
    if len(shape) != len(strides) or any(s < 0 for s in strides) or offset < 0:
        _fail("graph.as_strided", f"as_strided needs one non-negative stride per dim, got shape {list(shape)} strides {list(strides)}")
    last = offset + sum((d - 1) * st for d, st in zip(shape, strides) if d > 0)
    if math.prod(shape) and last >= n:
        _fail("graph.as_strided", f"as_strided {list(shape)} strides {list(strides)} offset {offset} reaches element {last} "
              f"of a {n}-element operand")
    return [TensorType(shape, types[0].dtype)]


def _as_strided_eval(arrays, attrs, out_types):
    """Elements of the operand (taken in row-major order) at ``offset + sum(index * strides)``:
    how a framework tensor's strided layout over its storage is described."""
    flat = np.ascontiguousarray(arrays[0]).reshape(-1)
    size = flat.itemsize
    start = flat[int(attrs.get("offset", 0)):]
    return [np.lib.stride_tricks.as_strided(start, tuple(attrs["shape"]), tuple(s * size for s in attrs["strides"]),
                                            writeable=False)]


_op("as_strided", 1, "view", "moves_data")((_as_strided_infer, _as_strided_eval))


def _slice_infer(types, attrs):
    start, limit, stride = attrs["start"], attrs["limit"], attrs.get("stride") or [1] * len(attrs["start"])
    shape = []
    for dim, (s, e, st) in enumerate(zip(start, limit, stride)):
        if not (0 <= s <= e <= types[0].shape[dim]) or st <= 0:
            _fail("graph.slice", f"slice [{s}:{e}:{st}] is outside dim {dim} of {list(types[0].shape)}")
        shape.append(len(range(s, e, st)))
    return [TensorType(tuple(shape), types[0].dtype)]


def _slice_eval(arrays, attrs, out_types):
    stride = attrs.get("stride") or [1] * len(attrs["start"])
    return [arrays[0][tuple(slice(s, e, st) for s, e, st in zip(attrs["start"], attrs["limit"], stride))]]


_op("slice", 1, "view", "moves_data")((_slice_infer, _slice_eval))


def _concat_infer(types, attrs):
    dim = attrs["dim"]
    base = list(types[0].shape)
    for t in types[1:]:
        if t.dtype != types[0].dtype or [s for i, s in enumerate(t.shape) if i != dim] != [s for i, s in enumerate(base) if i != dim]:
            _fail("graph.concatenate", f"cannot concatenate {[str(t) for t in types]} along dim {dim}")
    base[dim] = sum(t.shape[dim] for t in types)
    return [TensorType(tuple(base), types[0].dtype)]


_op("concatenate", None, "moves_data")((_concat_infer, lambda arrays, attrs, out: [np.concatenate(arrays, axis=attrs["dim"])]))


def _pad_infer(types, attrs):
    shape = tuple(s + lo + hi for s, lo, hi in zip(types[0].shape, attrs["low"], attrs["high"]))
    return [TensorType(shape, types[0].dtype)]


def _pad_eval(arrays, attrs, out_types):
    return [np.pad(arrays[0], list(zip(attrs["low"], attrs["high"])), constant_values=attrs.get("value", 0))]


_op("pad", 1, "moves_data")((_pad_infer, _pad_eval))


def _bitcast_infer(types, attrs):
    """StableHLO's ``bitcast_convert``: the operand's bytes read as ``dtype``. An equally wide
    dtype keeps the shape; a narrower one adds a last dim of the width ratio (little-endian parts
    of each element); a wider one takes that last dim away."""
    src, dtype = types[0], dtypes.dtype_name(attrs["dtype"])
    if "bool" in (src.dtype, dtype):
        _fail("graph.bitcast", f"bitcast_convert {src.dtype} -> {dtype}: bool has no defined bit pattern")
    a, b = dtypes.itemsize(src.dtype), dtypes.itemsize(dtype)
    if a == b:
        shape = src.shape
    elif a > b and a % b == 0:
        shape = (*src.shape, a // b)
    elif a < b and b % a == 0 and src.shape and src.shape[-1] == b // a:
        shape = src.shape[:-1]
    else:
        _fail("graph.bitcast", f"bitcast_convert {list(src.shape)} {src.dtype} -> {dtype}: a wider dtype needs a last "
                               f"dim of {b // a if b % a == 0 else 'a whole ratio'} {src.dtype} elements")
    return [TensorType(shape, dtype)]


def _bitcast_eval(arrays, attrs, out_types):
    out = out_types[0]
    return [np.ascontiguousarray(arrays[0]).reshape(-1).view(dtypes.to_numpy(out.dtype)).reshape(out.shape)]


_op("bitcast_convert", 1)((_bitcast_infer, _bitcast_eval))


def _iota_infer(types, attrs):
    return [TensorType(tuple(attrs["shape"]), attrs["dtype"])]


def _iota_eval(arrays, attrs, out_types):
    shape, dim = tuple(attrs["shape"]), attrs["dim"]
    idx = np.arange(shape[dim]).reshape([-1 if i == dim else 1 for i in range(len(shape))])
    return [dtypes.convert(np.broadcast_to(idx, shape).astype(np.float64), attrs["dtype"])]


_op("iota", 0, "leaf")((_iota_infer, _iota_eval))


def _random_words_infer(types, attrs):
    """``random_words(state) {count}``: the draw's ``count`` words (int32 bits; ``isa/philox.py``)
    of a 4-word int32 state (seed low, high, counter offset low, high)."""
    (state,) = types
    count = attrs["count"]
    if state.shape != (4,) or state.dtype != "int32":
        _fail("graph.random_words", f"a generator state is int32 [4] (seed lo, hi, offset lo, hi), got {state}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= philox.MAX_COUNT:
        _fail("graph.random_words", f"a draw's word count is an integer in [1, {philox.MAX_COUNT}], got {count!r}")
    return [TensorType((count,), "int32")]


def _random_words_eval(arrays, attrs, out_types):
    count = attrs["count"]
    return [philox.words(arrays[0], np.arange(count, dtype=np.int64), count).view(np.int32)]


_op("random_words", 1)((_random_words_infer, _random_words_eval))


def _constant_infer(types, attrs):
    value = attrs["value"]
    return [TensorType(tuple(np.shape(value)), attrs.get("dtype") or dtypes.dtype_name(np.asarray(value).dtype))]


def _constant_eval(arrays, attrs, out_types):
    return [dtypes.convert(np.asarray(attrs["value"]), out_types[0].dtype)]


_op("constant", 0, "leaf", "moves_data")((_constant_infer, _constant_eval))


# --- reductions ------------------------------------------------------------------------------------

REDUCE = {"sum": (np.add, 0.0), "max": (np.maximum, -np.inf), "min": (np.minimum, np.inf), "prod": (np.multiply, 1.0),
          "and": (np.logical_and, True), "or": (np.logical_or, False)}


def _reduce_infer(types, attrs):
    dims = tuple(sorted(d % types[0].rank for d in attrs["dims"])) if types[0].rank else ()
    if attrs["kind"] not in REDUCE:
        _fail("graph.attr", f"reduce kind must be one of {sorted(REDUCE)}, got {attrs['kind']!r}")
    keep = attrs.get("keepdims", False)
    shape = tuple(1 if i in dims else s for i, s in enumerate(types[0].shape)) if keep else tuple(
        s for i, s in enumerate(types[0].shape) if i not in dims)
    dtype = "bool" if attrs["kind"] in ("and", "or") else attrs.get("dtype", types[0].dtype)
    return [TensorType(shape, dtype)]


def _reduce_eval(arrays, attrs, out_types):
    a = arrays[0]
    dims = tuple(sorted(d % a.ndim for d in attrs["dims"])) if a.ndim else None
    fn, _ = REDUCE[attrs["kind"]]
    if attrs["kind"] in ("and", "or"):
        return [fn.reduce(a != 0, axis=dims, keepdims=attrs.get("keepdims", False))]
    if is_integer(a) and not dtypes.is_float(out_types[0].dtype):
        return [wrap(fn.reduce(a.astype(np.int64), axis=dims, keepdims=attrs.get("keepdims", False)), out_types[0].dtype)]
    with np.errstate(all="ignore"):
        result = fn.reduce(f32(a), axis=dims, keepdims=attrs.get("keepdims", False), dtype=np.float32)
    return [dtypes.convert(np.asarray(result, dtype=np.float32), out_types[0].dtype)]


_op("reduce", 1, "exact_on_integers")((_reduce_infer, _reduce_eval))


def _arg_infer(types, attrs):
    dim = attrs["dim"] % types[0].rank
    keep = attrs.get("keepdims", False)
    shape = tuple(1 if i == dim else s for i, s in enumerate(types[0].shape)) if keep else tuple(
        s for i, s in enumerate(types[0].shape) if i != dim)
    return [TensorType(shape, attrs.get("dtype", "int32"))]


def _arg_eval(fn):
    def evaluate(arrays, attrs, out_types):
        a = arrays[0] if is_integer(arrays[0]) else f32(arrays[0])
        dim = attrs["dim"] % a.ndim
        with np.errstate(invalid="ignore"):
            idx = fn(a, axis=dim, keepdims=attrs.get("keepdims", False))
        return [idx.astype(dtypes.to_numpy(out_types[0].dtype))]

    return evaluate


_op("argmax", 1, "exact_on_integers")((_arg_infer, _arg_eval(np.argmax)))
_op("argmin", 1, "exact_on_integers")((_arg_infer, _arg_eval(np.argmin)))


def _argsort_infer(types, attrs):
    if not types[0].rank:
        _fail("graph.argsort", "argsort needs at least one dim (a 0-d operand has nothing to order)")
    if not -types[0].rank <= attrs["dim"] < types[0].rank:
        _fail("graph.argsort", f"argsort dim {attrs['dim']} is out of range for {types[0]}")
    if not dtypes.is_int(attrs.get("dtype", "int32")):
        _fail("graph.dtype", f"argsort's indices must be integers, got {attrs.get('dtype')}")
    return [TensorType(types[0].shape, attrs.get("dtype", "int32"))]


def _argsort_eval(arrays, attrs, out_types):
    """The positions that order ``a`` along ``dim`` as PyTorch's stable sort does: ascending (or
    ``descending``), NaN above every number, -0.0 equal to 0.0, equal elements in their original
    order. Integers compare exactly."""
    a = arrays[0].astype(np.int64) if is_integer(arrays[0]) else f32(arrays[0])
    dim = attrs["dim"] % a.ndim
    if not attrs.get("descending", False):
        idx = np.argsort(a, axis=dim, kind="stable")  # numpy too puts NaN last and keeps ties in order
    else:  # descending and stable: the ascending stable order of the reversed elements, reversed
        idx = a.shape[dim] - 1 - np.flip(np.argsort(np.flip(a, dim), axis=dim, kind="stable"), dim)
    return [idx.astype(dtypes.to_numpy(out_types[0].dtype))]


_op("argsort", 1)((_argsort_infer, _argsort_eval))


def _cumsum_eval(arrays, attrs, out_types):
    a = arrays[0]
    if is_integer(a) and not dtypes.is_float(out_types[0].dtype):
        return [wrap(np.cumsum(a.astype(np.int64), axis=attrs["dim"]), out_types[0].dtype)]
    return [dtypes.convert(np.cumsum(f32(a), axis=attrs["dim"], dtype=np.float32), out_types[0].dtype)]


_op("cumsum", 1, "exact_on_integers")((lambda types, attrs: [TensorType(types[0].shape, attrs.get("dtype", types[0].dtype))], _cumsum_eval))


# --- matrix products -------------------------------------------------------------------------------


def _dot_infer(types, attrs):
    lhs, rhs = types
    lb, rb, lc, rc = (tuple(attrs.get(k, ())) for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"))
    if [lhs.shape[d] for d in lb] != [rhs.shape[d] for d in rb] or [lhs.shape[d] for d in lc] != [rhs.shape[d] for d in rc]:
        _fail("graph.dot", f"dot_general dims disagree: {lhs} batch {list(lb)} contract {list(lc)} vs {rhs} batch {list(rb)} contract {list(rc)}")
    lfree = [s for i, s in enumerate(lhs.shape) if i not in lb + lc]
    rfree = [s for i, s in enumerate(rhs.shape) if i not in rb + rc]
    shape = tuple([lhs.shape[d] for d in lb] + lfree + rfree)
    return [TensorType(shape, attrs.get("dtype", lhs.dtype))]


def dot_operands(arrays, attrs, as_operand=None) -> tuple[np.ndarray, np.ndarray]:
    """A dot_general's operands as ``[batch, free, contract]`` and ``[batch, contract, free]``, each
    converted by ``as_operand`` (default fp32: the PE array multiplies in fp32 and accumulates in
    fp32 PSUM)."""
    lhs, rhs = (as_operand(a) if as_operand is not None else f32(a) for a in arrays)
    lb, rb, lc, rc = (tuple(attrs.get(k, ())) for k in ("lhs_batch", "rhs_batch", "lhs_contract", "rhs_contract"))
    lfree = [i for i in range(lhs.ndim) if i not in lb + lc]
    rfree = [i for i in range(rhs.ndim) if i not in rb + rc]
    L = lhs.transpose(list(lb) + lfree + list(lc))
    R = rhs.transpose(list(rb) + list(rc) + rfree)
    nb = math.prod(lhs.shape[d] for d in lb)
    nk = math.prod(lhs.shape[d] for d in lc)
    m = math.prod(lhs.shape[d] for d in lfree)
    n = math.prod(rhs.shape[d] for d in rfree)
    return L.reshape(nb, m, nk), R.reshape(nb, nk, n)


def integer_dot(arrays, attrs, out_type: TensorType) -> np.ndarray | None:
    """An integer dot_general's exact result wrapped to ``out_type`` (PyTorch's integer matmul
    wraps, whatever the order of its sums: two's complement is arithmetic modulo 2**bits), or None
    when an operand or the result is a float. int64 products and sums wrap modulo 2**64 in numpy,
    which is what the int64 result keeps."""
    if not all(is_integer(a) for a in arrays) or dtypes.is_float(out_type.dtype):
        return None
    L, R = dot_operands(arrays, attrs, lambda a: a.astype(np.int64))
    return wrap(np.matmul(L, R).reshape(out_type.shape), out_type.dtype)


def _dot_eval(arrays, attrs, out_types):
    exact = integer_dot(arrays, attrs, out_types[0])
    if exact is not None:
        return [exact]
    L, R = dot_operands(arrays, attrs)
    out = matmul(L, R)
    return [dtypes.convert(out.reshape(out_types[0].shape), out_types[0].dtype)]


_op("dot_general", 2, "exact_on_integers")((_dot_infer, _dot_eval))


# --- indexing --------------------------------------------------------------------------------------


def _check_index(idx: np.ndarray, size: int, op: str) -> np.ndarray:
    idx = idx.astype(np.int64)
    bad = (idx < 0) | (idx >= size)
    if bad.any():
        first = int(idx[bad].reshape(-1)[0])
        raise IndexOutOfBoundsError("graph.index_out_of_bounds",
                                    f"{op}: index {first} is out of bounds for a dimension of size {size}",
                                    index=first, size=size)
    return idx


def _gather_infer(types, attrs):
    src, idx = types
    axis = attrs["axis"] % src.rank
    if not dtypes.is_int(idx.dtype):
        _fail("graph.dtype", f"gather indices must be integers, got {idx.dtype}")
    return [TensorType(src.shape[:axis] + idx.shape + src.shape[axis + 1:], src.dtype)]


def _gather_eval(arrays, attrs, out_types):
    src, idx = arrays
    axis = attrs["axis"] % src.ndim
    return [np.take(src, _check_index(idx, src.shape[axis], "gather"), axis=axis)]


_op("gather", 2, "moves_data")((_gather_infer, _gather_eval))


def _take_along_infer(types, attrs):
    return [TensorType(types[1].shape, types[0].dtype)]


def _take_along_eval(arrays, attrs, out_types):
    src, idx = arrays
    axis = attrs["axis"] % src.ndim
    idx = _check_index(idx, src.shape[axis], "take_along_axis")
    # torch.gather semantics: index may be smaller than src in the other dims.
    view = src[tuple(slice(0, s) if d != axis else slice(None) for d, s in enumerate(idx.shape))]
    return [np.take_along_axis(view, idx, axis=axis)]


_op("take_along_axis", 2, "moves_data")((_take_along_infer, _take_along_eval))


def _scatter_infer(types, attrs):
    if attrs.get("mode", "set") not in ("set", "add"):
        _fail("graph.attr", f"scatter mode must be 'set' or 'add', got {attrs.get('mode')!r}")
    return [types[0]]


def _scatter_eval(arrays, attrs, out_types):
    """torch.scatter(_add) along ``axis``: out = operand; out[index[i]][j] (op)= updates[i][j]."""
    operand, idx, updates = arrays
    axis = attrs["axis"] % operand.ndim
    idx = _check_index(idx, operand.shape[axis], "scatter")
    exact = is_integer(operand) and is_integer(updates)
    view = (lambda x: x.astype(np.int64)) if exact else f32
    out = view(operand).copy()
    grid = np.indices(idx.shape)
    target = tuple(idx if d == axis else grid[d] for d in range(operand.ndim))
    values = view(updates)[tuple(slice(0, s) for s in idx.shape)]
    if attrs.get("mode", "set") == "add":
        np.add.at(out, target, values)
    else:
        out[target] = values
    return [wrap(out, out_types[0].dtype) if exact else dtypes.convert(out, out_types[0].dtype)]


_op("scatter", 3, "exact_on_integers", "indexed_writes")((_scatter_infer, _scatter_eval))


def _index_add_eval(arrays, attrs, out_types):
    """index_add along ``axis``: out.select(axis, index[i]) += source.select(axis, i)."""
    operand, idx, source = arrays
    axis = attrs["axis"] % operand.ndim
    idx = _check_index(idx.reshape(-1), operand.shape[axis], "index_add")
    alpha = attrs.get("alpha", 1.0)
    if is_integer(operand) and is_integer(source) and float(alpha).is_integer():
        out = np.moveaxis(operand.astype(np.int64), axis, 0).copy()
        np.add.at(out, idx, np.moveaxis(source.astype(np.int64), axis, 0) * int(alpha))
        return [wrap(np.moveaxis(out, 0, axis), out_types[0].dtype)]
    out = np.moveaxis(f32(operand).copy(), axis, 0)
    np.add.at(out, idx, np.moveaxis(f32(source), axis, 0) * np.float32(alpha))
    return [dtypes.convert(np.moveaxis(out, 0, axis), out_types[0].dtype)]


_op("index_add", 3, "exact_on_integers", "indexed_writes")((lambda types, attrs: [types[0]], _index_add_eval))


# The sets of ops with a fact, for the readers that test membership on every node.
ELEMENTWISE_OPS = ops_with("elementwise")
VIEW_OPS = ops_with("view")
LEAF_OPS = ops_with("leaf")
DATA_MOVEMENT_OPS = ops_with("moves_data")
EXACT_ON_INTEGERS_OPS = ops_with("exact_on_integers")
# Unary ops that leave an integer operand as it is (copies, rounding): nothing computed on integers.
IDENTITY_ON_INTEGERS = frozenset(name for name, fn in INTEGER_UNARY.items() if fn is _identity)
