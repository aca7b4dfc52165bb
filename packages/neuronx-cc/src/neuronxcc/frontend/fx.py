"""FX graphs -> StableHLO (torch-mlir) -> graph, with the fixes torch.compile graphs need.

The graph is imported to the Torch dialect here; torch-mlir's pass pipeline then runs in the
bounded worker of ``pipeline`` (a crash or a runaway is ``LoweringStopped``, not a dead process),
after ``fx_rewrites`` rewrote the patterns it is known to mishandle.

    graph = from_fx(gm, example_inputs)          # a dynamo, AOTAutograd forward or backward graph
    graph.none_outputs                           # positions of the gm's ``None`` outputs, dropped

The three fixes (see the torch-mlir reference note):

1. **None outputs.** Backward graphs return ``None`` for inputs that need no gradient; torch-mlir
   cannot lower a ``!torch.none`` result. They are dropped for the import (the caller's graph
   module is restored afterwards) and their positions reported in ``graph.none_outputs`` so a
   runtime can re-insert them (``insert_none_outputs``).
2. **Decompositions.** Graphs that are not plain ATen (dynamo graphs) or that keep ops torch-mlir
   cannot lower (``threshold_backward`` keeps an int scalar) are re-traced with ``make_fx`` and
   torch-mlir's own decomposition table, under the example inputs' fake mode.
3. **SDPA.** Re-tracing happens under ``sdpa_kernel(SDPBackend.MATH)`` so attention decomposes into
   matmul/softmax. A backward graph that already holds the fused CPU kernel's backward cannot be
   fixed here: that raises ``UnsupportedOp`` saying to trace under ``sdpa_math()``
   (AOTAutograd backends: wrap the compiled call, and pass ``decompositions()`` to ``aot_autograd``).
"""

from __future__ import annotations

import contextlib
import io
import math
import operator
import re

from neuron_sim.graph import Graph

from . import fx_amp, fx_convolution, fx_foreach, fx_fused_optimizers, fx_graph_ops, fx_histc, fx_pooling, fx_rewrites, pipeline
from .errors import MissingDependency, UnsupportedOp
from .mlir import describe_location
from .pipeline_worker import PipelineError
from .stablehlo import import_module


def _torch():
    try:
        import torch
        from torch_mlir import fx, ir
        from torch_mlir.dialects import torch as torch_dialect
        from torch_mlir.extras.fx_importer import FxImporter
    except ImportError as err:
        raise MissingDependency("importing FX graphs", err) from None
    return torch, fx, ir, torch_dialect, FxImporter


def decompositions() -> dict:
    """torch-mlir's decomposition table, for ``aot_autograd(decompositions=...)``, plus our
    corrections of ops torch-mlir lowers with other semantics than PyTorch's."""
    torch = _torch()[0]
    from torch_mlir.extras.fx_decomp_util import get_decomposition_table

    table = dict(get_decomposition_table())
    aten = torch.ops.aten
    # PyTorch's own decompositions of ops torch-mlir has no StableHLO lowering for, into ops it has.
    from torch._decomp import get_decompositions

    table.update(get_decompositions([aten.addmv, aten.elu, aten.logaddexp, aten.linalg_vector_norm]))
    # Ours where PyTorch's decompose into prims torch-mlir cannot import (prims.rev, prims.hypot...).
    table[aten.flip.default] = _flip
    table[aten.roll.default] = _roll
    table[aten.round.decimals] = _round_decimals
    table[aten.remainder.Tensor] = _remainder
    table[aten.remainder.Scalar] = _remainder
    table[aten.remainder.Scalar_Tensor] = _remainder
    table[aten.fmod.Scalar] = _fmod_scalar
    table[aten.copysign.Scalar] = _copysign_scalar
    table[aten.floor_divide.default] = _floor_divide
    table[aten.floor_divide.Scalar] = _floor_divide
    table[aten.div.Tensor_mode] = _div_mode
    table[aten.div.Scalar_mode] = _div_mode
    table[aten.trunc.default] = _trunc
    table[aten.take.default] = _take
    table[aten.cumprod.default] = _cumprod
    table[aten.scatter_reduce.two] = _scatter_reduce
    table[aten.index_reduce.default] = _index_reduce
    table[aten.isinf.default] = _isinf
    table[aten.histc.default] = fx_histc.histc  # integer inputs too, as CUDA's kernel takes them
    table[aten.topk.default] = _topk_unsorted
    table[aten.native_layer_norm.default] = _layer_norm
    for op in (aten.index.Tensor, aten.index_put_.default, aten._index_put_impl_.default):
        table[op] = _byte_masks_as_bool(op)
    for op in (aten.index_put.default, aten._index_put_impl.default):
        table[op] = _mask_put_as_where(op)
    for name, target in (("__rshift__", aten.bitwise_right_shift.Tensor), ("__lshift__", aten.bitwise_left_shift.Tensor),
                         ("bitwise_right_shift", aten.bitwise_right_shift.Tensor),
                         ("bitwise_left_shift", aten.bitwise_left_shift.Tensor)):
        overload = "Scalar" if name.startswith("__") else "Tensor_Scalar"
        table[getattr(getattr(aten, name), overload)] = _shift_by_a_number(target)
    table[aten.bitwise_xor.Scalar] = _bitwise_with_a_number(aten.bitwise_xor.Tensor)
    table[aten.bitwise_or.Scalar] = _bitwise_with_a_number(aten.bitwise_or.Tensor)
    # torch-mlir lowers these to stablehlo.convolution, which the graph IR has no form for
    table[aten.convolution.default] = fx_convolution.convolution
    table[aten.convolution_backward.default] = fx_convolution.convolution_backward
    table.update(fx_foreach.foreach_decompositions(torch))  # one graph per call over a list of tensors
    table.update(fx_fused_optimizers.fused_optimizer_decompositions(torch))  # optim's fused=True
    table.update(fx_amp.amp_decompositions(torch))  # GradScaler's unscale and scale update
    # torch-mlir lowers pooling to stablehlo.reduce_window (no graph form) and has no lowering of
    # the pooling and upsampling backwards
    table.update(fx_pooling.table())
    return table


