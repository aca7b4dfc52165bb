"""Index expressions: integers, slices, ``nl.ds``, and the legacy ``nl.arange`` / ``nl.mgrid`` forms.

Legacy kernels index with affine expressions over ``nl.arange`` (``x[i * 128 + ix, iy]``). An
affine expression ``coeff * arange(n) + const`` on a dimension is exactly the slice
``const : const + coeff * n : coeff``; its position among the ``[:, None]`` / ``[None, :]``
broadcasts says which output dimension it becomes. Comparisons of such expressions build masks.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass

import numpy as np

from . import tracing


@dataclass(frozen=True)
class DynSlice:
    """``nl.ds(start, size)``: ``size`` elements from ``start``."""

    start: int
    size: int


def ds(start, size) -> DynSlice:
    if not isinstance(start, int) or not isinstance(size, int):
        raise tracing.current().error("index.dynamic", "nl.ds needs compile-time ints; use .ap(..., scalar_offset=...) for run-time offsets")
    return DynSlice(start, size)


class IndexExpr:
    """``coeff * arange(size) + const``, placed at output axis ``axis`` of ``ndim`` (legacy API)."""

    __array_priority__ = 1000

    def __init__(self, size: int, coeff: int = 1, const: int = 0, axis: int = 0, ndim: int = 1, var=None):
        self.size, self.coeff, self.const, self.axis, self.ndim = size, coeff, const, axis, ndim
        # The index variable this expression is affine in (one per nl.arange call / mgrid axis):
        # a mask condition applies to the tensor dimension indexed by the same variable.
        self.var = var if var is not None else object()

    def _with(self, coeff=None, const=None) -> IndexExpr:
        return IndexExpr(self.size, self.coeff if coeff is None else coeff, self.const if const is None else const,
                         self.axis, self.ndim, self.var)

    def __getitem__(self, key) -> IndexExpr:
        # nl.arange(n)[:, None] -> axis 0 of 2; nl.arange(n)[None, :] -> axis 1 of 2.
        key = key if isinstance(key, tuple) else (key,)
        slots = [i for i, k in enumerate(key) if k is not None]
        if len(slots) != 1 or key[slots[0]] != slice(None):
            raise tracing.current().error("index.arange", f"index an nl.arange with [:, None] or [None, :], got {key!r}")
        return IndexExpr(self.size, self.coeff, self.const, slots[0], len(key), self.var)

    def __add__(self, other):
        if isinstance(other, int):
            return self._with(const=self.const + other)
        if isinstance(other, (IndexExpr, AffineExpr)):
            return AffineExpr.of(self) + other
        return NotImplemented

    __radd__ = __add__

    def __sub__(self, other):
        if isinstance(other, int):
            return self._with(const=self.const - other)
        if isinstance(other, (IndexExpr, AffineExpr)):
            return AffineExpr.of(self) - other
        return NotImplemented

    def __rsub__(self, other):
        if isinstance(other, int):
            return AffineExpr.of(self) * -1 + other
        return NotImplemented

    def __neg__(self):
        return AffineExpr.of(self) * -1

    def __mul__(self, other):
        if isinstance(other, int):
            return self._with(coeff=self.coeff * other, const=self.const * other)
        return NotImplemented

    __rmul__ = __mul__

    def values(self) -> range:
        return range(self.const, self.const + self.coeff * self.size, self.coeff) if self.coeff else range(self.const, self.const + 1)

    # Comparisons with a number build masks (legacy ``mask=`` argument); comparisons of two index
    # expressions build affine predicates (legacy ``nisa.affine_select(pred=...)``).
    def __lt__(self, bound):
        return Mask.of(self, "<", bound) if isinstance(bound, int) else AffineExpr.of(self).compare("less", bound)

    def __le__(self, bound):
        return Mask.of(self, "<=", bound) if isinstance(bound, int) else AffineExpr.of(self).compare("less_equal", bound)

    def __gt__(self, bound):
        return Mask.of(self, ">", bound) if isinstance(bound, int) else AffineExpr.of(self).compare("greater", bound)

    def __ge__(self, bound):
        return Mask.of(self, ">=", bound) if isinstance(bound, int) else AffineExpr.of(self).compare("greater_equal", bound)


class AffineExpr:
    """``const + sum(coeff_a * i_a)`` over the axes of a legacy index grid (``i_p * 4 + i_f``).

    Only the legacy instructions that evaluate an affine expression per element take one:
    ``nisa.iota(expr, dtype)`` and ``nisa.affine_select(pred=expr cmp expr, ...)``.
    """

    __array_priority__ = 1000

    def __init__(self, terms: dict, const: int, ndim: int):
        self.terms = terms  # axis -> (coeff per step of that axis' index, number of steps)
        self.const, self.ndim = const, ndim

    @staticmethod
    def of(e) -> AffineExpr:
        if isinstance(e, AffineExpr):
            return e
        return AffineExpr({e.axis: (e.coeff, e.size)}, e.const, e.ndim)

    def __add__(self, other):
        if isinstance(other, int):
            return AffineExpr(dict(self.terms), self.const + other, self.ndim)
        if not isinstance(other, (IndexExpr, AffineExpr)):
            return NotImplemented
        other = AffineExpr.of(other)
        terms = dict(self.terms)
        for axis, (coeff, size) in other.terms.items():
            if axis in terms:
                if terms[axis][1] != size:
                    raise tracing.current().error("index.affine", f"index expressions of sizes {terms[axis][1]} and {size} share axis {axis}")
                coeff += terms[axis][0]
            terms[axis] = (coeff, size)
        return AffineExpr(terms, self.const + other.const, max(self.ndim, other.ndim))

    __radd__ = __add__

    def __mul__(self, k):
        if not isinstance(k, int):
            return NotImplemented
        return AffineExpr({a: (c * k, n) for a, (c, n) in self.terms.items()}, self.const * k, self.ndim)

    __rmul__ = __mul__

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        if isinstance(other, (int, IndexExpr, AffineExpr)):
            return self + (-other if not isinstance(other, int) else -other)
        return NotImplemented

    def __rsub__(self, other):
        return -self + other

    def compare(self, op: str, other) -> AffinePredicate:
        if not isinstance(other, (int, IndexExpr, AffineExpr)):
            raise tracing.current().error("index.affine", f"cannot compare an index expression with {other!r}")
        return AffinePredicate(self - other, op)

    def __lt__(self, o):
        return self.compare("less", o)

    def __le__(self, o):
        return self.compare("less_equal", o)

    def __gt__(self, o):
        return self.compare("greater", o)

    def __ge__(self, o):
        return self.compare("greater_equal", o)

    def shape(self) -> tuple[int, ...]:
        """The grid the expression spans: the index sizes per axis (1 where it does not vary)."""
        return tuple(self.terms.get(a, (0, 1))[1] for a in range(self.ndim))

    def pattern(self) -> tuple[int, tuple[tuple[int, int], ...]]:
        """(channel_multiplier, free pattern) in the [step, count] form of nisa.iota/affine_select:
        axis 0 is the partition, the others walk the free dims in order."""
        shape = self.shape()
        free = tuple((self.terms.get(a, (0, 1))[0], shape[a]) for a in range(1, self.ndim)) or ((0, 1),)
        return self.terms.get(0, (0, 1))[0], free


@dataclass(frozen=True)
class AffinePredicate:
    """``expr <op> 0`` evaluated per element (legacy affine_select's ``pred``)."""

    expr: AffineExpr
    op: str


def arange(*args) -> IndexExpr:
    r = range(*args)
    if r.step <= 0 or len(r) == 0:
        raise tracing.current().error("index.arange", f"nl.arange{args} is empty or has a non-positive step")
    return IndexExpr(len(r), r.step, r.start)


class _MGrid:
    """``nl.mgrid[0:128, 0:512]`` -> one IndexExpr per axis, broadcast against each other."""

    def __getitem__(self, key):
        key = key if isinstance(key, tuple) else (key,)
        out = []
        for axis, s in enumerate(key):
            r = range(s.start or 0, s.stop, s.step or 1)
            out.append(IndexExpr(len(r), r.step, r.start, axis, len(key)))
        return Grid(out) if len(out) > 1 else out[0]


class Grid(tuple):
    """The index expressions of an ``nl.mgrid``, one per axis; ``.p`` is the partition (first)
    axis and ``.x``, ``.y``, ``.z`` the next ones, as legacy kernels name them (``grid =
    nl.mgrid[0:128, 0:512]; t[grid.p, grid.x]``)."""

    @property
    def p(self) -> IndexExpr:
        return self[0]

    @property
    def x(self) -> IndexExpr:
        return self[1]

    @property
    def y(self) -> IndexExpr:
        return self[2]

    @property
    def z(self) -> IndexExpr:
        return self[3]


mgrid = _MGrid()


@dataclass(frozen=True)
class Mask:
    """A conjunction of ``affine(index) <op> bound`` conditions; restricts the elements an op touches."""

    conditions: tuple

    @staticmethod
    def of(expr: IndexExpr, op: str, bound) -> Mask:
        if not isinstance(bound, int):
            raise tracing.current().error("mask.bound", f"mask bounds must be compile-time ints, got {bound!r}")
        return Mask(((expr, op, bound),))

    def __and__(self, other: Mask) -> Mask:
        if isinstance(other, (bool, np.bool_)):  # a predicate of loop indices, folded at trace time
            return self if other else False
        return Mask(self.conditions + other.conditions)

    __rand__ = __and__

    def _applies(self, expr: IndexExpr, axis: int, var) -> bool:
        # A tensor dim indexed by an index variable takes that variable's conditions; otherwise
        # (tiles computed from masked data) conditions go by broadcast position ([:, None] is axis 0).
        return expr.var is var if var is not None else expr.axis == axis

    def extent(self, axis: int, var=None) -> int | None:
        """Positions of the index expression(s) the mask constrains on output ``axis`` (None: free)."""
        sizes = [expr.size for expr, _, _ in self.conditions if self._applies(expr, axis, var)]
        return max(sizes) if sizes else None

    def restrict(self, axis: int, expr_size: int, var=None) -> range:
        """Positions (0..size) along output ``axis`` that satisfy every condition on that axis."""
        keep = range(expr_size)
        for expr, op, bound in self.conditions:
            if not self._applies(expr, axis, var):
                continue
            ok = [i for i, v in zip(range(expr.size), expr.values()) if _compare(v, op, bound)]
            lo, hi = (ok[0], ok[-1] + 1) if ok else (0, 0)
            keep = range(max(keep.start, lo), min(keep.stop, hi))
        return keep


def folds_constant_mask(func):
    """Let ``func``'s legacy ``mask=`` be a plain bool, as NKI allows: a predicate over loop indices
    only (``mask=(i * 128 < n)`` with ``i`` of an unrolled loop) is folded when the kernel is traced.
    True keeps every element (no mask); False keeps none - the compiler drops the instruction - so
    the call emits nothing (a tile it returns is allocated, its contents undefined)."""
    signature = inspect.signature(func)
    position = list(signature.parameters).index("mask")

    @functools.wraps(func)
    def call(*args, **kwargs):
        positional = len(args) > position
        mask = args[position] if positional else kwargs.get("mask")
        if not isinstance(mask, (bool, np.bool_)):
            return func(*args, **kwargs)
        if positional:
            args = args[:position] + (None,) + args[position + 1:]
        else:
            kwargs["mask"] = None
        if mask:
            return func(*args, **kwargs)
        with tracing.current().masked_off():
            return func(*args, **kwargs)

    return call


def _compare(v, op, bound) -> bool:
    return {"<": v < bound, "<=": v <= bound, ">": v > bound, ">=": v >= bound}[op]


def normalize_key(key, shape: tuple[int, ...], partition_axis: int | None, overruns: list | None = None,
                  index_vars: list | None = None) -> list[tuple[int, int, int, bool]]:
    """Per dimension of ``shape``: (start, count, step, keep). Integers drop a dim (except the
    partition dim of an on-chip tile, ``partition_axis``, which stays with size 1; None for HBM);
    everything else keeps it.

    A legacy index expression may run past the end of its dimension when a ``mask=`` cuts it
    back (``a[i * 128 + ix, iy]`` with ``mask=(i * 128 + ix < rows)``): it is clipped to the
    dimension and, if ``overruns`` is given, ``(dim, requested count, message)`` is appended so
    the view can refuse to be used unless a mask covers the overrun. ``index_vars`` receives,
    per dimension, the index variable of an index expression (None for other keys).
    """
    key = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in key):
        i = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = len(shape) - (len(key) - 1)
        key = key[:i] + (slice(None),) * fill + key[i + 1 :]
    if len(key) > len(shape):
        raise tracing.current().error("index.rank", f"{len(key)} indices for a tensor of shape {list(shape)}")
    out = []
    for axis, dim in enumerate(shape):
        k = key[axis] if axis < len(key) else slice(None)
        if index_vars is not None:
            index_vars.append(k.var if isinstance(k, IndexExpr) else None)
        if isinstance(k, IndexExpr) and k.coeff > 0:
            last = k.const + k.coeff * (k.size - 1)
            if k.const < 0 or k.const >= dim or (last >= dim and overruns is None):
                raise tracing.current().error(
                    "index.out_of_bounds",
                    f"index expression {k.const} + {k.coeff} * arange({k.size}) of dimension {axis} (size {dim}) "
                    f"spans [{k.const}, {last}]: out of bounds")
            count = k.size
            if last >= dim:  # clipped; the view refuses to be used unless a mask excludes the overrun
                message = (f"index expression {k.const} + {k.coeff} * arange({k.size}) of dimension {axis} (size {dim}) "
                           f"reaches {last}: out of bounds (add a mask= that excludes the overrun)")
                overruns.append((axis, k.size, message))
                count = len(range(k.const, dim, k.coeff))
            out.append((k.const, count, k.coeff, True))
            continue
        if isinstance(k, IndexExpr):  # coefficient 0: a constant index
            k = k.const
        if isinstance(k, AffineExpr):
            raise tracing.current().error("index.type", "index with an nl.arange expression per dimension (i * 128 + ix), not a sum over several")
        if isinstance(k, DynSlice):
            k = slice(k.start, k.start + k.size)
        if isinstance(k, slice):
            # Bounds are checked on the elements the slice reaches (x[1:65:2] of 64 ends at 63),
            # without Python's clipping (x[0:300] of 256 is out of bounds, not 256 elements).
            step = 1 if k.step is None else int(k.step)
            start = 0 if k.start is None else int(k.start) + (dim if int(k.start) < 0 else 0)
            stop = dim if k.stop is None else int(k.stop) + (dim if int(k.stop) < 0 else 0)
            count = len(range(start, stop, step)) if step > 0 else 0
            if step <= 0 or count == 0 or start < 0 or start + (count - 1) * step >= dim:
                raise tracing.current().error(
                    "index.out_of_bounds",
                    f"slice {_fmt(k)} of dimension {axis} (size {dim}) is empty or out of bounds",
                )
            out.append((start, count, step, True))
        elif isinstance(k, int) or hasattr(k, "__index__"):
            i = int(k)
            if i < 0:
                i += dim
            if not 0 <= i < dim:
                raise tracing.current().error("index.out_of_bounds", f"index {int(k)} is out of bounds for dimension {axis} of size {dim}")
            out.append((i, 1, 1, axis == partition_axis))
        else:
            raise tracing.current().error("index.type", f"cannot index a tensor with {type(k).__name__} ({k!r})")
    return out


