"""Elementwise math, reductions and the composite ops (softmax, rms_norm) of nki.language.

Each function returns a new SBUF tile and picks the engine a compiler would: ScalarE for
transcendental activations, VectorE for ALU arithmetic, comparisons and reductions, GpSimd for
reductions across partitions. Operands broadcast like numpy within the hardware's means: a
[P, 1] tile is a per-partition scalar operand; a [1, F] tile is broadcast across partitions
through TensorE (a matmul against ones), as compilers do.
"""

from __future__ import annotations

import math

import numpy as np
from neuron_sim import dtypes
from neuron_sim.isa import (
    Activation,
    Matmul,
    PartitionReduce,
    Reciprocal,
    ScalarTensorTensor,
    Select,
    TensorCopy,
    TensorReduce,
    TensorScalar,
    TensorTensor,
)

from .. import tracing
from ..indexing import Mask, folds_constant_mask
from ..storage import ON_CHIP
from ..tensor import NkiTensor, broadcast_view, merge_groups
from .memory_ops import apply_mask, full, inherit_window, load, ndarray

BINARY_OPS = (
    "add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "mod", "fmod", "abs_max", "abs_min",
    "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or",
    "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift",
)
# ScalarE activation functions (table entries in neuron_sim.isa.ops.ACTIVATIONS).
ACTIVATION_FUNCS = (
    "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "relu", "gelu", "gelu_apprx_tanh", "silu", "softplus", "mish",
    "erf", "sin", "cos", "arctan", "square", "sign", "copy",
)


def _on_chip(x: NkiTensor, role: str) -> NkiTensor:
    if x.buffer not in ON_CHIP:
        raise tracing.current().error(
            "engine.memory_access", f"{role} {x!r} is in HBM; compute engines read SBUF/PSUM (nl.load it first)"
        )
    return x


def _result_dtype(dtype, *tiles: NkiTensor) -> str:
    if dtype is not None:
        return dtypes.dtype_name(dtype)
    kinds = {t.dtype for t in tiles}
    if len(kinds) == 1:
        return kinds.pop()
    return "float32" if any(dtypes.is_float(k) for k in kinds) else max(kinds, key=dtypes.itemsize)


def _out(shape, dtype) -> NkiTensor:
    return ndarray(shape if len(shape) > 1 else (shape[0], 1), dtype, "sbuf")


def broadcast_partitions(row: NkiTensor, partitions: int) -> NkiTensor:
    """[1, F] -> [P, F] through TensorE: ones[1, P].T @ row[1, F] lands the row on every partition
    of PSUM (exact: each output is 1.0 x value in fp32)."""
    ctx = tracing.current()
    flat = row if row.ndim == 2 else row.reshape((1, row.size))
    family = "float32" if flat.dtype in ("float32", "tfloat32") else "bfloat16" if flat.dtype not in ("float16",) else "float16"
    src = flat
    if flat.dtype != family:
        src = ndarray(flat.shape, family, "sbuf")
        ctx.emit(TensorCopy(dst=src.access_pattern(), src=flat.access_pattern(), engine="vector"))
    ones = full((1, partitions), 1.0, family)
    out = ndarray((partitions, flat.shape[1]), "float32", "sbuf")
    chunk = ctx.arch.tensor.moving_fmax
    for c in range(0, flat.shape[1], chunk):
        n = min(chunk, flat.shape[1] - c)
        acc = ndarray((partitions, n), "float32", "psum")
        ctx.emit(Matmul(dst=acc.access_pattern(), stationary=ones.access_pattern(), moving=src[:, c : c + n].access_pattern()))
        ctx.emit(TensorCopy(dst=out[:, c : c + n].access_pattern(), src=acc.access_pattern(), engine="vector"))
    return out if row.ndim == 2 else out.reshape((partitions,) + row.shape[1:])


def _to_window(t: NkiTensor, other: NkiTensor) -> NkiTensor:
    """``t`` cut to the legacy mask window ``other`` covers, where ``other`` is the smaller:
    ``y * g`` with ``y`` from a masked op and ``g`` a full tile works on y's rows of ``g``."""
    if not other._mask_window or t.ndim != other.ndim:
        return t
    key = [slice(None)] * t.ndim
    for axis, start in other._mask_window.items():
        if t.shape[axis] > other.shape[axis] > 1 and not (t._mask_window and axis in t._mask_window):
            key[axis] = slice(start, start + other.shape[axis])
    return t[tuple(key)] if any(k != slice(None) for k in key) else t