# scatter_reduce's amax/amin/prod compare every index with every target position (a dense mask):
# larger problems are not decomposed (torch-mlir refuses them: eager mode runs them on CPU).
SCATTER_REDUCE_DENSE_MAX = 1 << 22


def _scatter_reduce(self, dim, index, src, reduce, *, include_self=True):
    """torch-mlir cannot lower scatter_reduce. ``sum`` and ``mean`` are scatter-adds (of the values
    and of ones: the count); ``amax``/``amin``/``prod`` reduce, for each target position k along
    ``dim``, the values whose index is k (a mask of index == k, so NaN propagates and integers are
    exact as the reduction is). Positions no index names keep ``self``; ``include_self=False``
    leaves ``self`` out of the named ones. Integer means round down, as CPU's."""
    torch = _torch()[0]
    if self.dim() == 0 or index.numel() == 0:
        return NotImplemented
    dim = dim % self.dim()
    src = src[tuple(slice(0, n) for n in index.shape)]  # only the index's extent is scattered
    count = torch.zeros_like(self, dtype=torch.int32 if not self.dtype.is_floating_point else self.dtype)
    count = count.scatter_add(dim, index, torch.ones_like(src, dtype=count.dtype))
    named = count > 0
    if reduce in ("sum", "mean"):
        base = self if include_self else torch.where(named, torch.zeros_like(self), self)
        total = base.scatter_add(dim, index, src)
        if reduce == "sum":
            return total
        count = (count + 1) if include_self else torch.where(named, count, torch.ones_like(count))
        if self.dtype.is_floating_point:
            return total / count.to(self.dtype)
        return torch.div(total, count.to(self.dtype), rounding_mode="floor")
    if reduce not in ("amax", "amin", "prod") or index.numel() * self.shape[dim] > SCATTER_REDUCE_DENSE_MAX:
        return NotImplemented
    n = self.shape[dim]
    if self.dtype.is_floating_point:
        identity = {"amax": float("-inf"), "amin": float("inf"), "prod": 1.0}[reduce]
    else:
        info = torch.iinfo(self.dtype) if self.dtype != torch.bool else None
        identity = {"amax": info.min if info else False, "amin": info.max if info else True, "prod": 1}[reduce]
    positions = torch.arange(n, device=self.device).reshape([n if k == dim else 1 for k in range(self.dim() + 1)])
    mask = index.unsqueeze(dim) == positions  # [..., n, m, ...]: value j goes to position k
    values = torch.where(mask, src.unsqueeze(dim), torch.full((), identity, dtype=self.dtype, device=self.device))
    if reduce == "amax":
        reduced = values.amax(dim + 1)
    elif reduce == "amin":
        reduced = values.amin(dim + 1)
    else:
        reduced = values.prod(dim + 1, dtype=self.dtype)
    pads = []
    for k in reversed(range(self.dim())):  # index extents below self's in the other dims: identity there
        pads += [0, self.shape[k] - reduced.shape[k]]
    if any(pads):
        reduced = torch.nn.functional.pad(reduced, pads, value=identity)
    if include_self:
        combine = {"amax": torch.maximum, "amin": torch.minimum, "prod": torch.mul}[reduce]
        return torch.where(named, combine(self, reduced), self)
    return torch.where(named, reduced, self)


def _index_reduce(self, dim, index, source, reduce, *, include_self=True):
    """index_reduce is scatter_reduce with the index repeated along the other dims of ``source``."""
    if self.dim() == 0:
        return NotImplemented
    dim = dim % self.dim()
    full = index.reshape([-1 if k == dim else 1 for k in range(source.dim())]).expand(source.shape)
    return _scatter_reduce(self, dim, full, source, reduce, include_self=include_self)


