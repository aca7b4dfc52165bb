"""The ops fuzz programs are made of.

An op is a source template over its tensor operands (``{a}``, ``{b}``, ``{c}``) and parameters
drawn for the operands at hand (``params(draw, *operands)`` returns JSON values; see
``render``). Templates are evaluated as they read, so a program prints as runnable code. Each op
names the check its result gets (``tnx_fuzz_checks.CHECKS``: ``exact`` unless the result is
rounded differently by a correct implementation) and says whether it writes into an existing
tensor (in-place, ``out=``, item assignment), which the comparison needs to know.

``when`` says which operands an op is usually given (those CPU accepts, mostly); programs also
apply ops to other operands now and then, so errors are compared too.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from hypothesis import strategies as st
from tnx_fuzz_values import DTYPES, dtype_source, is_float, is_int, literal, scalars

# --- what templates see ----------------------------------------------------------------------------


def setitem(t, key, value):
    t[key] = value
    return t


class _Key:
    """``K[1:3, ::2]`` is the key ``(slice(1, 3), slice(None, None, 2))``."""

    def __getitem__(self, key):
        return key


# Templates are evaluated in this namespace, with the program's values and ``dev`` as locals.
NAMESPACE = {"torch": torch, "inf": math.inf, "nan": math.nan, "setitem": setitem, "K": _Key()}


# --- parameters ------------------------------------------------------------------------------------


def render(value) -> str:
    """Source text of a parameter. Tagged dicts: {"dtype": name}, {"index": values, "shape": s}
    (an int64 tensor literal on the program's device ``dev``), {"key": [...]} (an indexing key:
    ints, None, "..." and [start, stop, step] slices), {"src": text}."""
    if isinstance(value, dict):
        if "dtype" in value:
            return dtype_source(DTYPES[value["dtype"]])
        if "index" in value:
            return f"torch.tensor({literal(value['index'])}, dtype=torch.int64, device=dev).reshape({literal(value['shape'])})"
        if "key" in value:
            return ", ".join(_key_item(k) for k in value["key"]) or "()"  # K[...] in the namespace makes it a value
        if "src" in value:
            return value["src"]
        raise ValueError(f"unknown parameter {value!r}")
    return literal(value)


def _key_item(item) -> str:
    if item == "...":
        return "..."
    if isinstance(item, list):
        start, stop, step = (("" if v is None else str(v)) for v in item)
        return f"{start}:{stop}" + (f":{step}" if step else "")
    return literal(item)


def rarely(draw, one_in: int) -> bool:
    """True about once in ``one_in`` draws. The chosen value is not an end of the range:
    hypothesis draws the ends of a range far more often than the rest (0 in about 1 of 40 draws
    whatever the range), which made every "now and then" several times more frequent."""
    return draw(st.integers(0, one_in - 1)) == one_in // 2


def dim(draw, x: torch.Tensor, bad: bool = True) -> int:
    """A dimension of ``x`` (negative ones too); now and then one out of range."""
    n = max(x.dim(), 1)
    if bad and rarely(draw, 30):
        return draw(st.sampled_from([n, -n - 1]))
    return draw(st.integers(-n, n - 1))


def dims(draw, x: torch.Tensor) -> list[int]:
    n = x.dim()
    if n == 0:
        return draw(st.sampled_from([[], [0]]))
    return draw(st.lists(st.integers(-n, n - 1), min_size=1, max_size=n, unique_by=lambda d: d % n))


def size_of(x: torch.Tensor, d: int) -> int:
    """The size of dimension ``d`` (1 for a 0-d tensor or a dimension out of range)."""
    return x.shape[d] if x.dim() and -x.dim() <= d < x.dim() else 1


def index_values(draw, n: int, count: int, low: int = 0, unique: bool = False) -> list[int]:
    """``count`` indices into a dimension of size ``n`` from ``low`` (negative: from the end);
    now and then one out of range (an error both sides must raise)."""
    if unique:
        return _shuffled(draw, n)[:count]
    if n == 0 or rarely(draw, 20):
        return draw(st.lists(st.sampled_from([n, n + 3, -n - 1]), min_size=count, max_size=count))
    return draw(st.lists(st.integers(max(low, -n), n - 1), min_size=count, max_size=count))


def _shuffled(draw, n: int) -> list[int]:
    """range(n) in a random order (from one drawn seed: drawing a permutation of 130 elements
    element by element makes an example too big for hypothesis)."""
    order = list(range(n))
    random.Random(draw(st.integers(0, 2 ** 32 - 1))).shuffle(order)
    return order


def index_param(values: list[int], shape) -> dict:
    return {"index": values, "shape": list(shape)}


def scalar_for(draw, x: torch.Tensor):
    """A Python scalar for an op with ``x``: mostly of its own kind, sometimes of another."""
    dtype = x.dtype if not rarely(draw, 6) else draw(st.sampled_from([torch.float32, torch.int64, torch.bool]))
    return draw(scalars(dtype))


def small_int(draw, lo: int = -3, hi: int = 3) -> int:
    return draw(st.integers(lo, hi))


def factor_shape(draw, x: torch.Tensor) -> list[int]:
    """A shape with ``x.numel()`` elements (one -1 sometimes), or now and then a wrong one."""
    n = x.numel()
    if rarely(draw, 20):
        return [n + 1]
    parts = []
    rest = n
    for _ in range(draw(st.integers(0, 3))):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0] if rest else [0, 1, 2]
        d = draw(st.sampled_from(divisors))
        parts.append(d)
        rest = rest // d if d else rest
    parts.append(rest if n else draw(st.sampled_from([0, 1, 3])))
    if n and draw(st.booleans()):
        parts[draw(st.integers(0, len(parts) - 1))] = -1
    return parts


# --- operand kinds -----------------------------------------------------------------------------------


def numeric(*xs) -> bool:
    return all(x.dtype != torch.bool for x in xs)


def floating(*xs) -> bool:
    return all(is_float(x.dtype) for x in xs)


def integral(*xs) -> bool:
    return all(not is_float(x.dtype) for x in xs)


def signed_ints(*xs) -> bool:
    return all(is_int(x.dtype) for x in xs)


def anything(*xs) -> bool:
    return True


def ndim_at_least(k: int):
    return lambda *xs: xs[0].dim() >= k


def both(*preds):
    return lambda *xs: all(p(*xs) for p in preds)


# --- the table ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    name: str
    template: str
    arity: int = 1
    params: Callable | None = None
    when: Callable = anything
    check: str = "exact"
    writes: bool = False  # the result is an existing tensor (or a view of one) written by the op
    partner: str = "broadcast"  # how operands b, c are chosen (see tnx_fuzz_programs.pick_partner)
    meta: dict = field(default_factory=dict)

    def source(self, args: list[str], params: dict, template: str | None = None) -> str:
        names = dict(zip("abc", args))
        return (template or self.template).format(**names, **{k: render(v) for k, v in params.items()})

    def reval_source(self, args: list[str], params: dict) -> str:
        """The op without its ``out=`` (tolerances evaluate it again on float64 operands)."""
        return self.source(args, params, self.meta.get("reval"))


OPS: dict[str, Op] = {}


def op(name, template, **kw) -> None:
    assert name not in OPS, name
    OPS[name] = Op(name, template, **kw)


def _p(**fns):
    """params from per-name draws: each fn(draw, *operands) -> value."""
    return lambda draw, *xs: {k: fn(draw, *xs) for k, fn in fns.items()}


_dim = lambda draw, x, *_: dim(draw, x)  # noqa: E731
_kd = lambda draw, *_: draw(st.booleans())  # noqa: E731
_s = lambda draw, x, *_: scalar_for(draw, x)  # noqa: E731
_any_dtype = lambda draw, *_: {"dtype": draw(st.sampled_from(list(DTYPES)))}  # noqa: E731

# elementwise, tensor with tensor
for _name, _tpl, _when in [
    ("add", "{a} + {b}", anything), ("sub", "{a} - {b}", numeric), ("mul", "{a} * {b}", anything),
    ("div", "{a} / {b}", anything), ("floordiv", "{a} // {b}", numeric),
    ("div_floor", "torch.div({a}, {b}, rounding_mode='floor')", numeric),
    ("div_trunc", "torch.div({a}, {b}, rounding_mode='trunc')", numeric),
    ("remainder", "{a} % {b}", numeric), ("fmod", "torch.fmod({a}, {b})", numeric),
    ("maximum", "torch.maximum({a}, {b})", anything), ("minimum", "torch.minimum({a}, {b})", anything),
    ("fmax", "torch.fmax({a}, {b})", anything),
    ("eq", "{a} == {b}", anything), ("ne", "{a} != {b}", anything), ("lt", "{a} < {b}", anything),
    ("le", "{a} <= {b}", anything), ("gt", "{a} > {b}", anything), ("ge", "{a} >= {b}", anything),
    ("bitand", "{a} & {b}", integral), ("bitor", "{a} | {b}", integral), ("bitxor", "{a} ^ {b}", integral),
    ("logical_and", "torch.logical_and({a}, {b})", anything), ("logical_xor", "torch.logical_xor({a}, {b})", anything),
    ("copysign", "torch.copysign({a}, {b})", floating),
]:
    op(_name, _tpl, arity=2, when=_when, check="nan_sign" if _name == "copysign" else "exact")
op("add_alpha", "torch.add({a}, {b}, alpha={alpha})", arity=2, when=numeric, check="alpha",
   params=lambda draw, a, b, *_: {"alpha": draw(st.sampled_from([2, -1, 3])) if not is_float(a.dtype) or draw(st.booleans())
                              else draw(st.sampled_from([0.5, -1.5, 1e-3, 0.1, 1 / 3, 3.3, -2.5]))})
op("pow", "torch.pow({a}, {b})", arity=2, when=floating, check="pow")
op("where", "torch.where({c} != 0, {a}, {b})", arity=3)
op("where_cmp", "torch.where({a} > {s}, {a}, {b})", arity=2, params=_p(s=_s))

# elementwise, tensor with a Python scalar
for _name, _tpl, _when in [
    ("add_s", "{a} + {s}", anything), ("sub_s", "{a} - {s}", numeric), ("rsub_s", "{s} - {a}", numeric),
    ("mul_s", "{a} * {s}", anything), ("div_s", "{a} / {s}", anything), ("floordiv_s", "{a} // {s}", numeric),
    ("remainder_s", "{a} % {s}", numeric), ("fmod_s", "torch.fmod({a}, {s})", numeric),
    ("eq_s", "{a} == {s}", anything), ("ne_s", "{a} != {s}", anything), ("lt_s", "{a} < {s}", anything),
    ("le_s", "{a} <= {s}", anything), ("gt_s", "{a} > {s}", anything), ("ge_s", "{a} >= {s}", anything),
    ("bitand_s", "{a} & {s}", integral), ("bitxor_s", "{a} ^ {s}", integral),
]:
    op(_name, _tpl, when=_when, params=_p(s=_s))
op("pow_s", "{a} ** {p}", when=numeric, check="pow", params=_p(p=lambda draw, *_: draw(st.sampled_from([2, 3, 0, 1, 0.5, -1, 1.5, -2]))))
op("rpow_s", "{p} ** {a}", when=floating, check="pow", params=_p(p=lambda draw, *_: draw(st.sampled_from([2, 0.5, 10.0, 2.5]))))
op("shift_left", "{a} << {k}", when=signed_ints, params=_p(k=lambda draw, *_: draw(st.integers(0, 7))))
op("shift_right", "{a} >> {k}", when=signed_ints, params=_p(k=lambda draw, *_: draw(st.integers(0, 7))))
op("clamp", "{a}.clamp({lo}, {hi})", when=numeric, params=_p(lo=_s, hi=_s))
op("clamp_min", "{a}.clamp(min={lo})", when=numeric, params=_p(lo=_s))

# elementwise, one tensor
for _name, _tpl, _when, _check in [
    ("neg", "-{a}", numeric, "exact"), ("abs", "{a}.abs()", numeric, "exact"), ("sign", "{a}.sign()", anything, "exact"),
    ("square", "{a}.square()", numeric, "exact"), ("relu", "torch.relu({a})", numeric, "exact"),
    ("floor", "{a}.floor()", numeric, "exact"), ("ceil", "{a}.ceil()", numeric, "exact"),
    ("round", "{a}.round()", numeric, "exact"), ("trunc", "{a}.trunc()", numeric, "exact"),
    ("frac", "{a}.frac()", floating, "exact"), ("nan_to_num", "{a}.nan_to_num()", floating, "exact"),
    ("isnan", "{a}.isnan()", anything, "exact"), ("isinf", "{a}.isinf()", anything, "exact"),
    ("isfinite", "{a}.isfinite()", anything, "exact"), ("signbit", "{a}.signbit()", numeric, "nan_sign"),
    ("bitnot", "~{a}", integral, "exact"), ("logical_not", "torch.logical_not({a})", anything, "exact"),
    ("exp", "{a}.exp()", numeric, "ulp"), ("expm1", "{a}.expm1()", numeric, "ulp"), ("log", "{a}.log()", numeric, "ulp"),
    ("log1p", "{a}.log1p()", numeric, "ulp"), ("sqrt", "{a}.sqrt()", numeric, "ulp"), ("rsqrt", "{a}.rsqrt()", numeric, "ulp"),
    ("reciprocal", "{a}.reciprocal()", numeric, "ulp"), ("sigmoid", "{a}.sigmoid()", numeric, "ulp"),
    ("tanh", "{a}.tanh()", numeric, "ulp"), ("sin", "{a}.sin()", numeric, "argument"),
    ("gelu", "torch.nn.functional.gelu({a})", floating, "argument"), ("silu", "torch.nn.functional.silu({a})", floating, "ulp"),
]:
    op(_name, _tpl, when=_when, check=_check)

# casts (a float outside the target's range, or NaN/inf, cast to an integer is undefined in C++
# and in PyTorch: the program generator does not make such casts)
op("to", "{a}.to({dtype})", params=_p(dtype=_any_dtype), meta={"cast": "dtype"})
op("float", "{a}.float()", meta={"cast": "float32"})
op("long", "{a}.long()", meta={"cast": "int64"})
op("bool", "{a}.bool()")

# reductions
op("sum", "{a}.sum()", check="sum")
op("sum_dim", "{a}.sum({dim}, keepdim={kd})", check="sum", params=_p(dim=_dim, kd=_kd))
op("sum_dims", "{a}.sum({dims})", check="sum", params=_p(dims=lambda draw, x, *_: dims(draw, x)))
op("sum_dtype", "{a}.sum({dim}, dtype={dtype})", check="sum", params=_p(dim=_dim, dtype=_any_dtype), meta={"cast": "dtype"})
op("mean", "{a}.mean()", when=floating, check="mean")
op("mean_dim", "{a}.mean({dim}, keepdim={kd})", when=floating, check="mean", params=_p(dim=_dim, kd=_kd))
op("prod", "{a}.prod()", check="prod")
op("prod_dim", "{a}.prod({dim})", check="prod", params=_p(dim=_dim))
op("amax", "{a}.amax({dims}, keepdim={kd})", params=_p(dims=lambda draw, x, *_: dims(draw, x), kd=_kd))
op("amin", "{a}.amin({dim})", params=_p(dim=_dim))
op("max", "{a}.max()")
op("min", "{a}.min()")
op("max_dim", "{a}.max({dim}, keepdim={kd}).values", params=_p(dim=_dim, kd=_kd))
op("max_dim_i", "{a}.max({dim}).indices", params=_p(dim=_dim))
op("min_dim_i", "{a}.min({dim}, keepdim={kd}).indices", params=_p(dim=_dim, kd=_kd))
op("argmax", "{a}.argmax()", when=numeric)
op("argmax_dim", "{a}.argmax({dim}, keepdim={kd})", when=numeric, params=_p(dim=_dim, kd=_kd))
op("argmin_dim", "{a}.argmin({dim})", when=numeric, params=_p(dim=_dim))
op("any", "{a}.any()")
op("all_dim", "{a}.all({dim})", params=_p(dim=_dim))
op("count_nonzero", "torch.count_nonzero({a}, {dim})", params=_p(dim=_dim))
op("var", "{a}.var({dim}, correction={c}, keepdim={kd})", when=floating, check="var",
   params=_p(dim=_dim, c=lambda draw, *_: draw(st.sampled_from([0, 1])), kd=_kd))
op("std", "{a}.std({dim})", when=floating, check="std", params=_p(dim=_dim))
op("logsumexp", "{a}.logsumexp({dim})", when=floating, check="logsumexp", params=_p(dim=_dim))
op("cumsum", "{a}.cumsum({dim})", check="sum", params=_p(dim=_dim))
op("cumsum_dtype", "{a}.cumsum({dim}, dtype={dtype})", check="sum", params=_p(dim=_dim, dtype=_any_dtype),
   meta={"cast": "dtype"})
op("cumprod", "{a}.cumprod({dim})", check="prod", params=_p(dim=_dim))
op("sort", "{a}.sort(dim={dim}, descending={desc}, stable=True).values", params=_p(dim=_dim, desc=_kd))
op("sort_i", "{a}.sort(dim={dim}, descending={desc}, stable=True).indices", params=_p(dim=_dim, desc=_kd))
op("argsort", "{a}.argsort(dim={dim}, stable=True)", params=_p(dim=_dim))
def _topk_params(draw, a, *_):
    d = dim(draw, a)
    return {"k": draw(st.integers(0, size_of(a, d) + rarely(draw, 10))), "dim": d, "largest": draw(st.booleans())}


op("topk", "{a}.topk({k}, {dim}, largest={largest}).values", params=_topk_params)
op("median", "{a}.median()")
op("unique", "torch.unique({a})")

# data movement
op("cat", "torch.cat([{a}, {b}], {dim})", arity=2, partner="cat", params=lambda draw, a, b, *_: {"dim": dim(draw, a)})
op("stack", "torch.stack([{a}, {b}], {dim})", arity=2, partner="same",
   params=lambda draw, a, b, *_: {"dim": draw(st.integers(-a.dim() - 1, a.dim()))})
op("roll", "{a}.roll({shift}, {dim})", params=_p(shift=lambda draw, *_: small_int(draw, -7, 7), dim=_dim))
op("roll_flat", "{a}.roll({shift})", params=_p(shift=lambda draw, *_: small_int(draw, -7, 7)))
op("flip", "{a}.flip({dims})", params=_p(dims=lambda draw, x, *_: dims(draw, x)))


def _gather_params(draw, a, *_):
    d = dim(draw, a, bad=False) if a.dim() else 0
    shape = [draw(st.integers(0, n)) if i != (d % max(a.dim(), 1)) else draw(st.integers(0, 4))
             for i, n in enumerate(a.shape)]
    count = math.prod(shape)
    return {"dim": d, "index": index_param(index_values(draw, size_of(a, d), count), shape)}


op("gather", "{a}.gather({dim}, {index})", params=_gather_params)


def _index_select_params(draw, a, *_):
    d = dim(draw, a, bad=False)
    count = draw(st.integers(0, 5))
    return {"dim": d, "index": index_param(index_values(draw, size_of(a, d), count), [count])}


op("index_select", "{a}.index_select({dim}, {index})", params=_index_select_params)
def _flat_index_params(n: int):
    """An index list into a dimension of size n(a) (negative indices count from the end)."""
    def params(draw, a, *_):
        size, count = n(a), draw(st.integers(0, 5))
        return {"index": index_param(index_values(draw, size, count, low=-size), [count])}
    return params


op("take", "torch.take({a}, {index})", params=_flat_index_params(lambda a: a.numel()))
op("adv_index", "{a}[{index}]", when=ndim_at_least(1), params=_flat_index_params(lambda a: size_of(a, 0)))
op("mask_index", "{a}[{a} > {s}]", params=_p(s=_s))
op("masked_select", "torch.masked_select({a}, {b} != 0)", arity=2)


def _scatter_params(draw, a, src=None, *_):
    """An index with no repeated target (the result of scatter with repeats is unspecified)."""
    if a.dim() == 0:
        return {"dim": 0, "index": index_param([0], [])}
    d = dim(draw, a, bad=False)
    limits = [min(n, src.shape[i]) if src is not None and src.dim() == a.dim() else n for i, n in enumerate(a.shape)]
    shape = [draw(st.integers(0, n)) for n in limits]
    axis = d % max(a.dim(), 1)
    index = torch.zeros(shape, dtype=torch.int64)
    if index.numel():
        rows = index.movedim(axis, -1).reshape(-1, shape[axis])
        for r in range(rows.shape[0]):
            rows[r] = torch.tensor(_shuffled(draw, a.shape[axis])[: shape[axis]])
        index = rows.reshape([s for i, s in enumerate(shape) if i != axis] + [shape[axis]]).movedim(-1, axis)
    return {"dim": d, "index": index_param(index.flatten().tolist(), shape)}


op("scatter", "{a}.scatter({dim}, {index}, {b})", arity=2, partner="same_dtype", params=_scatter_params)
op("scatter_value", "{a}.scatter({dim}, {index}, {s})", params=lambda draw, a, *_: _scatter_params(draw, a) | {"s": scalar_for(draw, a)})
op("scatter_add", "{a}.scatter_add({dim}, {index}, {b})", arity=2, partner="same_dtype", params=_scatter_params)


def _combining_index_params(draw, a, src=None, *_):
    """An index for scatter_reduce: repeated targets too (the op combines them), no larger than
    ``src`` in any dim nor than ``a`` outside ``dim``."""
    if a.dim() == 0:
        return {"dim": 0, "index": index_param([0], [])}
    d = dim(draw, a, bad=False)
    axis = d % a.dim()
    fits = src is not None and src.dim() == a.dim()
    limits = [min(n, src.shape[i]) if fits else n for i, n in enumerate(a.shape)]
    if fits:
        limits[axis] = src.shape[axis]
    shape = [draw(st.integers(0, n)) for n in limits]
    return {"dim": d, "index": index_param(index_values(draw, a.shape[axis], math.prod(shape)), shape)}


def _reduce_params(reduces, index_params):
    return lambda draw, a, *rest: index_params(draw, a, *rest) | {"reduce": draw(st.sampled_from(reduces)),
                                                                   "incl": draw(st.booleans())}


# combining scatters: sum and prod get their accumulation's tolerance (repeats combine in any order);
# amax/amin are exact; mean only of integers (a floor division, exact; float means round per count).
# index_reduce/index_add take a's own rows, flipped, as the source (its shape always fits).
_SOURCE_ROWS = "{a}.flip({dim}).index_select({dim}, {index})"
for _suffix, _reduces, _check, _when in [("sum", ["sum"], "sum", anything), ("prod", ["prod"], "prod", anything),
                                         ("minmax", ["amax", "amin"], "exact", anything), ("mean", ["mean"], "exact", integral)]:
    op(f"scatter_reduce_{_suffix}", "{a}.scatter_reduce({dim}, {index}, {b}, {reduce}, include_self={incl})", arity=2,
       partner="same_dtype", when=_when, check=_check, params=_reduce_params(_reduces, _combining_index_params))
    if _suffix != "sum":  # index_reduce has no sum: index_add is it
        op(f"index_reduce_{_suffix}", "{a}.index_reduce({dim}, {index}, " + _SOURCE_ROWS + ", {reduce}, include_self={incl})",
           when=both(_when, ndim_at_least(1)), check=_check, params=_reduce_params(_reduces, _index_select_params))
# alpha > 0: the sum check's bound evaluates the op on |operands| and on ones
op("index_add", "{a}.index_add({dim}, {index}, " + _SOURCE_ROWS + ", alpha={alpha})", when=ndim_at_least(1), check="sum",
   params=lambda draw, a, *_: _index_select_params(draw, a) | {"alpha": draw(st.sampled_from([1, 2] if not is_float(a.dtype) else [1, 0.5, 2.0]))})


def _index_put_params(draw, a, *_, unique=True):
    n = size_of(a, 0)
    count = draw(st.integers(0, min(n, 4) if unique else 5))
    values = index_values(draw, n, count, unique=unique)
    return {"index": index_param(values, [count]), "v": scalar_for(draw, a), "dtype": {"dtype": _name_of(a.dtype)}}


def _name_of(dtype):
    return next(k for k, v in DTYPES.items() if v == dtype)


op("index_put", "{a}.index_put(({index},), torch.tensor({v}, dtype={dtype}, device=dev))", when=ndim_at_least(1),
   params=_index_put_params)
op("index_put_acc", "{a}.index_put(({index},), torch.tensor({v}, dtype={dtype}, device=dev), accumulate=True)",
   when=both(ndim_at_least(1), integral), params=lambda draw, a, *_: _index_put_params(draw, a, unique=False))
op("masked_fill", "{a}.masked_fill({a} > {s}, {v})", params=_p(s=_s, v=_s))
op("masked_fill_b", "{a}.masked_fill({b} != 0, {v})", arity=2, params=lambda draw, a, b, *_: {"v": scalar_for(draw, a)})
def _narrow_params(draw, a, *_):
    d = dim(draw, a, bad=False)
    n = size_of(a, d)
    start = draw(st.integers(0, n))
    return {"dim": d, "start": start, "length": draw(st.integers(0, n - start + 1))}


op("narrow", "{a}.narrow({dim}, {start}, {length})", when=ndim_at_least(1), params=_narrow_params)


def _key(draw, a, *_):
    key = []
    for n in a.shape[: draw(st.integers(0, a.dim()))]:
        kind = draw(st.sampled_from(["slice", "slice", "int", "all", "new"]))
        if kind == "int" and n:
            key.append(draw(st.integers(-n, n - 1)))
        elif kind == "new":
            key.append(None)
        elif kind == "slice":
            start, stop = draw(st.integers(-n - 1, n + 1)), draw(st.sampled_from([None, 0, 1, n, n + 2, -1]))
            key.append([start, stop, draw(st.sampled_from([None, 1, 2, 3]))])
        else:
            key.append([None, None, None])
    if rarely(draw, 5):
        key.insert(0, "...")
    return {"key": {"key": key}}


op("getitem", "{a}[{key}]", params=_key)
op("transpose", "{a}.transpose({d0}, {d1})", params=_p(d0=_dim, d1=_dim))
op("t", "{a}.t()")
op("permute", "{a}.permute({perm})", params=lambda draw, a, *_: {"perm": draw(st.permutations(list(range(a.dim()))))})
op("movedim", "torch.movedim({a}, {d0}, {d1})", params=_p(d0=_dim, d1=_dim))
op("reshape", "{a}.reshape({shape})", params=lambda draw, a, *_: {"shape": factor_shape(draw, a)})
op("view", "{a}.view({shape})", params=lambda draw, a, *_: {"shape": factor_shape(draw, a)})
op("view_dtype", "{a}.view({dtype})", params=_p(dtype=_any_dtype))
op("flatten", "{a}.flatten()")
op("squeeze", "{a}.squeeze()")
op("squeeze_dim", "{a}.squeeze({dim})", params=_p(dim=_dim))
op("unsqueeze", "{a}.unsqueeze({dim})", params=lambda draw, a, *_: {"dim": draw(st.integers(-a.dim() - 1, a.dim()))})
op("expand", "{a}.expand({shape})",
   params=lambda draw, a, *_: {"shape": [draw(st.integers(0, 3))] * draw(st.integers(0, 1))
                           + [(draw(st.sampled_from([n, 3, 2, -1])) if n == 1 else draw(st.sampled_from([n, n, -1, n + 1])))
                              for n in a.shape]})
op("repeat", "{a}.repeat({reps})",
   params=lambda draw, a, *_: {"reps": draw(st.lists(st.integers(0, 3), min_size=a.dim(), max_size=a.dim() + 1))})
op("contiguous", "{a}.contiguous()")
op("clone", "{a}.clone()")
op("tril", "{a}.tril({k})", when=ndim_at_least(2), params=_p(k=lambda draw, *_: small_int(draw)))
op("triu", "{a}.triu({k})", when=ndim_at_least(2), params=_p(k=lambda draw, *_: small_int(draw)))
def _diagonal_params(draw, a, *_):
    d0, d1 = draw(st.permutations(list(range(a.dim()))))[:2] if a.dim() >= 2 else (0, 1)
    return {"offset": small_int(draw), "d0": d0, "d1": d1}


op("diagonal", "{a}.diagonal({offset}, {d0}, {d1})", when=ndim_at_least(2), params=_diagonal_params)

# matmul
op("gram", "{a} @ {a}.mT", when=both(ndim_at_least(2), numeric), check="sum")
op("matmul", "{a} @ {b}", arity=2, partner="matmul", when=both(ndim_at_least(1), numeric), check="sum")
op("mm", "torch.mm({a}, {a}.t())", when=both(lambda a: a.dim() == 2, numeric), check="sum")
op("bmm", "torch.bmm({a}, {a}.mT)", when=both(lambda a: a.dim() == 3, numeric), check="sum")
op("mv", "torch.mv({a}, {a}[0])", when=both(lambda a: a.dim() == 2, numeric), check="sum")
op("einsum", "torch.einsum('...ij,...kj->...ik', {a}, {a})", when=both(ndim_at_least(2), numeric), check="sum")

# softmax
op("softmax", "{a}.softmax({dim})", when=floating, check="softmax", params=_p(dim=_dim))
op("softmax_f32", "{a}.softmax({dim}, dtype=torch.float32)", check="softmax", params=_p(dim=_dim))
op("log_softmax", "torch.log_softmax({a}, {dim})", when=floating, check="log_softmax", params=_p(dim=_dim))

def _out_params(plain: str, params):
    """Parameters of an op with ``out=torch.empty(n, dtype=...)``: the dtype of the op's result
    mostly (another one is a casting error, or a cast)."""
    def out_params(draw, *xs):
        drawn = params(draw, *xs) if params else {}
        names = [f"r{i}" for i in range(len(xs))]
        try:
            dtype = eval(plain.format(**dict(zip("abc", names)), **{k: render(v) for k, v in drawn.items()}),  # noqa: S307
                         NAMESPACE, dict(zip(names, xs), dev=torch.device("cpu"))).dtype
        except Exception:  # noqa: BLE001 - the op fails anyway
            dtype = xs[0].dtype
        if rarely(draw, 8):
            dtype = DTYPES[draw(st.sampled_from(list(DTYPES)))]
        return drawn | {"n": draw(st.sampled_from([0, 0, 1, 3])), "out_dtype": {"dtype": _name_of(dtype)}}
    return out_params


# out= (into a new tensor, resized by the op, or into an existing one, which the op writes)
for _name, _tpl, _arity, _check, _params in [
    ("add", "torch.add({a}, {b}, out={o})", 2, "exact", None),
    ("mul", "torch.mul({a}, {b}, out={o})", 2, "exact", None),
    ("remainder", "torch.remainder({a}, {b}, out={o})", 2, "exact", None),
    ("floor_divide", "torch.floor_divide({a}, {b}, out={o})", 2, "exact", None),
    ("maximum", "torch.maximum({a}, {b}, out={o})", 2, "exact", None),
    ("eq", "torch.eq({a}, {b}, out={o})", 2, "exact", None),
    ("neg", "torch.neg({a}, out={o})", 1, "exact", None),
    ("exp", "torch.exp({a}, out={o})", 1, "ulp", None),
    ("sum", "torch.sum({a}, {dim}, out={o})", 1, "sum", _p(dim=_dim)),
    ("cumsum", "torch.cumsum({a}, {dim}, out={o})", 1, "sum", _p(dim=_dim)),
    ("argmax", "torch.argmax({a}, {dim}, out={o})", 1, "exact", _p(dim=_dim)),
    ("index_select", "torch.index_select({a}, {dim}, {index}, out={o})", 1, "exact", _index_select_params),
    ("cat", "torch.cat([{a}, {b}], {dim}, out={o})", 2, "exact", lambda draw, a, b, *_: {"dim": dim(draw, a)}),
    ("matmul", "torch.matmul({a}, {b}, out={o})", 2, "sum", None),
    ("where", "torch.where({a} > 0, {a}, {b}, out={o})", 2, "exact", None),
]:
    _plain = {"reval": _tpl.replace(", out={o}", "")}
    op(f"{_name}_out", _tpl.replace("{o}", "torch.empty({n}, dtype={out_dtype}, device=dev)"), arity=_arity, check=_check,
       partner="matmul" if _name == "matmul" else "cat" if _name == "cat" else "broadcast", meta=_plain,
       params=_out_params(_plain["reval"], _params))
    op(f"{_name}_out_into", _tpl.replace("{o}", "{c}" if _arity == 2 else "{b}"), arity=_arity + 1, check=_check, writes=True,
       partner="into", params=_params, meta=_plain)

# in place
for _name, _tpl, _arity, _when, _check, _params in [
    ("add_", "{a}.add_({b})", 2, anything, "exact", None),
    ("sub_", "{a}.sub_({b})", 2, numeric, "exact", None),
    ("mul_", "{a}.mul_({b})", 2, anything, "exact", None),
    ("div_", "{a}.div_({b})", 2, floating, "exact", None),
    ("floor_divide_", "{a}.floor_divide_({b})", 2, numeric, "exact", None),
    ("bitand_", "{a}.bitwise_and_({b})", 2, integral, "exact", None),
    ("copy_", "{a}.copy_({b})", 2, anything, "exact", None),
    ("add_s_", "{a}.add_({s})", 1, anything, "exact", _p(s=_s)),
    ("mul_s_", "{a}.mul_({s})", 1, anything, "exact", _p(s=_s)),
    ("remainder_s_", "{a}.remainder_({s})", 1, numeric, "exact", _p(s=_s)),
    ("clamp_", "{a}.clamp_({lo}, {hi})", 1, numeric, "exact", _p(lo=_s, hi=_s)),
    ("neg_", "{a}.neg_()", 1, numeric, "exact", None),
    ("abs_", "{a}.abs_()", 1, numeric, "exact", None),
    ("relu_", "{a}.relu_()", 1, numeric, "exact", None),
    ("exp_", "{a}.exp_()", 1, floating, "ulp", None),
    ("pow2_", "{a}.pow_(2)", 1, numeric, "exact", None),
    ("cumsum_", "{a}.cumsum_({dim})", 1, numeric, "sum", _p(dim=_dim)),
    ("fill_", "{a}.fill_({s})", 1, anything, "exact", _p(s=_s)),
    ("zero_", "{a}.zero_()", 1, anything, "exact", None),
    ("masked_fill_", "{a}.masked_fill_({a} > {s}, {v})", 1, anything, "exact", _p(s=_s, v=_s)),
    ("index_put_", "{a}.index_put_(({index},), torch.tensor({v}, dtype={dtype}, device=dev))", 1, ndim_at_least(1), "exact",
     _index_put_params),
    ("scatter_", "{a}.scatter_({dim}, {index}, {b})", 2, anything, "exact", _scatter_params),
    ("setitem", "setitem({a}, K[{key}], {s})", 1, anything, "exact", lambda draw, a, *_: _key(draw, a) | {"s": scalar_for(draw, a)}),
    ("setitem_t", "setitem({a}, K[{key}], {b})", 2, anything, "exact", _key),
]:
    op(_name, _tpl, arity=_arity, when=_when, check=_check, writes=True, params=_params,
       partner="same_dtype" if _name == "scatter_" else "to_a")

# The program generator makes these rarer: they mostly end a program in an error.
FUSSY = {"view", "view_dtype", "take", "masked_select", "mask_index", "unique", "median"}