def is_grid_key(key) -> bool:
    """Whether a legacy index needs the index-grid reading (``affine_view``): some dim is indexed
    by a sum of ``nl.arange`` terms (``x[i_p, 2 * i_a + i_b]``). Indices of one expression per dim
    keep their dims in the tensor's order (``normalize_key``)."""
    return any(isinstance(k, AffineExpr) and len(k.terms) > 1 for k in key)


def affine_view(key, shape: tuple[int, ...], strides: tuple[int, ...], overruns: list | None = None):
    """(shape, strides, offset) of ``t[key]`` read as numpy reads a legacy index: every index
    expression spans the same grid (``nl.arange(n)[:, None]`` is its axis 0 of 2), and the result
    has one dim per grid axis, whose stride sums the strides of the tensor dims its terms step.

    An expression that runs past the end of its dimension (``x[i_h + i_k, ...]`` with ``i_h``
    over a last, partial tile) is clipped along its grid axis of largest step when ``overruns`` is
    given, and ``(grid axis, requested size, message)`` appended: the view is usable only under a
    mask that keeps that axis within the clipped size (``mask=(i_h < rows - k + 1)``)."""
    ctx = tracing.current()
    if len(key) != len(shape):
        raise ctx.error("index.rank", f"a legacy index of sums of nl.arange terms indexes every dim: {len(key)} "
                                      f"indices for shape {list(shape)}")
    exprs = [AffineExpr.of(k) for k in key if isinstance(k, (IndexExpr, AffineExpr))]
    ndim = max(e.ndim for e in exprs)
    sizes, out_strides, offset = [1] * ndim, [0] * ndim, 0
    clipped: dict[int, tuple[int, str]] = {}  # grid axis -> (size it may keep, message)
    for dim, k in enumerate(key):
        if isinstance(k, IndexExpr) and k.coeff == 0:
            k = k.const
        if isinstance(k, int) or hasattr(k, "__index__") and not isinstance(k, (IndexExpr, AffineExpr)):
            i = int(k)
            if not 0 <= i < shape[dim]:
                raise ctx.error("index.out_of_bounds", f"index {i} is out of bounds for dimension {dim} of size {shape[dim]}")
            offset += i * strides[dim]
            continue
        if not isinstance(k, (IndexExpr, AffineExpr)):
            raise ctx.error("index.type", f"an index of sums of nl.arange terms takes ints and nl.arange expressions, "
                                          f"not {type(k).__name__} ({k!r}) at dimension {dim}")
        e = AffineExpr.of(k)
        lo = e.const + sum(min(0, c * (n - 1)) for c, n in e.terms.values())
        hi = e.const + sum(max(0, c * (n - 1)) for c, n in e.terms.values())
        message = f"index expression of dimension {dim} (size {shape[dim]}) spans [{lo}, {hi}]: out of bounds"
        if hi >= shape[dim] and lo >= 0 and overruns is not None:
            axis, (coeff, size) = max(((a, t) for a, t in e.terms.items() if t[0] > 0), key=lambda at: at[1][0])
            rest = hi - coeff * (size - 1)  # the largest index the other terms reach
            keep = (shape[dim] - 1 - rest) // coeff + 1
            if keep >= 1:
                clipped[axis] = (min(keep, clipped.get(axis, (size, ""))[0]), message + " (add a mask= that excludes the overrun)")
                hi = shape[dim] - 1
        if lo < 0 or hi >= shape[dim]:
            raise ctx.error("index.out_of_bounds", message)
        offset += e.const * strides[dim]
        for axis, (coeff, size) in e.terms.items():
            if sizes[axis] not in (1, size):
                raise ctx.error("index.affine", f"grid axis {axis} has size {sizes[axis]} in one index and {size} in another")
            sizes[axis] = size
            out_strides[axis] += coeff * strides[dim]
    for axis, (keep, message) in clipped.items():
        overruns.append((axis, sizes[axis], message))
        sizes[axis] = keep
    return tuple(sizes), tuple(out_strides), offset


def _fmt(s: slice) -> str:
    return f"{'' if s.start is None else s.start}:{'' if s.stop is None else s.stop}" + (f":{s.step}" if s.step not in (None, 1) else "")


class par_dim:  # noqa: N801 - NKI's name
    """Legacy marker for the partition dimension in a tile shape: ``(nl.par_dim(128), 512)``."""

    def __init__(self, size: int):
        self.size = int(size)

    def __index__(self) -> int:
        return self.size

    def __int__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"par_dim({self.size})"