def _cumprod(self, dim, *, dtype=None):
    """torch-mlir cannot lower cumprod: Hillis-Steele log-step products (``y[k] *= y[k - s]`` for
    s = 1, 2, 4, ...: a slice, a multiply and a concatenation each), in the result dtype - integer
    and bool inputs give int64, as CPU's; 16-bit floats multiply in fp32 and round once, as CPU
    accumulates them. Floats scan as ``_cumprod_as_cpu`` (CPU's specials). Integers are exact where
    the compiler's integer check allows the products (int64 beyond 2**24 is refused: eager mode
    runs it on CPU)."""
    torch = _torch()[0]
    out_dtype = dtype or (self.dtype if self.dtype.is_floating_point or self.dtype.is_complex else torch.int64)
    x = self.to(torch.float32 if out_dtype in (torch.float16, torch.bfloat16) else out_dtype)
    if x.dim() == 0:
        return x.to(out_dtype).clone()
    dim = dim % x.dim()
    if x.dtype == torch.float32:
        # CPU accumulates float32 in double, 16-bit floats in float32: the ranges its partial
        # products overflow and underflow in (as powers of two).
        limits = (1024, -1075) if out_dtype == torch.float32 else (128, -150)
        return _cumprod_as_cpu(x, dim, limits).to(out_dtype)
    n, step = x.shape[dim], 1
    while step < n:
        x = torch.cat([x.narrow(dim, 0, step), x.narrow(dim, step, n - step) * x.narrow(dim, 0, n - step)], dim)
        step *= 2
    return x.to(out_dtype) if x.dtype != out_dtype else x.clone() if step == 1 else x


def _scan(values, dim, combine):
    """Hillis-Steele inclusive scans of a tuple of tensors along ``dim`` (``combine`` takes the
    later and the earlier tuple and returns the combined one)."""
    torch = _torch()[0]
    n, step = values[0].shape[dim], 1
    while step < n:
        later = combine(tuple(v.narrow(dim, step, n - step) for v in values),
                        tuple(v.narrow(dim, 0, n - step) for v in values))
        values = tuple(torch.cat([v.narrow(dim, 0, step), w], dim) for v, w in zip(values, later))
        step *= 2
    return values


def _halve_into_range(f, e, k):
    """``(f, e)`` with ``f * 2**e`` unchanged and ``f`` scaled by 2**-k where ``f >= 2**k``, by 2**k
    where ``f < 2**-k`` (exact: powers of two)."""
    torch = _torch()[0]
    big, small = f >= 2.0 ** k, f < 2.0 ** -k
    f = torch.where(big, f * 2.0 ** -k, torch.where(small, f * 2.0 ** k, f))
    return f, torch.where(big, e + k, torch.where(small, e - k, e))


def _cumprod_as_cpu(x, dim, limits):
    """fp32 cumprod with CPU's left-to-right specials. A reassociated scan made ``[0, 1e30, 1e30, 2]``
    ``[0, 0, nan, 0]`` (``1e30 * 1e30`` overflowed before meeting the 0), where CPU's products
    (in double) are all 0. The product of the finite non-zero values is scanned as ``f * 2**e``
    (``f`` in [0.5, 2), ``e`` an exact integer in fp32), so no partial product overflows; where the
    true product leaves the accumulation range (``limits``: 2**hi, 2**lo) CPU's product became inf
    or 0 - as at a 0 or inf value. The first of those stays (0 or inf), a NaN input or a later
    inf (after a 0) or 0 (after an inf) makes NaN, and the sign is the parity of the negative
    values (-0.0 included)."""
    torch = _torch()[0]
    hi, lo = limits
    finite = torch.isfinite(x) & (x != 0)
    f, e = torch.where(finite, x.abs(), torch.ones_like(x)), torch.zeros_like(x)
    for k in (64, 64, 32, 16, 8, 4, 2, 1):
        f, e = _halve_into_range(f, e, k)

    def times(later, earlier):
        return _halve_into_range(later[0] * earlier[0], later[1] + earlier[1], 1)

    f, e = _scan((f, e), dim, times)

    def cumany(b):
        return torch.cumsum(b.to(torch.float32), dim) > 0

    overflow = (e > hi) | ((e == hi) & (f >= 1))
    underflow = (e < lo) | ((e == lo) & (f < 1))
    zero_at, inf_at = (x == 0) | underflow, torch.isinf(x) | overflow
    zeroed, infinite = cumany(zero_at), cumany(inf_at)
    zero_first, inf_first = cumany(zero_at & ~infinite), cumany(inf_at & ~zeroed)
    nan = cumany(torch.isnan(x) | (torch.isinf(x) & zero_first) | ((x == 0) & inf_first))
    e = e.clamp(-320, 320)  # beyond: 0 or inf in fp32 whatever f is
    for k in (64, 64, 64, 64, 32, 16, 8, 4, 2, 1):  # f * 2**e, rounded once into fp32's range
        up, down = e >= k, e <= -k
        f = torch.where(up, f * 2.0 ** k, torch.where(down, f * 2.0 ** -k, f))
        e = torch.where(up, e - k, torch.where(down, e + k, e))
    f = torch.where(zero_first, torch.zeros_like(f), torch.where(inf_first, torch.full_like(f, float("inf")), f))
    negatives = torch.cumsum(((x < 0) | ((x == 0) & (1 / x < 0))).to(torch.float32), dim)
    odd = negatives - 2 * torch.floor(negatives * 0.5)
    return torch.where(nan, torch.full_like(f, float("nan")), f * (1 - 2 * odd))