def _align(x: NkiTensor, y: NkiTensor) -> tuple[NkiTensor, NkiTensor]:
    """Broadcast two on-chip tiles to one shape (per-partition scalars are left to the caller)."""
    x, y = _to_window(x, y), _to_window(y, x)
    if x.shape == y.shape:
        return x, y
    ndim = max(x.ndim, y.ndim)
    xs = (1,) * (ndim - x.ndim) + x.shape if x.ndim < ndim else x.shape
    ys = (1,) * (ndim - y.ndim) + y.shape if y.ndim < ndim else y.shape
    shape = []
    for a, b in zip(xs, ys):
        if a != b and 1 not in (a, b):
            raise tracing.current().error("shape.broadcast", f"shapes {list(x.shape)} and {list(y.shape)} do not broadcast")
        shape.append(max(a, b))

    def fit(t: NkiTensor) -> NkiTensor:
        if t.shape[0] != shape[0]:
            t = broadcast_partitions(t, shape[0])
        if t.shape != tuple(shape):
            t = broadcast_view(t, tuple(shape))
        return t

    return fit(x), fit(y)


def _is_column(t: NkiTensor, partitions: int) -> bool:
    return t.shape[0] == partitions and math.prod(t.shape[1:]) == 1 and t.ndim >= 1


