"""NkiTensor: storage plus a strided view, and its translation to simulator access patterns.

A tensor's storage lives in HBM (a tensor of the kernel's tensor table) or on chip (a block of
bytes in every partition of SBUF/PSUM). A view is ``offset + sum(strides[k] * i_k)`` in elements,
as in NKI. On chip, dim 0 is the partition dimension and its stride is the storage's per-partition
element count; every other dimension must stay inside a partition. Views are free: they only
change this arithmetic.
"""

from __future__ import annotations

import math
import weakref

from neuron_sim import dtypes
from neuron_sim.memory.access_pattern import HBM, MAX_FREE_DIMS, PSUM, SBUF, AccessPattern

from . import tracing

ON_CHIP = (SBUF, PSUM)
HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")


class Storage:
    """An allocation: an HBM tensor of the tensor table, or per-partition bytes on chip."""

    __slots__ = ("buffer", "dtype", "shape", "name", "partition_offset", "byte_offset", "written", "__weakref__")

    def __init__(self, buffer: str, dtype: str, shape: tuple[int, ...], name: str,
                 partition_offset: int = 0, byte_offset: int = 0):
        self.buffer = buffer
        self.dtype = dtype
        self.shape = shape
        self.name = name
        self.partition_offset = partition_offset
        self.byte_offset = byte_offset
        # PSUM regions written so far, (first partition, end partition, first byte, end byte): a
        # matmul with accumulate=None overwrites a region on its first write and adds afterwards.
        self.written: list[tuple[int, int, int, int]] = []

    @property
    def on_chip(self) -> bool:
        return self.buffer in ON_CHIP

    @property
    def free_elements(self) -> int:
        """Elements per partition (on chip); the partition stride of its views."""
        return math.prod(self.shape[1:]) if len(self.shape) > 1 else 1


def allocate_on_chip(ctx, buffer: str, shape: tuple[int, ...], dtype: str, name: str, address=None) -> Storage:
    """Reserve SBUF/PSUM bytes for a tile; they are released when the last view of it dies."""
    arch = ctx.arch
    if not shape:
        raise ctx.error("tile.shape", "an on-chip tile needs at least a partition dimension")
    if shape[0] > arch.num_partitions:
        raise ctx.error(
            "partition.limit",
            f"partition dimension {shape[0]} of tile {list(shape)} exceeds the {arch.num_partitions} partitions",
        )
    nbytes = (math.prod(shape[1:]) if len(shape) > 1 else 1) * dtypes.itemsize(dtype)
    allocator = ctx.sbuf if buffer == SBUF else ctx.psum
    if address is not None:
        partition_offset, byte_offset = (int(a) for a in address)
        limit = arch.sbuf_usable_bytes_per_partition if buffer == SBUF else arch.psum_bytes_per_partition
        if byte_offset < 0 or byte_offset + nbytes > limit or partition_offset + shape[0] > arch.num_partitions:
            raise ctx.error("tile.address", f"address {tuple(address)} puts {list(shape)} {dtype} outside {buffer.upper()}")
        if buffer == PSUM and byte_offset % arch.psum_bank_bytes:
            raise ctx.error("psum.bank_alignment", f"PSUM tiles start on a bank boundary ({arch.psum_bank_bytes} B), got byte offset {byte_offset}")
        return Storage(buffer, dtype, shape, name, partition_offset, byte_offset)
    try:
        offset = allocator.allocate(nbytes, f"tile {name or ''}{list(shape)} {dtype}")
    except Exception as err:  # capacity errors carry the allocator's numbers
        raise ctx.error(getattr(err, "rule", f"{buffer}.capacity"), getattr(err, "detail", str(err))) from None
    storage = Storage(buffer, dtype, shape, name, 0, offset)
    weakref.finalize(storage, allocator.free, offset)
    return storage


def _row_major_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