def _byte_masks_as_bool(op):
    """Advanced indexing reads a uint8 index tensor as a boolean mask (CPU's kernels, with a
    deprecation warning); torch-mlir's lowering gathers it as integer positions, and PyTorch's meta
    kernel does not know the dtype. Called again with the masks as bool, so the op takes the path a
    bool mask takes (its nonzero count decides the shape: eager mode runs it on CPU). Calls without
    a uint8 index are left alone."""
    torch = _torch()[0]

    def decomposition(self, indices, *rest, **kwargs):
        if not any(i is not None and i.dtype == torch.uint8 for i in indices):
            return NotImplemented
        masks = [i.to(torch.bool) if i is not None and i.dtype == torch.uint8 else i for i in indices]
        return op(self, masks, *rest, **kwargs)

    return decomposition


def _mask_put_as_where(op):
    """``x[mask] = v`` / ``x.index_put((mask,), v, accumulate)`` with one bool (or uint8) mask over
    ``x``'s leading dims and a ``v`` that broadcasts to the dims after them (or is one such row)
    writes ``v`` at every selected position: ``where(mask, v, x)`` (``where(mask, x + v, x)``
    accumulating, so unselected ``-0.0`` stays ``-0.0``), with no data-dependent shape. torch-mlir's lowering goes through
    ``nonzero`` (a cumprod it cannot lower), so the masked assignment of every attention mask and
    padding fill failed to compile. Other forms (values with one row per selected position, masks
    mixed with other indices) go the bool mask's general path."""
    torch = _torch()[0]
    byte_masks = _byte_masks_as_bool(op)

    def decomposition(self, indices, values, accumulate=False, *rest):
        indices = list(indices)
        if len(indices) == 1 and indices[0] is not None and indices[0].dtype in (torch.bool, torch.uint8):
            mask = indices[0].to(torch.bool)
            kept = self.dim() - mask.dim()
            if values.dim() == kept + 1 and values.shape[0] == 1:  # one row for every selected position
                values = values[0]
            if (kept >= 0 and tuple(mask.shape) == tuple(self.shape[:mask.dim()]) and values.dtype == self.dtype
                    and values.dim() <= kept and _broadcasts_to(values.shape, self.shape[mask.dim():])):
                mask = mask.reshape(tuple(mask.shape) + (1,) * kept)
                return torch.where(mask, self + values if accumulate else values, self)
        return byte_masks(self, indices, values, accumulate, *rest)

    return decomposition


def _broadcasts_to(shape, target) -> bool:
    """Whether a tensor of ``shape`` broadcasts to exactly ``target`` (right-aligned, size 1 or equal)."""
    shape, target = tuple(shape), tuple(target)
    return len(shape) <= len(target) and all(n in (1, m) for n, m in zip(shape[::-1], target[::-1], strict=False))


def _topk_unsorted(self, k, dim=-1, largest=True, sorted=True):  # noqa: A002 - ATen's argument name
    """``topk(..., sorted=False)`` (DeepSeek's expert-group routing) leaves the order of the k
    results unspecified; torch-mlir lowers only the sorted form, which is one valid order."""
    if sorted:
        return NotImplemented
    return _torch()[0].ops.aten.topk.default(self, k, dim, largest, True)


def _take(self, index):
    """torch.take counts negative indices from the end; torch-mlir's lowering gathers them as
    they are (an out-of-bounds error). Wrapped first, as CPU does."""
    torch = _torch()[0]
    flat = self.reshape(-1)
    wrapped = torch.where(index < 0, index + flat.shape[0], index)
    return torch.ops.aten.index_select(flat, 0, wrapped.reshape(-1)).reshape(index.shape)


def _flip(self, dims):
    """Each flipped dim read backwards by an index_select (a gather the compiler lowers)."""
    torch = _torch()[0]
    for d in dims:
        n = self.shape[d]
        self = torch.ops.aten.index_select(self, d, torch.arange(n - 1, -1, -1, device=self.device))
    return self


