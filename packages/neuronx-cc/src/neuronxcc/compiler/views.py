"""Affine views: where the elements of a graph value come from, as a linear map of its index.

A value the compiler does not have to compute element by element is a ``View``:

* ``hbm``    - elements of an HBM tensor: ``tensor[offset + sum(index[d] * strides[d])]``;
* ``iota``   - the integers ``offset + sum(index[d] * strides[d])`` (generated on chip by GpSimd Iota);
* ``random_words`` - words ``offset + sum(index[d] * strides[d])`` of a draw of ``value`` words whose
  state is the HBM tensor ``tensor`` (int32 [4]), made on chip by the generator (RandomWords);
* ``scalar`` - one number everywhere (an immediate operand, or a Memset tile).

broadcast_in_dim, transpose, slice and (when the strides allow it) reshape only change the linear
map, so they cost nothing: their consumers read through a different access pattern (stride 0 for
broadcast dims). That is how these ops are folded into the DMAs of the ops that use them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from neuron_sim import dtypes

KINDS = ("hbm", "iota", "scalar", "random_words")


def contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for size in reversed(tuple(shape)):
        strides.append(acc)
        acc *= size
    return tuple(reversed(strides))


@dataclass(frozen=True)
class View:
    kind: str
    dtype: str  # the value's (graph) dtype; a view never casts
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # elements (hbm) or index coefficients (iota); zeros for scalar
    offset: int = 0
    tensor: str | None = None  # hbm: the program tensor
    value: float | int | None = None  # scalar: the number

    @staticmethod
    def hbm(tensor: str, shape, dtype: str) -> View:
        shape = tuple(int(s) for s in shape)
        return View("hbm", dtype, shape, contiguous_strides(shape), 0, tensor)

    @staticmethod
    def scalar(value, shape, dtype: str) -> View:
        shape = tuple(int(s) for s in shape)
        return View("scalar", dtype, shape, (0,) * len(shape), 0, None, value)

    @staticmethod
    def iota(shape, dim: int, dtype: str) -> View:
        shape = tuple(int(s) for s in shape)
        return View("iota", dtype, shape, tuple(1 if d == dim else 0 for d in range(len(shape))), 0)

    @staticmethod
    def random_words(state_tensor: str, count: int) -> View:
        return View("random_words", "int32", (count,), (1,), 0, state_tensor, count)

    @property
    def num_elements(self) -> int:
        return math.prod(self.shape)

    def is_contiguous(self) -> bool:
        return self.offset == 0 and all(
            s == c for s, c, n in zip(self.strides, contiguous_strides(self.shape), self.shape) if n != 1)

    def covers_tensor(self, nelements: int) -> bool:
        """True for a contiguous view of a whole tensor of ``nelements`` elements."""
        return self.kind == "hbm" and self.is_contiguous() and self.num_elements == nelements

    # --- the view ops -------------------------------------------------------------------------
    def transpose(self, perm) -> View:
        return replace(self, shape=tuple(self.shape[p] for p in perm), strides=tuple(self.strides[p] for p in perm))

    def broadcast(self, shape, dims) -> View:
        strides = [0] * len(shape)
        for src_dim, out_dim in enumerate(dims):
            if self.shape[src_dim] == shape[out_dim]:
                strides[out_dim] = self.strides[src_dim]
        return replace(self, shape=tuple(int(s) for s in shape), strides=tuple(strides))

    def slice(self, start, limit, stride=None) -> View:
        stride = stride or [1] * len(start)
        offset = self.offset + sum(s * st for s, st in zip(start, self.strides))
        shape = tuple(len(range(s, e, k)) for s, e, k in zip(start, limit, stride))
        return replace(self, shape=shape, strides=tuple(st * k for st, k in zip(self.strides, stride)), offset=offset)

    def as_strided(self, shape, strides, offset: int = 0) -> View:
        """Elements at ``offset + sum(index * strides)`` of a contiguous view's row-major order."""
        if self.kind == "scalar":
            return replace(self, shape=tuple(shape), strides=(0,) * len(shape))
        return replace(self, shape=tuple(int(s) for s in shape), strides=tuple(int(s) for s in strides),
                       offset=self.offset + int(offset))

    def reshape(self, shape) -> View | None:
        """The same elements in row-major order under ``shape``; None when no strides express it."""
        shape = tuple(int(s) for s in shape)
        strides = reshape_strides(self.shape, self.strides, shape)
        return None if strides is None else replace(self, shape=shape, strides=strides)

    def part(self, dtype: str, index: int = 0) -> View:
        """Part ``index`` of each element of an HBM view, as a view of the narrower (or equally
        wide) ``dtype`` over the same tensor, little-endian: ``part("int32", 1)`` is the high word of
        each int64, ``part("uint8")`` the low byte of each int32. Moving it moves those bytes."""
        ratio, rest = divmod(dtypes.itemsize(self.dtype), dtypes.itemsize(dtype))
        if self.kind != "hbm" or rest or not 0 <= index < ratio:
            raise ValueError(f"no part {index} of {dtype} in a {self.kind} view of {self.dtype}")
        return replace(self, dtype=dtype, strides=tuple(ratio * s for s in self.strides),
                       offset=ratio * self.offset + index)

    def bytes_as(self, dtype: str) -> View | None:
        """The bytes of an HBM view read as ``dtype`` (StableHLO's bitcast_convert): equally wide
        keeps the shape, a narrower dtype adds a last dim of the parts of each element, a wider one
        takes the last dim away - which needs it contiguous and the other strides whole multiples
        of it (None otherwise: copy the view dense first)."""
        a, b = dtypes.itemsize(self.dtype), dtypes.itemsize(dtype)
        if self.kind != "hbm":
            return None
        if a >= b:
            part = self.part(dtype)
            return part if a == b else replace(part, shape=(*self.shape, a // b), strides=(*part.strides, 1))
        ratio = b // a
        strides = self.strides[:-1]
        last = self.strides[-1] if self.shape[-1] > 1 else 1
        if last != 1 or self.offset % ratio or any(s % ratio for s, n in zip(strides, self.shape) if n > 1):
            return None
        return replace(self, dtype=dtype, shape=self.shape[:-1], strides=tuple(s // ratio for s in strides),
                       offset=self.offset // ratio)

    def select_dim(self, dim: int, index: int) -> View:
        """Fix ``dim`` to ``index`` (the dim stays, with size 1)."""
        shape = list(self.shape)
        shape[dim] = 1
        return replace(self, shape=tuple(shape), offset=self.offset + index * self.strides[dim])


def reshape_strides(old_shape, old_strides, new_shape) -> tuple[int, ...] | None:
    """Strides that give ``new_shape`` the row-major element order of the old view, or None.

    The algorithm of ``torch``'s ``computeStride``: walk both shapes from the innermost dim, cutting
    the old view into chunks that are contiguous in memory; each chunk must be split exactly by
    new dims.
    """
    old_shape, old_strides, new_shape = tuple(old_shape), tuple(old_strides), tuple(new_shape)
    if math.prod(old_shape) != math.prod(new_shape):
        return None
    if math.prod(new_shape) == 0 or not old_shape:
        return contiguous_strides(new_shape)  # nothing to address, or a scalar: any strides do
    new_strides = [0] * len(new_shape)
    view_d = len(new_shape) - 1
    chunk_base = old_strides[-1]
    tensor_numel = view_numel = 1
    for d in range(len(old_shape) - 1, -1, -1):
        tensor_numel *= old_shape[d]
        if d == 0 or (old_shape[d - 1] != 1 and old_strides[d - 1] != tensor_numel * chunk_base):
            while view_d >= 0 and (view_numel < tensor_numel or new_shape[view_d] == 1):
                new_strides[view_d] = view_numel * chunk_base
                view_numel *= new_shape[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if d > 0:
                chunk_base = old_strides[d - 1]
                tensor_numel = view_numel = 1
    if view_d != -1:
        return None
    return tuple(new_strides)
