"""NkiTensor: storage plus a strided view, and its translation to simulator access patterns.

A tensor's storage lives in HBM (a tensor of the kernel's tensor table) or on chip (a block of
bytes in every partition of SBUF/PSUM). A view is ``offset + sum(strides[k] * i_k)`` in elements,
as in NKI. On chip, dim 0 is the partition dimension and its stride is the storage's per-partition
element count; every other dimension must stay inside a partition. Views are free: they only
change this arithmetic.

Run-time addressing is part of a view too: ``t.ap(pattern, scalar_offset=r, indirect_dim=d)``
starts ``r * prod(t.shape[d+1:])`` elements further in, ``r`` a register (a loop counter) or a
[1, 1] SBUF integer read at run time; ``hbm_t.ap(pattern, vector_offset=idx)`` (or
``hbm_t.vector_select(0, idx)``) has row ``p`` at row ``idx[p]`` of ``hbm_t`` - only an indirect
DMA (a gather or scatter, ``nisa.dma_copy``) can move such a view.

What builds instructions from tensors (the legacy arithmetic operators, ``t[...] = v``,
``t += v``, ``broadcast_to`` across partitions) belongs to ``nki.language``, which attaches those
methods here (``nki.language.operators``), as JAX attaches its numpy methods to its Array type:
this layer only describes memory.
"""

from __future__ import annotations

import dataclasses
import math

from neuron_sim import dtypes
from neuron_sim.isa import RegisterLoad
from neuron_sim.memory.access_pattern import HBM, MAX_FREE_DIMS, AccessPattern

from . import tracing
from .errors import NkiValidationError
from .indexing import IndexExpr, affine_view, is_grid_key, normalize_key
from .registers import VirtualRegister, new_register
from .storage import Storage, block_tile, row_major_strides