def _roll(self, shifts, dims=()):
    """The two slices of each rolled dim, concatenated in swapped order."""
    torch = _torch()[0]
    if not dims:
        return _roll(self.reshape(-1), shifts, [0]).reshape(self.shape)
    for shift, d in zip(shifts, dims):
        n = self.shape[d]
        s = shift % n if n else 0
        if s:
            self = torch.cat([self.narrow(d, n - s, s), self.narrow(d, 0, n - s)], dim=d)
    return self.clone() if not any(shifts) else self


def _round_decimals(self, decimals=0):
    """As CPU rounds to decimals: scale by 10**|decimals|, round half to even, scale back."""
    torch = _torch()[0]
    if decimals == 0:
        return torch.round(self)
    scale = 10.0 ** abs(decimals)
    if decimals > 0:
        return torch.round(self * scale) / scale
    return torch.round(self / scale) * scale


def _layer_norm(input, normalized_shape, weight, bias, eps):
    """PyTorch's ``native_layer_norm`` with its moments as CPU's layer-norm kernel takes them: in
    the computation dtype (fp32), as the mean and the mean squared deviation. PyTorch's own
    decomposition goes through ``var_mean``, whose CPU kernel accumulates in float64 and which
    fx_rewrites therefore scales by the largest magnitude first; CPU's layer norm does not
    (``[[2e19, -2e19, 1.0]]`` normalizes to zeros on CPU, the squared deviations overflowing), and
    the scaling pass would cost every layer norm an extra reduction."""
    torch = _torch()[0]
    axis = input.dim() - len(normalized_shape)
    if input.is_complex() or axis < 0 or tuple(input.shape[axis:]) != tuple(normalized_shape):
        return NotImplemented  # PyTorch's decomposition raises its own argument errors
    dims = list(range(axis, input.dim()))
    x = input.contiguous()
    if x.dtype in (torch.float16, torch.bfloat16):
        x = x.to(torch.float32)
    mean = torch.mean(x, dims, keepdim=True)
    deviation = x - mean
    rstd = torch.rsqrt(torch.mean(deviation * deviation, dims, keepdim=True) + eps)
    out = deviation * rstd
    if weight is not None:
        out = out * weight.contiguous()
    if bias is not None:
        out = out + bias.contiguous()
    out = out.to(input.dtype)
    if input.device.type == "cpu":  # as PyTorch's decomposition (the statistics in the input's dtype)
        mean, rstd = mean.to(input.dtype), rstd.to(input.dtype)
    return out, mean, rstd


def _isinf(x):
    """No integer or bool is infinite (torch-mlir's ``abs(x) == inf`` has no stablehlo.abs of i1/ui8)."""
    torch = _torch()[0]
    if x.dtype.is_floating_point:
        return NotImplemented
    return torch.zeros_like(x, dtype=torch.bool)


def _shift_by_a_number(shift):
    """``x >> k`` / ``x << k`` for a Python int ``k`` as ``shift`` by a 0-dim tensor of ``x``'s dtype
    (torch-mlir leaves the number a ``torch.constant.int`` it cannot legalize). CPU shifts by a
    negative ``k`` or one of the dtype's width or more as by that width (sign bits to the right,
    0 to the left); the width fits every integer dtype."""
    def by_a_number(x, k):
        torch = _torch()[0]
        if isinstance(k, bool) or not isinstance(k, int) or x.dtype.is_floating_point or x.dtype == torch.bool:
            return NotImplemented
        bits = x.dtype.itemsize * 8
        return shift(x, torch.scalar_tensor(bits if k < 0 or k >= bits else k, dtype=x.dtype))

    return by_a_number


def _bitwise_with_a_number(target):
    """``x ^ k`` / ``x | k`` for a Python int or bool ``k`` as ``target`` with a 0-dim tensor of the
    promoted dtype (torch-mlir marks ``bitwise_xor.Scalar`` and ``bitwise_or.Scalar`` illegal;
    ``x & k`` it lowers)."""

    def with_a_number(x, k):
        torch = _torch()[0]
        dtype = torch.result_type(x, k)
        if not isinstance(k, (bool, int)) or dtype.is_floating_point or (
                dtype != torch.bool and not torch.iinfo(dtype).min <= k <= torch.iinfo(dtype).max):
            return NotImplemented
        return target(x.to(dtype), torch.scalar_tensor(k, dtype=dtype))

    return with_a_number


def _trunc(x):
    """Rounding toward zero as ceil below zero and floor above: torch-mlir's ``sign(x) * floor(|x|)``
    makes -0.0 into +0.0 (CPU keeps it)."""
    torch = _torch()[0]
    if not x.dtype.is_floating_point:
        return NotImplemented
    return torch.where(x < 0, torch.ceil(x), torch.floor(x))