class NkiTensor:
    """A view of a Storage. Indexing, reshape, permute, broadcast and ``ap`` return new views."""

    __slots__ = ("storage", "dtype", "shape", "strides", "offset", "_ap", "_pending_matmul", "_indirect", "_overrun",
                 "_index_vars", "_mask_window", "__weakref__")
    __array_priority__ = 1000  # numpy scalars defer to our operators

    def __init__(self, storage: Storage, shape=None, strides=None, offset: int = 0, dtype: str | None = None):
        self.storage = storage
        self.dtype = dtype or storage.dtype
        self.shape = tuple(storage.shape if shape is None else shape)
        self.strides = tuple(_row_major_strides(storage.shape) if strides is None else strides)
        self.offset = offset
        self._ap = None
        self._pending_matmul = None  # set by nl.matmul on its fresh result (see memory_ops.accumulate_into)
        self._indirect = None  # (index tile, rows) for a per-partition indirect view (see language/dynamic.py)
        self._overrun = None  # ((axis, requested count, message, location), ...): see normalize_key
        self._index_vars = None  # per dim, the legacy index variable that indexed it (see Mask)
        self._mask_window = None  # {axis: first position} of a tile restricted by a legacy mask=

    # --- attributes as NKI names them -------------------------------------------------------
    @property
    def buffer(self) -> str:
        return self.storage.buffer

    @property
    def name(self) -> str:
        return self.storage.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def itemsize(self) -> int:
        return dtypes.itemsize(self.dtype)

    def __repr__(self) -> str:
        return f"NkiTensor({self.name or '?'}, shape={list(self.shape)}, dtype={self.dtype}, buffer={self.buffer})"

    def _view(self, shape, strides, offset, dtype=None) -> NkiTensor:
        return NkiTensor(self.storage, shape, strides, offset, dtype or self.dtype)

    def is_contiguous(self) -> bool:
        start = 1 if self.storage.on_chip else 0
        expected = 1
        for size, stride in reversed(list(zip(self.shape[start:], self.strides[start:]))):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def get_pattern(self) -> list[list[int]]:
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    # --- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key) -> NkiTensor:
        from .language.indexing import normalize_key

        overruns: list = []
        index_vars: list = []
        if self._mask_window and isinstance(key, tuple) and Ellipsis not in key:
            # A tile a masked op produced holds only its window of the index space: an index
            # expression over the full space (x[i_p, 0] with i_p over 128) is shifted into it.
            from .language.indexing import IndexExpr

            key = tuple(k._with(const=k.const - self._mask_window[i]) if isinstance(k, IndexExpr) and i in self._mask_window
                        else k for i, k in enumerate(key))
        dims = normalize_key(key, self.shape, self.storage.on_chip, overruns, index_vars)
        if self._mask_window:  # past the window is the part the masked op did not compute: clip it
            overruns = [o for o in overruns if o[0] not in self._mask_window]
        shape, strides, offset, out_axis, out_vars = [], [], self.offset, {}, []
        for axis, (start, count, step, keep) in enumerate(dims):
            offset += start * self.strides[axis]
            if keep:
                out_axis[axis] = len(shape)
                shape.append(count)
                strides.append(self.strides[axis] * step)
                inherited = self._index_vars[axis] if self._index_vars else None
                out_vars.append(index_vars[axis] if index_vars[axis] is not None else inherited)
        if not shape:  # HBM scalar selection keeps one element
            shape, strides, out_vars = [1], [1], [None]
        view = self._view(tuple(shape), tuple(strides), offset)
        if any(v is not None for v in out_vars):
            view._index_vars = tuple(out_vars)  # legacy masks match dims by index variable
        if overruns or self._overrun:
            # Clipped legacy index expressions: usable only under a mask that excludes the overrun.
            view._overrun = tuple((out_axis[a], n, msg, tracing.user_location()) for a, n, msg in overruns) + (self._overrun or ())
        return view

    def __setitem__(self, key, value) -> None:
        from .language.memory_ops import assign

        assign(self[key], value)

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def vector_select(self, dim: int, vector_offset: NkiTensor) -> NkiTensor:
        """Per-partition indirect rows: row i of the view is row ``vector_offset[i]`` (HBM only)."""
        from .language.dynamic import dynamic_view

        return dynamic_view(self, None, None, None, vector_offset, dim, None)

    def select(self, dim: int, index: int) -> NkiTensor:
        if not isinstance(index, int):
            raise tracing.current().error("view.dynamic_select", "dynamic select is not supported; use .ap(..., scalar_offset=...)")
        key = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    # --- reshaping views ----------------------------------------------------------------------
    def _require(self, ok: bool, rule: str, message: str) -> None:
        if not ok:
            raise tracing.current().error(rule, message)

    def permute(self, dims) -> NkiTensor:
        dims = tuple(dims)
        self._require(sorted(dims) == list(range(self.ndim)), "view.permute", f"{dims} is not a permutation of {self.ndim} dims")
        self._require(not self.storage.on_chip or dims[0] == 0, "view.partition_dim",
                      f"on-chip tensors keep the partition dim first; permute({dims}) moves it")
        return self._view(tuple(self.shape[d] for d in dims), tuple(self.strides[d] for d in dims), self.offset)

    @property
    def T(self) -> NkiTensor:  # noqa: N802 - numpy's name
        self._require(self.ndim == 2 and not self.storage.on_chip, "view.transpose",
                      "a transposed view is only possible for 2-D HBM tensors; on chip use nl.transpose / nisa.nc_transpose")
        return self.permute((1, 0))

    def broadcast(self, dim: int, size: int) -> NkiTensor:
        self._require(self.shape[dim] == 1, "view.broadcast", f"only size-1 dims broadcast; dim {dim} has size {self.shape[dim]}")
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim",
                      "on-chip tensors cannot broadcast the partition dim as a view")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = size, 0
        return self._view(tuple(shape), tuple(strides), self.offset)

    def broadcast_to(self, shape) -> NkiTensor:
        """Broadcast size-1 dims to ``shape`` (legacy method). Free dims broadcast as a view; a
        one-partition tile is copied to every partition through TensorE (as nl.broadcast_to)."""
        shape = tuple(shape)
        view = self
        if self.storage.on_chip and self.shape[0] == 1 and shape and shape[0] != 1:
            from .language.math_ops import broadcast_partitions

            view = broadcast_partitions(self, shape[0])
        while view.ndim < len(shape):
            view = view.expand_dim(1 if view.storage.on_chip and view.ndim >= 1 else 0)
        for dim, (have, want) in enumerate(zip(view.shape, shape)):
            if have != want:
                view = view.broadcast(dim, want)
        return view

    def expand_dim(self, dim: int) -> NkiTensor:
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim", "cannot insert a dim before the partition dim")
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._view(tuple(shape), tuple(strides), self.offset)

    def squeeze_dim(self, dim: int) -> NkiTensor:
        self._require(self.shape[dim] == 1, "view.squeeze", f"dim {dim} has size {self.shape[dim]}, not 1")
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim", "cannot remove the partition dim")
        return self._view(self.shape[:dim] + self.shape[dim + 1 :], self.strides[:dim] + self.strides[dim + 1 :], self.offset)

    def reshape_dim(self, dim: int, shape) -> NkiTensor:
        shape = list(shape)
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape[shape.index(-1)] = self.shape[dim] // max(known, 1)
        self._require(math.prod(shape) == self.shape[dim], "view.reshape", f"{shape} does not split dim {dim} of size {self.shape[dim]}")
        self._require(not (self.storage.on_chip and dim == 0 and len(shape) > 1), "view.partition_dim", "cannot split the partition dim")
        inner = self.strides[dim]
        new_strides = []
        for size in reversed(shape):
            new_strides.append(inner)
            inner *= size
        return self._view(self.shape[:dim] + tuple(shape) + self.shape[dim + 1 :],
                          self.strides[:dim] + tuple(reversed(new_strides)) + self.strides[dim + 1 :], self.offset)

    def flatten_dims(self, start_dim: int, end_dim: int) -> NkiTensor:
        self._require(not (self.storage.on_chip and start_dim == 0), "view.partition_dim", "cannot merge the partition dim")
        for d in range(start_dim, end_dim):
            self._require(self.strides[d] == self.strides[d + 1] * self.shape[d + 1], "view.flatten",
                          f"dims {start_dim}..{end_dim} are not contiguous in memory (strides {list(self.strides)})")
        size = math.prod(self.shape[start_dim : end_dim + 1])
        return self._view(self.shape[:start_dim] + (size,) + self.shape[end_dim + 1 :],
                          self.strides[:start_dim] + (self.strides[end_dim],) + self.strides[end_dim + 1 :], self.offset)

    def reshape(self, shape) -> NkiTensor:
        shape = tuple(int(s) for s in (shape if isinstance(shape, (tuple, list)) else (shape,)))
        if -1 in shape:
            known = math.prod(s for s in shape if s != -1)
            shape = tuple(self.size // known if s == -1 else s for s in shape)
        self._require(math.prod(shape) == self.size, "view.reshape", f"cannot reshape {list(self.shape)} ({self.size} elements) to {list(shape)}")
        on_chip = self.storage.on_chip
        self._require(not on_chip or shape[0] == self.shape[0], "view.partition_dim",
                      f"on-chip reshape keeps the partition dim ({self.shape[0]}), got {list(shape)}")
        start = 1 if on_chip else 0
        # Reshape within the (contiguous) free part, like numpy without copying.
        self._require(self._view(self.shape, self.strides, self.offset).is_contiguous(), "view.reshape",
                      f"reshape needs a contiguous view; this one has strides {list(self.strides)} for shape {list(self.shape)}")
        inner = _row_major_strides(shape[start:])
        base = self.strides[-1] if self.ndim > start else 1
        strides = (self.strides[0],) if on_chip else ()
        return self._view(shape, strides + tuple(s * base for s in inner), self.offset)

    def view(self, dtype) -> NkiTensor:
        dtype = dtypes.dtype_name(dtype)
        old, new = self.itemsize, dtypes.itemsize(dtype)
        self._require(self.strides[-1] == 1, "view.dtype", "reinterpreting needs a unit-stride last dim")
        last = self.shape[-1] * old // new
        self._require(last * new == self.shape[-1] * old, "view.dtype", f"{self.shape[-1]} x {old} bytes is not a whole number of {dtype}")
        scale = lambda s: s * old // new  # noqa: E731
        return self._view(self.shape[:-1] + (last,), tuple(scale(s) for s in self.strides[:-1]) + (1,),
                          scale(self.offset), dtype)

    def ap(self, pattern, offset: int | None = None, scalar_offset=None, vector_offset=None, indirect_dim: int = 0,
           dtype=None) -> NkiTensor:
        """Explicit ``[[stride, count], ...]`` access pattern over the storage (like as_strided)."""
        if scalar_offset is not None or vector_offset is not None:
            from .language.dynamic import dynamic_view

            return dynamic_view(self, pattern, offset, scalar_offset, vector_offset, indirect_dim, dtype)
        pattern = [tuple(int(x) for x in p) for p in pattern]
        dtype = dtypes.dtype_name(dtype) if dtype is not None else self.dtype
        base = self.offset if offset is None else self.offset + int(offset)
        return self._view(tuple(c for _, c in pattern), tuple(s for s, _ in pattern), base, dtype)

    # --- to the simulator ---------------------------------------------------------------------
    def access_pattern(self, keep_split: int | None = None) -> AccessPattern:
        """The simulator access pattern this view addresses (cached per view).

        Neighbouring dims that walk memory contiguously are merged; ``keep_split`` (a dim index)
        forbids merging across it, so the dims from there on stay separate free dims (reductions
        over trailing axes need that).
        """
        if self._overrun:
            from .errors import NkiValidationError

            _, _, message, location = self._overrun[0]
            raise NkiValidationError("index.out_of_bounds", message, location)
        if keep_split is not None:
            return self._build_ap(keep_split)
        if self._ap is None:
            self._ap = self._build_ap()
        return self._ap

    def _build_ap(self, keep_split: int | None = None) -> AccessPattern:
        dims = [(s, n) for s, n in zip(self.strides, self.shape)]
        size = self.itemsize
        storage = self.storage
        if storage.on_chip:
            per_partition = storage.free_elements * dtypes.itemsize(storage.dtype) // size
            p_rel, f_off = divmod(self.offset, per_partition) if per_partition else (0, self.offset)
            (p_stride, p_count), free = dims[0], dims[1:]
            if p_count > 1 and p_stride != per_partition:
                raise tracing.current().error(
                    "view.partition_stride",
                    f"the partition dim must step one partition at a time (stride {per_partition}), got stride {p_stride}",
                )
            free = _merge_groups(dims[1:], None if keep_split is None else keep_split - 1)
            if len(free) > MAX_FREE_DIMS:
                raise tracing.current().error("view.too_many_dims", f"{len(free)} free dims after merging; the hardware walks at most {MAX_FREE_DIMS}")
            return AccessPattern(storage.buffer, self.dtype, storage.partition_offset + p_rel, p_count,
                                 tuple(free), storage.byte_offset + f_off * size)
        if len(dims) == 1:
            row, free = (0, 1), dims
        else:
            row, free = dims[0], _merge_dims([d for d in dims[1:] if d[1] != 1] or [(1, 1)])
        if len(free) > MAX_FREE_DIMS:
            raise tracing.current().error("view.too_many_dims", f"{len(free)} free dims after merging; DMA walks at most {MAX_FREE_DIMS}")
        return AccessPattern(HBM, self.dtype, 0, row[1], tuple(free), self.offset * size, storage.name, row[0])

    # --- legacy operators (new tiles) ---------------------------------------------------------
    def _binary(self, other, op, reverse=False):
        from .language import math_ops

        return math_ops.binary(op, other, self) if reverse else math_ops.binary(op, self, other)

    def __add__(self, o):
        return self._binary(o, "add")

    def __radd__(self, o):
        return self._binary(o, "add", True)

    def __sub__(self, o):
        return self._binary(o, "subtract")

    def __rsub__(self, o):
        return self._binary(o, "subtract", True)

    def __mul__(self, o):
        return self._binary(o, "multiply")

    def __rmul__(self, o):
        return self._binary(o, "multiply", True)

    def __truediv__(self, o):
        return self._binary(o, "divide")

    def __rtruediv__(self, o):
        return self._binary(o, "divide", True)

    def __pow__(self, o):
        return self._binary(o, "power")

    def __neg__(self):
        from .language import math_ops

        return math_ops.unary("negative", self)

    def __lt__(self, o):
        return self._binary(o, "less")

    def __le__(self, o):
        return self._binary(o, "less_equal")

    def __gt__(self, o):
        return self._binary(o, "greater")

    def __ge__(self, o):
        return self._binary(o, "greater_equal")

    def __and__(self, o):
        return self._binary(o, "bitwise_and")

    def __or__(self, o):
        return self._binary(o, "bitwise_or")

    def __xor__(self, o):
        return self._binary(o, "bitwise_xor")

    def __iadd__(self, o):
        from .language.memory_ops import accumulate_into

        return accumulate_into(self, o)

    __hash__ = object.__hash__


def _merge_groups(dims: list[tuple[int, int]], split: int | None) -> list[tuple[int, int]]:
    """Merge contiguous dims, separately before and after index ``split`` (size-1 dims dropped)."""
    groups = [dims] if split is None else [dims[:split], dims[split:]]
    out: list[tuple[int, int]] = []
    for group in groups:
        kept = [d for d in group if d[1] != 1]
        if kept:
            out += _merge_dims(kept)
        elif split is not None and group is groups[-1]:
            out.append((1, 1))  # keep a (trivial) dim for the reduced group
    return out or [(1, 1)]


def _merge_dims(dims: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Merge neighbouring dims that walk memory contiguously (outer stride = inner stride x count)."""
    merged = [dims[0]]
    for stride, count in dims[1:]:
        o_stride, o_count = merged[-1]
        if o_stride == stride * count:
            merged[-1] = (stride, o_count * count)
        else:
            merged.append((stride, count))
    return merged


def hbm_storage(ctx, shape, dtype, name: str, kind: str, buffer: str = "shared_hbm") -> Storage:
    """Declare an HBM tensor in the kernel's tensor table."""
    from neuron_sim.program import TensorDecl

    name = ctx.unique_name(name or "hbm_tensor")
    ctx.tensors.append(TensorDecl(name, tuple(shape), dtype, kind))
    return Storage(buffer, dtypes.dtype_name(dtype), tuple(shape), name)


__all__ = ["NkiTensor", "Storage", "allocate_on_chip", "hbm_storage", "ON_CHIP", "HBM_BUFFERS", "SBUF", "PSUM", "HBM"]