@folds_constant_mask
def binary(op: str, x, y, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """``x op y`` as a new tile. Numbers become immediates; a [P, 1] tile a per-partition operand."""
    ctx = tracing.current()
    if op not in BINARY_OPS:
        raise ctx.error("op.unknown", f"unknown binary op {op!r}")
    x_t, y_t = isinstance(x, NkiTensor), isinstance(y, NkiTensor)
    if not x_t and not y_t:
        raise ctx.error("operand.type", f"nl.{op} needs at least one tensor operand, got {x!r} and {y!r}")
    if x_t:
        _on_chip(x, "x")
    if y_t:
        _on_chip(y, "y")
    x, y = apply_mask(mask, x, y)
    if not y_t or (x_t and y_t and _is_column(y, x.shape[0]) and not _is_column(x, x.shape[0])):
        return _tensor_scalar(op, x, y, False, _result_dtype(dtype, *([x, y] if y_t else [x])))
    if not x_t or _is_column(x, y.shape[0]) and not _is_column(y, y.shape[0]):
        return _tensor_scalar(op, y, x, True, _result_dtype(dtype, *([x, y] if x_t else [y])))
    x, y = _align(x, y)
    out = _out(x.shape, _result_dtype(dtype, x, y))
    ctx.emit(TensorTensor(dst=out.access_pattern(), in0=x.access_pattern(), in1=y.access_pattern(), op=op))
    inherit_window(out, x, y)
    return out


def _tensor_scalar(op, data: NkiTensor, operand, reverse: bool, dtype) -> NkiTensor:
    ctx = tracing.current()
    if isinstance(operand, NkiTensor):
        operand = operand.reshape((operand.shape[0], 1)).access_pattern()
    elif isinstance(operand, (bool, np.bool_)) or not isinstance(operand, (int, float, np.integer, np.floating)):
        raise ctx.error("operand.type", f"unsupported scalar operand {operand!r}")
    else:  # numpy scalars (np.int32(49) from shape arithmetic) are immediates like Python numbers
        operand = operand.item() if isinstance(operand, np.generic) else operand
    out = _out(data.shape, dtype)
    ctx.emit(TensorScalar(dst=out.access_pattern(), src=data.access_pattern(), op0=op, operand0=operand, reverse0=reverse))
    inherit_window(out, data)
    return out


@folds_constant_mask
def unary(func: str, x: NkiTensor, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """An elementwise function of one tile."""
    ctx = tracing.current()
    _on_chip(x, "x")
    (x,) = apply_mask(mask, x)
    out = _out(x.shape, _result_dtype(dtype, x))
    dst, src = out.access_pattern(), x.access_pattern()
    if func in ACTIVATION_FUNCS:
        ctx.emit(Activation(dst=dst, src=src, func=func))
    elif func == "negative":
        ctx.emit(TensorScalar(dst=dst, src=src, op0="multiply", operand0=-1.0))
    elif func == "abs":
        ctx.emit(TensorScalar(dst=dst, src=src, op0="abs"))
    elif func == "reciprocal":
        ctx.emit(Reciprocal(dst=dst, src=src))
    elif func == "invert":
        ctx.emit(TensorScalar(dst=dst, src=src, op0="bitwise_xor", operand0=-1))
    elif func == "logical_not":
        ctx.emit(TensorScalar(dst=dst, src=src, op0="equal", operand0=0.0))
    elif func in ("trunc", "floor", "ceil"):
        # trunc(x) = x - fmod(x, 1); floor/ceil step from it where it moved toward zero.
        frac = ndarray(out.shape, "float32", "sbuf")
        ctx.emit(TensorScalar(dst=frac.access_pattern(), src=src, op0="fmod", operand0=1.0))
        whole = ndarray(out.shape, "float32", "sbuf")
        ctx.emit(TensorTensor(dst=whole.access_pattern(), in0=src, in1=frac.access_pattern(), op="subtract"))
        if func == "trunc":
            ctx.emit(TensorCopy(dst=dst, src=whole.access_pattern(), engine="vector"))
        else:
            step = ndarray(out.shape, "float32", "sbuf")
            cmp, sign = ("less", -1.0) if func == "floor" else ("greater", 1.0)
            ctx.emit(TensorScalar(dst=step.access_pattern(), src=frac.access_pattern(), op0=cmp, operand0=0.0,
                                  op1="multiply", operand1=sign))
            ctx.emit(TensorTensor(dst=dst, in0=whole.access_pattern(), in1=step.access_pattern(), op="add"))
    elif func in COMPOSITE_ACTIVATIONS:
        _composite_activation(func, x, out)
    elif func == "tan":
        s, c = unary("sin", x), unary("cos", x)
        ctx.emit(TensorTensor(dst=dst, in0=s.access_pattern(), in1=c.access_pattern(), op="divide"))
    else:
        raise ctx.error("op.unknown", f"unknown elementwise function {func!r}")
    inherit_window(out, x)
    return out


# Activation-table functions of nki.language that neuron-sim's ScalarE table lacks: built from
# table functions and VectorE arithmetic (same values; a few instructions instead of one ACTIVATE,
# so their timing is pessimistic).
COMPOSITE_ACTIVATIONS = ("gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx", "gelu_dx", "silu_dx", "erf_dx")
_GELU_SIGMOID_K = 1.702  # gelu(x) ~ x * sigmoid(1.702 x)


def _composite_activation(func: str, x: NkiTensor, out: NkiTensor) -> None:
    ctx = tracing.current()
    src = x.access_pattern()
    live = []  # temporaries stay allocated until the composite is done (their bytes are freed with them)

    def tmp(emit_fn):
        t = ndarray(out.shape, "float32", "sbuf")
        live.append(t)
        emit_fn(t.access_pattern())
        return t.access_pattern()

    def act(f, data=src, scale=1.0):
        return tmp(lambda d: ctx.emit(Activation(dst=d, src=data, func=f, scale=scale)))

    def ts(data, op0, operand0, op1=None, operand1=None, reverse0=False):
        return tmp(lambda d: ctx.emit(TensorScalar(dst=d, src=data, op0=op0, operand0=operand0, reverse0=reverse0,
                                                   op1=op1, operand1=operand1)))

    def tt(a, b, op, dst=None):
        if dst is not None:
            ctx.emit(TensorTensor(dst=dst, in0=a, in1=b, op=op))
            return dst
        return tmp(lambda d: ctx.emit(TensorTensor(dst=d, in0=a, in1=b, op=op)))

    dst = out.access_pattern()
    if func in ("gelu_apprx_sigmoid", "gelu_apprx_sigmoid_dx"):
        s = act("sigmoid", scale=_GELU_SIGMOID_K)
        if func == "gelu_apprx_sigmoid":  # x * s
            tt(src, s, "multiply", dst)
            return
        # s + k x s (1 - s)
        one_minus = ts(s, "subtract", 1.0, reverse0=True)
        ks = ts(tt(s, one_minus, "multiply"), "multiply", _GELU_SIGMOID_K)
        tt(s, tt(ks, src, "multiply"), "add", dst)
    elif func == "silu_dx":  # s (1 + x (1 - s)), s = sigmoid(x)
        s = act("sigmoid")
        one_minus = ts(s, "subtract", 1.0, reverse0=True)
        inner = ts(tt(one_minus, src, "multiply"), "add", 1.0)
        tt(s, inner, "multiply", dst)
    elif func == "erf_dx":  # 2 / sqrt(pi) * exp(-x^2)
        e = act("exp", data=act("square"), scale=-1.0)
        ctx.emit(TensorScalar(dst=dst, src=e, op0="multiply", operand0=2.0 / math.sqrt(math.pi)))
    elif func == "gelu_dx":  # Phi(x) + x phi(x)
        cdf = ts(act("erf", scale=1.0 / math.sqrt(2.0)), "multiply", 0.5, "add", 0.5)
        pdf = ts(act("exp", data=act("square"), scale=-0.5), "multiply", 1.0 / math.sqrt(2.0 * math.pi))
        tt(tt(pdf, src, "multiply"), cdf, "add", dst)


# --- reductions --------------------------------------------------------------------------------


def _axes(x: NkiTensor, axis) -> tuple[int, ...]:
    axes = axis if isinstance(axis, (tuple, list)) else (axis,)
    out = tuple(sorted(a + x.ndim if a < 0 else a for a in axes))
    if any(not 0 <= a < x.ndim for a in out):
        raise tracing.current().error("reduce.axes", f"axis {axis} is out of range for shape {list(x.shape)}")
    return out


@folds_constant_mask
def reduce(op: str, x: NkiTensor, axis, dtype=None, keepdims: bool = False, mask: Mask | None = None,
           negate: bool = False) -> NkiTensor:
    ctx = tracing.current()
    _on_chip(x, "x")
    (x,) = apply_mask(mask, x)
    axes = _axes(x, axis)
    dtype = _result_dtype(dtype, x)
    if axes == (0,):  # across partitions: GpSimd
        out = ndarray((1,) + x.shape[1:] if x.ndim > 1 else (1, 1), dtype, "sbuf")
        ctx.emit(PartitionReduce(dst=out.access_pattern(), src=x.access_pattern(), op=op))
        return out
    if 0 in axes:
        raise ctx.error("reduce.axes", f"reduce over the partition dim and free dims at once ({list(axes)}) is not an instruction; reduce in two steps")
    trailing = tuple(range(x.ndim - len(axes), x.ndim))
    if axes != trailing:
        # The instruction reduces trailing free dims, but an access pattern lists free dims in any
        # order: walk the kept dims first and the reduced ones last (nl.sum(t, axis=[2, 4])).
        order = [d for d in range(x.ndim) if d not in axes] + list(axes)
        out = reduce(op, x.permute(order), trailing, dtype, False, None, negate)
        return out.reshape(tuple(1 if d in axes else s for d, s in enumerate(x.shape))) if keepdims else out
    kept = x.shape[: x.ndim - len(axes)]
    shape = kept + (1,) * len(axes) if keepdims else kept
    out = ndarray(shape if len(shape) > 1 else (shape[0], 1), dtype, "sbuf")
    split = x.ndim - len(axes)
    src = x.access_pattern(keep_split=split)
    reduced = len(_merged(x.shape[split:], x.strides[split:]))
    free_axes = tuple(range(len(src.free) - reduced + 1, len(src.free) + 1))
    ctx.emit(TensorReduce(dst=out.access_pattern(), src=src, op=op, axes=free_axes, negate=negate))
    inherit_window(out, x)
    return out


def _merged(shape, strides) -> list:
    """The free dims the access pattern makes of these (reduced) axes."""
    return merge_groups(list(zip(strides, shape)), None)


def mean(x: NkiTensor, axis, dtype=None, keepdims: bool = False, mask: Mask | None = None) -> NkiTensor:
    total = reduce("add", x, axis, "float32", keepdims, mask)
    n = math.prod(x.shape[a] for a in _axes(x, axis))
    return _tensor_scalar("multiply", total, 1.0 / n, False, _result_dtype(dtype, x))


def var(x: NkiTensor, axis, dtype=None, keepdims: bool = False, mask: Mask | None = None) -> NkiTensor:
    """Population variance: mean((x - mean)^2), two passes for accuracy."""
    ctx = tracing.current()
    axes = _axes(x, axis)
    m = mean(x, axis, "float32", keepdims=True, mask=mask)
    centered = ndarray(x.shape, "float32", "sbuf")
    ctx.emit(TensorScalar(dst=centered.access_pattern(), src=x.access_pattern(), op0="subtract",
                          operand0=m.reshape((m.shape[0], 1)).access_pattern()))
    squared = binary("multiply", centered, centered, "float32")
    out = mean(squared, axes if len(axes) > 1 else axes[0], dtype or x.dtype, keepdims)
    return out


def softmax(x: NkiTensor, axis=-1, dtype=None) -> NkiTensor:
    """exp(x - max) / sum, along the (trailing) free axis: the fused ScalarE form."""
    ctx = tracing.current()
    _on_chip(x, "x")
    if _axes(x, axis) != (x.ndim - 1,):
        raise ctx.error("softmax.axis", f"nl.softmax reduces the last axis of an on-chip tile, got axis={axis}")
    rows = x.shape[0]
    neg_max = reduce("maximum", x, -1, "float32", keepdims=True, negate=True)
    exps = ndarray(x.shape, "float32", "sbuf")
    total = ndarray((rows, 1), "float32", "sbuf")
    ctx.emit(Activation(dst=exps.access_pattern(), src=x.access_pattern(), func="exp",
                        bias=neg_max.reshape((rows, 1)).access_pattern(), reduce_op="add", reduce_res=total.access_pattern()))
    inv = ndarray((rows, 1), "float32", "sbuf")
    ctx.emit(Reciprocal(dst=inv.access_pattern(), src=total.access_pattern()))
    out = ndarray(x.shape, _result_dtype(dtype, x), "sbuf")
    ctx.emit(TensorScalar(dst=out.access_pattern(), src=exps.access_pattern(), op0="multiply", operand0=inv.access_pattern()))
    return out


def rms_norm(x: NkiTensor, w: NkiTensor, axis, n, epsilon: float = 1e-6, dtype=None, compute_dtype=None) -> NkiTensor:
    """x * rsqrt(mean(x^2) + eps) * w, normalizing the last axis; ``n`` is the element count."""
    ctx = tracing.current()
    _on_chip(x, "x")
    rows = x.shape[0]
    squares = ndarray(x.shape, "float32", "sbuf")
    sum_sq = ndarray((rows, 1), "float32", "sbuf")
    ctx.emit(Activation(dst=squares.access_pattern(), src=x.access_pattern(), func="square", reduce_op="add",
                        reduce_res=sum_sq.access_pattern()))
    inv_rms = ndarray((rows, 1), "float32", "sbuf")
    ctx.emit(TensorScalar(dst=inv_rms.access_pattern(), src=sum_sq.access_pattern(), op0="multiply", operand0=1.0 / n,
                          op1="add", operand1=float(epsilon)))
    ctx.emit(Activation(dst=inv_rms.access_pattern(), src=inv_rms.access_pattern(), func="rsqrt"))
    if w.buffer not in ON_CHIP:
        w = load(w)
    w_tile = w if w.shape[0] == rows else broadcast_partitions(w if w.ndim > 1 else w.reshape((1, w.size)), rows)
    out = ndarray(x.shape, _result_dtype(dtype, x), "sbuf")
    ctx.emit(ScalarTensorTensor(dst=out.access_pattern(), src=x.access_pattern(), op0="multiply",
                                operand0=inv_rms.access_pattern(), op1="multiply",
                                in1=broadcast_view(w_tile, x.shape).access_pattern() if w_tile.shape != x.shape else w_tile.access_pattern()))
    return out


@folds_constant_mask
def where(condition: NkiTensor, x, y, dtype=None, mask: Mask | None = None) -> NkiTensor:
    ctx = tracing.current()
    _on_chip(condition, "condition")
    like = x if isinstance(x, NkiTensor) else condition
    out_dtype = _result_dtype(dtype, like)
    # Operands broadcast like every elementwise op (a [1, F] tile across partitions through
    # TensorE): select-and-scatter kernels pick from a one-partition row per partition.
    if isinstance(x, NkiTensor):
        condition, x = _align(condition, x)
    if isinstance(y, NkiTensor):
        condition, y = _align(condition, y)
        if isinstance(x, NkiTensor) and x.shape != condition.shape:
            x, _ = _align(x, condition)
    out = ndarray(condition.shape, out_dtype, "sbuf")
    on_true = x if isinstance(x, NkiTensor) else full(condition.shape, x, out.dtype)
    on_false = y.access_pattern() if isinstance(y, NkiTensor) else float(y)
    ctx.emit(Select(dst=out.access_pattern(), predicate=condition.access_pattern(), on_true=on_true.access_pattern(),
                    on_false=on_false))
    return out