def _promoted(a, b):
    """``a`` and ``b`` in their result dtype; a Python number stays a number (its sign is known
    while tracing) next to the 0-dim tensor ``fmod`` takes."""
    torch = _torch()[0]
    dtype = torch.result_type(a, b)
    if not isinstance(a, torch.Tensor):
        a = torch.scalar_tensor(a, dtype=dtype)
    a = a.to(dtype)
    if isinstance(b, torch.Tensor):
        return a, b.to(dtype), b.to(dtype)
    return a, b, torch.scalar_tensor(b, dtype=dtype)


def _signs_differ(mod, b):
    """``mod != 0 and (mod < 0) != (b < 0)``: where Python's % and floor division correct C's."""
    torch = _torch()[0]
    if isinstance(b, torch.Tensor):
        return (mod != 0) & ((mod < 0) != (b < 0))
    return mod > 0 if b < 0 else mod < 0


def _remainder(a, b):
    """torch.remainder takes the divisor's sign (Python's %); C's fmod (``torch.fmod``, lowered to
    stablehlo.remainder: ``_fmod_as_remainder``) the dividend's. Corrected as CPU computes it:
    fmod, then plus the divisor where the signs differ and the result is not zero (so a zero keeps
    the dividend's sign, as CPU's does)."""
    torch = _torch()[0]
    a, b, divisor = _promoted(a, b)
    mod = torch.fmod(a, divisor)
    return torch.where(_signs_differ(mod, b), mod + b, mod)


def _fmod_scalar(a, b):
    """fmod by a number, as fmod by a 0-dim tensor (torch-mlir has no lowering of fmod.Scalar)."""
    torch = _torch()[0]
    a, _, divisor = _promoted(a, b)
    return torch.fmod(a, divisor)


def _copysign_scalar(a, b):
    """copysign by a number (torch-mlir has no lowering of copysign.Scalar): the number's sign is
    known while tracing (``math.copysign`` reads it from -0.0 and NaN too), so ``|a|`` or ``-|a|``,
    in copysign's result dtype (a float: integers become the default float dtype)."""
    torch = _torch()[0]
    dtype = torch.result_type(a, b)
    magnitude = torch.abs(a.to(dtype if dtype.is_floating_point else torch.get_default_dtype()))
    return -magnitude if math.copysign(1.0, b) < 0 else magnitude


def _div_mode(a, b, *, rounding_mode=None):
    """Floor division as CPU computes it (torch-mlir floors the rounded quotient); float truncating
    division as ``trunc(a / b)`` (torch-mlir's ``sign(q) * floor(|q|)`` loses -0.0); true and integer
    truncating division keep torch-mlir's lowering, which computes them as CPU does."""
    torch = _torch()[0]
    if rounding_mode == "floor":
        return _floor_divide(a, b)
    if rounding_mode == "trunc" and torch.result_type(a, b).is_floating_point:
        a, b, _ = _promoted(a, b)
        return torch.trunc(a / b)
    return NotImplemented


def _floor_divide(a, b):
    """``a // b`` bit for bit as CPU's kernel: for floats c10's ``div_floor_floating`` - the
    quotient of ``a - fmod(a, b)`` (exact), one less where the signs differ, floored and rounded
    up past .5; a zero keeps the sign of ``a / b``, and a zero divisor gives ``a / b``. For integers
    the truncating quotient, one less where the signs differ (exact integer ops)."""
    torch = _torch()[0]
    a, b, divisor = _promoted(a, b)
    mod = torch.fmod(a, divisor)
    if not a.dtype.is_floating_point:
        q = torch.div(a, divisor, rounding_mode="trunc")
        return q - _signs_differ(mod, b).to(q.dtype)
    div = (a - mod) / b
    div = torch.where(_signs_differ(mod, b), div - 1, div)
    floor = torch.floor(div)
    floor = torch.where(div - floor > 0.5, floor + 1, floor)
    quotient = a / b
    floor = torch.where(div == 0, quotient * 0.0, floor)  # copysign(0, a / b)
    return torch.where(divisor == 0, quotient, floor)


def sdpa_math():
    """Context manager: ``scaled_dot_product_attention`` runs (and traces) as its math decomposition."""
    torch = _torch()[0]
    return torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH)


def _output_node(gm):
    return next(n for n in reversed(gm.graph.nodes) if n.op == "output")


def strip_none_outputs(gm) -> list[int]:
    """Drop ``None`` outputs of ``gm`` in place (recompiling it); returns their positions."""
    out = _output_node(gm)
    values = out.args[0]
    if not isinstance(values, (tuple, list)):
        return []
    none_pos = [i for i, v in enumerate(values) if v is None]
    if none_pos:
        out.args = (type(values)(v for v in values if v is not None),)
        gm.recompile()
    return none_pos


def insert_none_outputs(outputs: list, none_positions: list[int]) -> list:
    """The inverse of ``strip_none_outputs`` on a list of results."""
    outputs = list(outputs)
    for p in none_positions:
        outputs.insert(p, None)
    return outputs