class NkiTensor:
    """A view of a Storage. Indexing, reshape, permute, broadcast and ``ap`` return new views."""

    __slots__ = ("storage", "dtype", "shape", "strides", "offset", "_ap", "_pending_matmul", "_indirect", "_overrun",
                 "_index_vars", "_mask_window", "_dynamic", "partition_axis", "_column", "__weakref__")
    __array_priority__ = 1000  # numpy scalars defer to our operators

    def __init__(self, storage: Storage, shape=None, strides=None, offset: int = 0, dtype: str | None = None,
                 partition_axis: int | None = None):
        self.storage = storage
        self.dtype = dtype or storage.dtype
        self.shape = tuple(storage.shape if shape is None else shape)
        self.strides = tuple(storage.strides() if strides is None else strides)
        self.offset = offset
        # On chip: the dim of this view that walks partitions (0 but for legacy block-dim tiles,
        # ``nl.ndarray((n, nl.par_dim(128), f))``, until their block dims are indexed away).
        self.partition_axis = storage.partition_axis if partition_axis is None and shape is None else (partition_axis or 0)
        self._ap = None
        self._pending_matmul = None  # set by nl.matmul on its fresh result (see memory_ops.accumulate_into)
        self._indirect = None  # (index tile, rows) of a vector_offset view: row p is row index[p] of the storage
        self._overrun = None  # ((axis, requested count, message, location), ...): see normalize_key
        self._index_vars = None  # per dim, the legacy index variable that indexed it (see Mask)
        self._mask_window = None  # {axis: first position} of a tile restricted by a legacy mask=
        # ((register name, bytes per step), ...): run-time start offsets (scalar_offset). They live
        # on the view, not only on its cached access pattern, so every further view keeps them.
        self._dynamic = ()
        # A 1-D HBM view that indexing left standing in a column (``x[0:128, j]``, ``v[i_p]`` with
        # i_p = nl.arange(n)[:, None]): a tile loaded from it is [n, 1], not [1, n].
        self._column = False

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

    def _view(self, shape, strides, offset, dtype=None, partition_axis: int | None = None) -> NkiTensor:
        if self._indirect is not None:
            raise self._indirect_only()
        view = NkiTensor(self.storage, shape, strides, offset, dtype or self.dtype,
                         self.partition_axis if partition_axis is None else partition_axis)
        view._dynamic = self._dynamic
        return view

    def _block_view(self, key) -> NkiTensor:
        """``t[i, ...]`` of a directly allocated tensor with block dims: the tile at the address
        its allocation gives logical block ``i``, indexed by the rest of the key."""
        pa = self.storage.partition_axis
        head = key[:pa]
        if len(head) < pa or not all(isinstance(k, int) or type(k).__name__.startswith(("int", "uint")) for k in head):
            raise self._whole_blocks()
        index = tuple(int(k) for k in head)
        if any(not 0 <= i < n for i, n in zip(index, self.shape)):
            raise tracing.current().error("index.out_of_bounds", f"block {index} of {self!r} is outside its block dims {list(self.shape[:pa])}")
        tile = NkiTensor(block_tile(tracing.current(), self.storage, index))
        return tile[key[pa:]] if key[pa:] else tile

    def _whole_blocks(self) -> NkiValidationError:
        return tracing.current().error(
            "alloc.block_index",
            f"{self!r} is directly allocated (nki.compiler): each logical block is a tile of its own, at the address "
            "its allocation gives it; index one block at a time with integers (t[i, ...])")

    def masked_indirect(self, key) -> NkiTensor:
        """The rows ``key[0]`` (a slice) and free ranges ``key[1:]`` of an indirect view, as a legacy
        ``mask=`` keeps them: its index tile is cut to the rows kept."""
        index, rows = self._indirect
        plain = NkiTensor(self.storage, self.shape, self.strides, self.offset, self.dtype)[(slice(None),) + tuple(key[1:])]
        kept = index[key[0]] if index.ndim == 1 else index[key[0], :]
        view = NkiTensor(plain.storage, (kept.shape[0],) + plain.shape[1:], plain.strides, plain.offset, plain.dtype)
        view._indirect = (kept, rows)
        return view

    def _indirect_only(self) -> NkiValidationError:
        return tracing.current().error(
            "view.vector_offset",
            f"{self!r} gathers/scatters rows by a run-time index: only a DMA (nisa.dma_copy, nl.load, nl.store) can "
            "move it, and it cannot be sliced or reshaped (build the view you need first, then apply vector_offset)",
        )

    def is_contiguous(self) -> bool:
        """Whether the view walks memory densely (on chip: within each partition)."""
        dims = [(n, s) for i, (n, s) in enumerate(zip(self.shape, self.strides))
                if not (self.storage.on_chip and i == self.partition_axis)]
        expected = 1
        for size, stride in reversed(dims):
            if size != 1 and stride != expected:
                return False
            expected *= size
        return True

    def get_pattern(self) -> list[list[int]]:
        return [[s, n] for s, n in zip(self.strides, self.shape)]

    # --- indexing -----------------------------------------------------------------------------
    def __getitem__(self, key) -> NkiTensor:
        key = key if isinstance(key, tuple) else (key,)
        if self.storage.on_chip and self.ndim == 1 and len(key) == 2 and Ellipsis not in key:
            # a [P] tile is [P, 1] on the chip (one element per partition): legacy kernels index the
            # column they took out of a wider tile (t[:, i]) as t[:, 0]
            return self.reshape((self.shape[0], 1))[key]
        if self.storage.blocks is not None:
            return self._block_view(key)
        if any(isinstance(k, NkiTensor) for k in key):
            return self._index_by_tile(key)
        if is_grid_key(key):
            grid_overruns: list = []
            shape, strides, offset = affine_view(key, self.shape, self.strides, grid_overruns)
            view = self._view(shape, strides, self.offset + offset, partition_axis=0)
            if self._mask_window:  # past the window is the part the masked op did not compute: clip it
                grid_overruns = [o for o in grid_overruns if o[0] not in self._mask_window]
                view._mask_window = dict(self._mask_window)
            if grid_overruns:  # clipped: usable only under a mask that excludes the overrun
                view._overrun = tuple((a, n, msg, tracing.user_location()) for a, n, msg in grid_overruns)
            return view
        overruns: list = []
        index_vars: list = []
        if self._mask_window and isinstance(key, tuple) and Ellipsis not in key:
            # A tile a masked op produced holds only its window of the index space: an index
            # expression over the full space (x[i_p, 0] with i_p over 128) is shifted into it.
            key = tuple(k._with(const=k.const - self._mask_window[i]) if isinstance(k, IndexExpr) and i in self._mask_window
                        else k for i, k in enumerate(key))
        dims = normalize_key(key, self.shape, self.partition_axis if self.storage.on_chip else None, overruns, index_vars)
        if self._mask_window:  # past the window is the part the masked op did not compute: clip it
            overruns = [o for o in overruns if o[0] not in self._mask_window]
        shape, strides, offset, out_axis, out_vars = [], [], self.offset, {}, []
        partition_axis = 0
        for axis, (start, count, step, keep) in enumerate(dims):
            offset += start * self.strides[axis]
            if keep:
                if axis == self.partition_axis:
                    partition_axis = len(shape)
                out_axis[axis] = len(shape)
                shape.append(count)
                strides.append(self.strides[axis] * step)
                inherited = self._index_vars[axis] if self._index_vars else None
                out_vars.append(index_vars[axis] if index_vars[axis] is not None else inherited)
        if not shape:  # HBM scalar selection keeps one element
            shape, strides, out_vars = [1], [1], [None]
        view = self._view(tuple(shape), tuple(strides), offset, partition_axis=partition_axis)
        kept = [axis for axis, d in enumerate(dims) if d[3]]
        if not self.storage.on_chip and len(kept) == 1:
            (axis,) = kept
            k = key[axis] if axis < len(key) else None
            view._column = (axis < len(dims) - 1 or (isinstance(k, IndexExpr) and k.ndim >= 2 and k.axis == 0)
                            or (self._column and self.ndim == 1))
        if any(v is not None for v in out_vars):
            view._index_vars = tuple(out_vars)  # legacy masks match dims by index variable
        if overruns or self._overrun:
            # Clipped legacy index expressions: usable only under a mask that excludes the overrun.
            view._overrun = tuple((out_axis[a], n, msg, tracing.user_location()) for a, n, msg in overruns) + (self._overrun or ())
        return view

    def _index_by_tile(self, key) -> NkiTensor:
        """``hbm[idx, ...]`` with ``idx`` an on-chip [P, 1] (or [P]) integer tile: row ``p`` of the
        view is row ``idx[p]`` of the tensor - an indirect view a DMA gathers from or scatters into."""
        ctx = tracing.current()
        tiles = [i for i, k in enumerate(key) if isinstance(k, NkiTensor)]
        if not self.storage.on_chip and len(tiles) == 1 and tiles[0] > 0 and all(_is_int_index(k) for k in key[:tiles[0]]):
            # hbm[b, idx, ...]: integers before the tile pick one sub-tensor, whose rows idx selects
            lead = key[:tiles[0]]
            return self[lead + (slice(None),) * (self.ndim - len(lead))][key[tiles[0]:]]
        if self.storage.on_chip or tiles != [0]:
            raise ctx.error("index.type", f"an index tile selects rows (dim 0) of an HBM tensor; {self!r} got one at "
                                          f"dim {tiles} of its index")
        return self[(slice(None),) + key[1:]]._indirect_view(None, None, key[0], 0, None)

    def slice(self, dim: int, start: int, end: int, step: int = 1) -> NkiTensor:
        key = [slice(None)] * self.ndim
        key[dim] = slice(start, end, step)
        return self[tuple(key)]

    def vector_select(self, dim: int, vector_offset: NkiTensor) -> NkiTensor:
        """Per-partition indirect rows: row i of the view is row ``vector_offset[i]`` (HBM only)."""
        return self._indirect_view(None, None, vector_offset, dim, None)

    def select(self, dim: int, index: int) -> NkiTensor:
        if not isinstance(index, int):
            raise tracing.current().error("view.dynamic_select", "dynamic select is not supported; use .ap(..., scalar_offset=...)")
        key = [slice(None)] * self.ndim
        key[dim] = index
        return self[tuple(key)]

    # --- reshaping views ----------------------------------------------------------------------
    def _plain_tile(self) -> None:
        """Reshaping views assume the partition dim is dim 0: a legacy block-dim tile
        (``(n, par_dim(128), f)``) is indexed down to one tile first (``t[i]``)."""
        if self.storage.on_chip and self.partition_axis != 0:
            raise tracing.current().error(
                "view.partition_dim", f"{self!r} has block dims before its partition dim (dim {self.partition_axis}): "
                "index a block (t[i]) before reshaping, permuting or broadcasting")

    def _require(self, ok: bool, rule: str, message: str) -> None:
        if not ok:
            raise tracing.current().error(rule, message)

    def permute(self, dims) -> NkiTensor:
        self._plain_tile()
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
        self._plain_tile()
        self._require(self.shape[dim] == 1, "view.broadcast", f"only size-1 dims broadcast; dim {dim} has size {self.shape[dim]}")
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim",
                      "on-chip tensors cannot broadcast the partition dim as a view")
        shape, strides = list(self.shape), list(self.strides)
        shape[dim], strides[dim] = size, 0
        return self._view(tuple(shape), tuple(strides), self.offset)

    def expand_dim(self, dim: int) -> NkiTensor:
        self._plain_tile()
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim", "cannot insert a dim before the partition dim")
        shape, strides = list(self.shape), list(self.strides)
        shape.insert(dim, 1)
        strides.insert(dim, 0)
        return self._view(tuple(shape), tuple(strides), self.offset)

    def squeeze_dim(self, dim: int) -> NkiTensor:
        self._plain_tile()
        self._require(self.shape[dim] == 1, "view.squeeze", f"dim {dim} has size {self.shape[dim]}, not 1")
        self._require(not (self.storage.on_chip and dim == 0), "view.partition_dim", "cannot remove the partition dim")
        return self._view(self.shape[:dim] + self.shape[dim + 1 :], self.strides[:dim] + self.strides[dim + 1 :], self.offset)

    def reshape_dim(self, dim: int, shape) -> NkiTensor:
        self._plain_tile()
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
        self._plain_tile()
        self._require(not (self.storage.on_chip and start_dim == 0), "view.partition_dim", "cannot merge the partition dim")
        for d in range(start_dim, end_dim):
            self._require(self.strides[d] == self.strides[d + 1] * self.shape[d + 1], "view.flatten",
                          f"dims {start_dim}..{end_dim} are not contiguous in memory (strides {list(self.strides)})")
        size = math.prod(self.shape[start_dim : end_dim + 1])
        return self._view(self.shape[:start_dim] + (size,) + self.shape[end_dim + 1 :],
                          self.strides[:start_dim] + (self.strides[end_dim],) + self.strides[end_dim + 1 :], self.offset)

    def reshape(self, shape) -> NkiTensor:
        self._plain_tile()
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
        inner = row_major_strides(shape[start:])
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
        if scalar_offset is not None and vector_offset is not None:
            raise tracing.current().error("view.vector_offset", "a view takes a scalar_offset or a vector_offset, not both")
        if scalar_offset is not None:
            return self._scalar_offset_view(pattern, offset, scalar_offset, indirect_dim, dtype)
        if vector_offset is not None:
            return self._indirect_view(pattern, offset, vector_offset, indirect_dim, dtype)
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
            _, _, message, location = self._overrun[0]
            raise NkiValidationError("index.out_of_bounds", message, location)
        if keep_split is not None:
            return self._build_ap(keep_split)
        if self._ap is None:
            self._ap = self._build_ap()
        return self._ap

    def _build_ap(self, keep_split: int | None = None) -> AccessPattern:
        if self._indirect is not None:
            raise self._indirect_only()
        ap = self._static_ap(keep_split)
        if not self._dynamic:
            return ap
        terms = []
        for register, nbytes in self._dynamic:
            elements, rest = divmod(nbytes, ap.itemsize)
            if rest:
                raise tracing.current().error(
                    "view.scalar_offset", f"a run-time step of {nbytes} bytes is not a whole number of {ap.dtype} elements")
            terms.append((register, elements))
        return dataclasses.replace(ap, dynamic=ap.dynamic + tuple(terms))

    def _static_ap(self, keep_split: int | None) -> AccessPattern:
        dims = [(s, n) for s, n in zip(self.strides, self.shape)]
        size = self.itemsize
        storage = self.storage
        if storage.blocks is not None:
            raise self._whole_blocks()
        if storage.on_chip:
            per_partition = storage.free_elements * dtypes.itemsize(storage.dtype) // size
            p_rel, f_off = divmod(self.offset, per_partition) if per_partition else (0, self.offset)
            pa = self.partition_axis
            p_stride, p_count = dims[pa]
            if p_count > 1 and p_stride != per_partition:
                raise tracing.current().error(
                    "view.partition_stride",
                    f"the partition dim must step one partition at a time (stride {per_partition}), got stride {p_stride}",
                )
            # Block dims (before the partition dim) walk the free bytes like any free dim.
            split = None if keep_split is None else keep_split - (1 if pa < keep_split else 0)
            free = merge_groups(dims[:pa] + dims[pa + 1:], split)
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

    # --- run-time addressing ------------------------------------------------------------------
    def _scalar_offset_view(self, pattern, offset, scalar_offset, indirect_dim, dtype) -> NkiTensor:
        ctx = tracing.current()
        if isinstance(scalar_offset, NkiTensor):
            if scalar_offset.buffer != "sbuf" or scalar_offset.size != 1:
                raise ctx.error("view.scalar_offset",
                                f"scalar_offset must be a register or a [1, 1] SBUF integer, got {scalar_offset!r}")
            register = new_register(ctx, "offset")
            ctx.emit(RegisterLoad(register=register.name, src=scalar_offset.access_pattern()))
        elif isinstance(scalar_offset, VirtualRegister):
            register = scalar_offset
        else:
            raise ctx.error("view.scalar_offset", f"scalar_offset must be a register or a [1, 1] SBUF tensor, got {scalar_offset!r}")
        if isinstance(indirect_dim, bool) or not isinstance(indirect_dim, int) or not 0 <= indirect_dim < self.ndim:
            raise ctx.error("view.scalar_offset", f"indirect_dim {indirect_dim!r} is outside the {self.ndim} dims of {self!r}")
        if self.storage.on_chip and indirect_dim == 0:
            raise ctx.error("view.scalar_offset", "a run-time offset cannot move along the partition dim of an on-chip tensor")
        # One step of dim ``indirect_dim``: prod(shape[d+1:]) elements of a dense tensor, and for a
        # view (a slice ``x[:, 0:4]``) its own stride, so the offset still moves whole rows of ``x``.
        step = self.strides[indirect_dim] if not self.is_contiguous() else math.prod(self.shape[indirect_dim + 1 :])
        view = self.ap(pattern, offset, dtype=dtype) if pattern is not None else self._view(self.shape, self.strides, self.offset)
        view._dynamic = view._dynamic + ((register.name, step * self.itemsize),)
        return view

    def _indirect_view(self, pattern, offset, vector_offset, indirect_dim, dtype) -> NkiTensor:
        ctx = tracing.current()
        if self.storage.on_chip:
            raise ctx.error("view.vector_offset", f"vector_offset indexes an HBM tensor; {self!r} is on chip")
        if indirect_dim != 0:
            raise ctx.error("view.vector_offset", f"vector_offset selects along dim 0, got indirect_dim={indirect_dim}")
        if not isinstance(vector_offset, NkiTensor) or vector_offset.buffer != "sbuf" or vector_offset.size != vector_offset.shape[0]:
            raise ctx.error("view.vector_offset", f"vector_offset must be a [P, 1] SBUF tile of indices, got {vector_offset!r}")
        base = self.ap(pattern, offset, dtype=dtype) if pattern is not None else self
        view = NkiTensor(base.storage, (vector_offset.shape[0],) + base.shape[1:], base.strides, base.offset, base.dtype)
        view._indirect = (vector_offset, base.shape[0])
        return view

    __hash__ = object.__hash__


def _is_int_index(k) -> bool:
    if isinstance(k, IndexExpr):
        return k.coeff == 0
    return not isinstance(k, (bool, NkiTensor, slice)) and hasattr(k, "__index__")


def broadcast_view(t: NkiTensor, shape) -> NkiTensor:
    """``t`` broadcast to ``shape`` as a view: missing leading free dims are inserted and size-1
    dims stretched (stride 0). The partition dim of an on-chip tile is not a view: callers that
    need it broadcast (``broadcast_to``) copy across partitions first."""
    shape = tuple(shape)
    view = t
    while view.ndim < len(shape):
        view = view.expand_dim(1 if view.storage.on_chip and view.ndim >= 1 else 0)
    for dim, (have, want) in enumerate(zip(view.shape, shape)):
        if have != want:
            view = view.broadcast(dim, want)
    return view


def merge_groups(dims: list[tuple[int, int]], split: int | None) -> list[tuple[int, int]]:
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


__all__ = ["NkiTensor", "broadcast_view", "merge_groups"]