def _is_aten_graph(gm, torch) -> bool:
    for n in gm.graph.nodes:
        if n.op in ("call_module", "call_method", "get_attr"):
            return False
        if n.op == "placeholder" and "val" not in n.meta:
            return False
        if n.op == "call_function" and n.target is not operator.getitem and not isinstance(n.target, torch._ops.OpOverload):
            return False
    return True


def _check_fused_sdpa_backward(gm) -> None:
    for n in gm.graph.nodes:
        name = str(n.target)
        if n.op == "call_function" and "_scaled_dot_product" in name and "backward" in name:
            raise UnsupportedOp(
                name, "the graph holds a fused scaled_dot_product_attention backward, which has no StableHLO lowering; "
                "trace the model under neuronxcc.frontend.fx.sdpa_math() (torch.nn.attention.sdpa_kernel(SDPBackend.MATH)) "
                "so attention decomposes to matmul/softmax before autograd records it", location=fx_rewrites.node_location(n))


def _retrace(gm, example_inputs, torch):
    if example_inputs is None:
        raise UnsupportedOp("fx.GraphModule", "this graph needs re-tracing to ATen with decompositions, "
                            "which needs example_inputs")
    from torch._guards import detect_fake_mode
    from torch.fx.experimental.proxy_tensor import make_fx

    fake_mode = detect_fake_mode(list(example_inputs))
    with fake_mode if fake_mode is not None else contextlib.nullcontext(), sdpa_math():
        return make_fx(gm, decomposition_table=decompositions(),
                       tracing_mode="real" if fake_mode is not None else "fake")(*example_inputs)


def _float_scalars_in_float_compares(gm) -> list:
    """Compare a float tensor with an int number as with the same number as a float (what PyTorch
    computes: the number takes the tensor's dtype). torch-mlir 20261001 folds ``lt``/``gt`` of a
    constant float tensor and an int number into a constant read from uninitialized memory - a
    result that changed with PYTHONHASHSEED (``torch.remainder(x, 1.5)`` added 1.5 where it
    should not). Returns the undo list for ``_restore``."""
    import torch

    aten = torch.ops.aten
    compares = {aten.lt.Scalar, aten.le.Scalar, aten.gt.Scalar, aten.ge.Scalar, aten.eq.Scalar, aten.ne.Scalar}
    undo = []
    for n in gm.graph.nodes:
        if n.op != "call_function" or n.target not in compares or len(n.args) < 2:
            continue
        val = getattr(n.args[0], "meta", {}).get("val")
        number = n.args[1]
        if (isinstance(val, torch.Tensor) and val.dtype.is_floating_point and isinstance(number, int)
                and not isinstance(number, bool)):
            undo.append((n, n.target, n.args))
            n.args = (n.args[0], float(number), *n.args[2:])
    return undo


def _fmod_as_remainder(gm) -> list:
    """torch-mlir lowers ``aten.fmod`` to ``a - b * floor(|a / b|) * sign(a / b)``, off in the last
    bits wherever ``a / b`` rounds; ``aten.remainder`` it lowers to StableHLO's ``remainder``, which
    is C's fmod exactly (CPU's ``torch.fmod``). So fmod nodes become remainder nodes - after a graph
    holding Python's remainder itself (which ``_remainder`` decomposes into fmod) was re-traced.
    Returns the undo list for ``_restore``."""
    import torch

    aten = torch.ops.aten
    remainders = {aten.remainder.Tensor, aten.remainder.Scalar, aten.remainder.Scalar_Tensor}
    if any(n.op == "call_function" and n.target in remainders for n in gm.graph.nodes):
        raise UnsupportedOp("aten.remainder", "Python's remainder must be decomposed first "
                                                "(re-traced with neuronxcc.frontend.fx.decompositions())")
    undo = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.fmod.Tensor:
            undo.append((n, n.target, n.args))
            n.target = aten.remainder.Tensor
    return undo


def _stable_sort_as_sort(gm) -> list:
    """``aten.sort.stable`` (``stable=True``, also argsort's and msort's) as ``aten.sort.default``:
    torch-mlir lowers only the latter (to a ``stablehlo.sort``), and the importer's sort is
    PyTorch's stable order either way (``stablehlo._sort``). Returns the undo list for ``_restore``."""
    import torch

    aten = torch.ops.aten
    undo = []
    for n in gm.graph.nodes:
        if n.op == "call_function" and n.target is aten.sort.stable:
            undo.append((n, n.target, n.args, n.kwargs))
            n.target = aten.sort.default
            n.args = (n.args[0], n.kwargs.get("dim", -1), n.kwargs.get("descending", False))
            n.kwargs = {}
    return undo


def _restore(undo: list) -> None:
    """Put back the nodes a rewrite for torch-mlir changed: the caller's graph module keeps its own
    (PyTorch's) semantics and code."""
    for node, target, args, *kwargs in undo:
        node.target, node.args = target, args
        if kwargs:
            node.kwargs = kwargs[0]


def _lower(gm, name: str):
    """The StableHLO module (bytecode) of ``gm`` and the calls cut out of it to import as graph ops
    (``fx_graph_ops``): rewritten (``fx_rewrites``), imported to the Torch dialect here, lowered by
    torch-mlir's pipeline in the bounded worker (``pipeline``)."""
    pipeline.start()  # the worker's first startup overlaps the import below
    gm, cut = fx_graph_ops.cut_graph_ops(gm, _torch()[0])
    fx_rewrites.rewrite(gm)
    undo = _float_scalars_in_float_compares(gm)
    try:
        undo += _fmod_as_remainder(gm)
        undo += _stable_sort_as_sort(gm)
        return pipeline.lower(torch_dialect_module(gm, name), name), cut
    finally:
        _restore(undo)


def _literal_tracker():
    """torch-mlir's literal cache, keeping what it caches alive while the import runs. It caches
    each tensor literal by ``id()`` and no longer drops an entry when its tensor dies (iree-turbine
    issue 281), and it converts every bool constant to a temporary uint8 tensor first: a later bool
    constant whose temporary took a freed one's id was given the earlier constant's values (a
    max-pooling window mask read as another offset's; which ones depended on the allocator)."""
    from torch_mlir.extras.fx_importer import RefTracker

    class KeepAlive(RefTracker):
        def __init__(self):
            super().__init__()
            self._alive: list = []

        def track(self, referrent):
            self._alive.append(referrent)  # its id stays its own until the importer is dropped
            return super().track(referrent)

    return KeepAlive()


def torch_dialect_module(gm, name: str = "main") -> bytes:
    """``gm`` imported by torch-mlir's FX importer, as is: the Torch-dialect module (bytecode)
    ``pipeline.lower`` takes. Raises ``PipelineError`` naming torch-mlir's diagnostics."""
    _torch_module, _fx, ir, torch_dialect, FxImporter = _torch()
    ctx = ir.Context()
    torch_dialect.register_dialect(ctx)
    diagnostics: list[tuple[str, str]] = []

    def on_diagnostic(d):  # keep torch-mlir's errors for our message instead of printing them
        diagnostics.append((str(d.location), str(d.message)))
        return True

    handler = ctx.attach_diagnostic_handler(on_diagnostic)
    try:
        importer = FxImporter(context=ctx, py_attr_tracker=_literal_tracker())
        importer.import_stateless_graph(gm.graph, func_name=name)
        torch_module = io.BytesIO()
        importer.module.operation.write_bytecode(torch_module)
    except Exception as err:
        raise PipelineError("importing the FX graph", str(err).strip().splitlines()[0] if str(err).strip()
                            else type(err).__name__, diagnostics) from err
    finally:
        handler.detach()
    return torch_module.getvalue()


def _lowering_error(failure: PipelineError) -> UnsupportedOp:
    for loc, message in failure.diagnostics:
        m = re.search(r"torch\.operator\"?\(?\)?\s*\"([^\"]+)\"", message) or re.search(r"operation '([^']+)'", message)
        if m:
            return UnsupportedOp(m.group(1), f"torch-mlir cannot lower it to StableHLO: {message.splitlines()[0][:300]}",
                                 location=describe_location(loc))
    detail = "; ".join(m for _, m in failure.diagnostics) or failure.message
    return UnsupportedOp("torch-mlir", f"lowering to StableHLO failed: {detail[:500]}")


def from_fx(gm, example_inputs=None, *, func_name: str = "main") -> Graph:
    """Import an FX ``GraphModule`` (ATen graphs from AOTAutograd, or dynamo graphs plus their
    example inputs) into a graph. Graph inputs are named after the gm's placeholders, outputs
    ``output0...`` over the non-None outputs; ``graph.none_outputs`` lists the dropped positions."""
    torch = _torch()[0]
    _check_fused_sdpa_backward(gm)
    placeholders = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    out = _output_node(gm)
    saved_args = out.args
    none_pos = strip_none_outputs(gm)
    try:
        if _is_aten_graph(gm, torch):
            try:
                module, cut = _lower(gm, func_name)
            except PipelineError as failure:
                if example_inputs is None:
                    raise _lowering_error(failure) from None
                module = None
        else:
            module = None
        if module is None:
            traced = _retrace(gm, example_inputs, torch)
            _check_fused_sdpa_backward(traced)
            try:
                module, cut = _lower(traced, func_name)
            except PipelineError as failure:
                raise _lowering_error(failure) from None
    finally:
        if none_pos:
            out.args = saved_args
            gm.recompile()
    graph = import_module(module, func_name=func_name)
    fx_graph_ops.put_back(graph, cut)
    if len(graph.inputs) == len(placeholders):
        for v, name in zip(graph.inputs, placeholders):
            v.name = name
    graph.none_outputs = none_pos
    return graph
