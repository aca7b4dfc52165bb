"""Creating tensors and moving data: ndarray/zeros/full, load/store/copy, and in-place assignment."""

from __future__ import annotations

import numpy as np
from neuron_sim import ValidationError, dtypes
from neuron_sim.isa import AffineSelect, DmaCopy, DmaIndirect, DmaTranspose, Matmul, Memset, TensorCopy, TensorTensor

from .. import tracing
from ..errors import NkiValidationError
from ..indexing import Mask, folds_constant_mask, par_dim
from ..storage import HBM_BUFFERS, ON_CHIP, Allocation, allocate_on_chip, auto_allocated, directly_allocated, hbm_storage
from ..tensor import NkiTensor
from .op_names import op_name

BUFFERS = ("sbuf", "psum") + HBM_BUFFERS


def _shape(shape) -> tuple[tuple[int, ...], int]:
    """(shape, partition axis): the dim marked ``nl.par_dim`` is the partition dim (0 unmarked);
    dims before it are legacy block dims."""
    shape = shape if isinstance(shape, (tuple, list)) else (shape,)
    out = tuple(int(s.size) if isinstance(s, par_dim) else int(s) for s in shape)
    if any(s <= 0 for s in out):
        raise tracing.current().error("tensor.shape", f"tensor dimensions must be positive, got {list(out)}")
    marked = [i for i, s in enumerate(shape) if isinstance(s, par_dim)]
    if len(marked) > 1:
        raise tracing.current().error("tensor.par_dim", f"a tile has one partition dim, {list(shape)} marks {len(marked)}")
    return out, marked[0] if marked else 0


def nki_dtype(dtype) -> str:
    """The NKI dtype name of ``dtype``; 64-bit types and others NKI does not have are rejected."""
    ctx = tracing.current()
    try:
        name = dtypes.dtype_name(dtype)
    except ValidationError as err:
        raise ctx.error(err.rule, err.detail) from None
    if name in dtypes.HBM_ONLY:
        raise ctx.error("dtype.unsupported", f"{name} is not an NKI dtype (no NeuronCore engine computes in it); use float32 or int32")
    return name


def ndarray(shape, dtype, buffer="sbuf", name: str = "", address=None) -> NkiTensor:
    """A new, uninitialized tensor (on-chip memory reads as NaN until written)."""
    ctx = tracing.current()
    buffer = getattr(buffer, "value", buffer)
    if isinstance(buffer, Allocation):  # nki.compiler direct allocation
        if not auto_allocated(ctx.kernel_code):
            shape, partition_axis = _shape(shape)
            return NkiTensor(directly_allocated(ctx, buffer, shape, nki_dtype(dtype), name, partition_axis))
        buffer = buffer.buffer
    if buffer not in BUFFERS:
        raise ctx.error("tensor.buffer", f"unknown buffer {buffer!r}; use nl.sbuf, nl.psum, nl.hbm, nl.shared_hbm or nl.private_hbm")
    shape, partition_axis = _shape(shape)
    dtype = nki_dtype(dtype)
    if buffer in ON_CHIP:
        return NkiTensor(allocate_on_chip(ctx, buffer, shape, dtype, name, address, partition_axis))
    kind = "internal"  # becomes an output if the kernel returns it
    return NkiTensor(hbm_storage(ctx, shape, dtype, name, kind, buffer))


def full(shape, fill_value, dtype, buffer="sbuf", name: str = "", lazy_initialization: bool = False) -> NkiTensor:
    """A new tensor filled with ``fill_value``. ``lazy_initialization`` (legacy kernels) lets the
    compiler defer the fill to the tile's first use: the values are the same, so it fills at once."""
    t = ndarray(shape, dtype, buffer, name)
    fill(t, fill_value)
    return t


def zeros(shape, dtype, buffer="sbuf", name: str = "", lazy_initialization: bool = False) -> NkiTensor:
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype, buffer="sbuf", name: str = "", lazy_initialization: bool = False) -> NkiTensor:
    return full(shape, 1, dtype, buffer, name)


def zeros_like(x: NkiTensor, dtype=None, buffer=None, name: str = "") -> NkiTensor:
    return zeros(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def empty_like(x: NkiTensor, dtype=None, buffer=None, name: str = "") -> NkiTensor:
    return ndarray(x.shape, dtype or x.dtype, buffer or x.buffer, name)


def fill(t: NkiTensor, value) -> None:
    """Set every element of ``t`` to ``value`` (memset on chip; a DMA from a filled tile in HBM)."""
    ctx = tracing.current()
    if t.buffer in ON_CHIP:
        ctx.emit(Memset(dst=t.access_pattern(), value=float(value), engine="vector" if t.buffer == "psum" else "gpsimd"))
        if t.buffer == "psum":
            mark_psum_written(t)
        return
    # HBM: DMA from one filled tile, up to 128 rows at a time.
    rows = t.shape[0] if t.ndim > 1 else 1
    chunk = min(rows, ctx.arch.num_partitions)
    tile = full((chunk,) + (t.shape[1:] if t.ndim > 1 else t.shape), value, t.dtype)
    for r in range(0, rows, chunk):
        n = min(chunk, rows - r)
        ctx.emit(DmaCopy(dst=(t[r : r + n] if t.ndim > 1 else t).access_pattern(), src=tile[0:n].access_pattern()))


def dma_move(dst: NkiTensor, src: NkiTensor, oob_mode: str = "error", dge: str = "none", engine: str = "sync",
             name: str | None = None, accumulate: bool = False):
    """One DMA from ``src`` to ``dst``; a gather or scatter when the HBM side is an indirect view
    (rows picked by an on-chip index tile: ``t.ap(..., vector_offset=idx)`` or ``t[idx, ...]``),
    whose descriptors GpSimd's software DGE generates."""
    ctx = tracing.current()
    if src._indirect is None and dst._indirect is None:
        return ctx.emit(DmaCopy(dst=dst.access_pattern(), src=src.access_pattern(), dge=dge, engine=engine, name=name))
    if src._indirect is not None and dst._indirect is not None:
        raise ctx.error("dma.indirect", "a DMA can gather or scatter, not both")
    gather = src._indirect is not None
    table_view, onchip = (src, dst) if gather else (dst, src)
    index, rows = table_view._indirect
    table = NkiTensor(table_view.storage, (rows,) + table_view.shape[1:], table_view.strides, table_view.offset,
                      table_view.dtype)
    return ctx.emit(DmaIndirect(direction="gather" if gather else "scatter", onchip=onchip.access_pattern(),
                                table=table.access_pattern(), index=index.reshape((index.shape[0], 1)).access_pattern(),
                                oob_mode=oob_mode, accumulate=accumulate, name=name))


@folds_constant_mask
def load(src: NkiTensor, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """Copy an HBM tensor into a new SBUF tile (optionally casting)."""
    ctx = tracing.current()
    if src.buffer in ON_CHIP:
        raise ctx.error("load.source", f"nl.load reads HBM; {src!r} is already on chip (use nl.copy)")
    src = apply_mask(mask, src)[0]
    shape = src.shape if src.ndim > 1 else (src.shape + (1,) if src._column else (1,) + src.shape)
    tile = ndarray(shape, dtype or src.dtype, "sbuf")
    dma_move(tile, src)
    inherit_window(tile, src)
    return tile


@folds_constant_mask
def load_transpose2d(src: NkiTensor, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """Load a 2-D HBM tensor [A, B] transposed into a new [B, A] SBUF tile (a DMA transpose)."""
    ctx = tracing.current()
    if src.buffer in ON_CHIP:
        raise ctx.error("load.source", f"nl.load_transpose2d reads HBM; {src!r} is on chip (use nl.transpose)")
    src = apply_mask(mask, src)[0]
    if src.ndim != 2:
        raise ctx.error("transpose.rank", f"nl.load_transpose2d takes a 2-D tensor, got shape {list(src.shape)}")
    out = ndarray((src.shape[1], src.shape[0]), src.dtype, "sbuf")
    ctx.emit(DmaTranspose(dst=out.access_pattern(), src=src.access_pattern()))
    return out if dtype is None or dtypes.dtype_name(dtype) == out.dtype else copy(out, dtype)


def shared_constant(constant, dtype=None) -> NkiTensor:
    """An HBM tensor holding ``constant`` (values known when the kernel is traced), built into the
    kernel as NKI builds it into the NEFF: every launch binds it before the kernel runs."""
    ctx = tracing.current()
    values = np.asarray(constant)
    dtype = nki_dtype(dtype if dtype is not None else values.dtype)
    storage = hbm_storage(ctx, values.shape, dtype, "shared_constant", "input")
    ctx.constants[storage.name] = values.astype(dtypes.to_numpy(dtype))
    return NkiTensor(storage)


def shared_identity_matrix(n: int, dtype="uint8", dst: NkiTensor | None = None) -> NkiTensor:
    """An [n, n] identity matrix in SBUF (ones, then GpSimd keeps the diagonal p - j == 0)."""
    ctx = tracing.current()
    out = dst if dst is not None else ndarray((n, n), dtype, "sbuf")
    ones = full((n, n), 1, out.dtype)
    ctx.emit(AffineSelect(dst=out.access_pattern(), src=ones.access_pattern(), pattern=((-1, n),), on_false_value=0.0,
                          channel_multiplier=1, cmp_op="equal"))
    return out


@folds_constant_mask
def store(dst: NkiTensor, value, mask: Mask | None = None) -> None:
    """Copy an on-chip tile to HBM. A PSUM tile goes through SBUF first (DMA cannot read PSUM)."""
    ctx = tracing.current()
    if dst.buffer in ON_CHIP:
        raise ctx.error("store.destination", f"nl.store writes HBM; {dst!r} is on chip (use nl.copy or nisa.tensor_copy)")
    if isinstance(value, (int, float, bool)):  # a number: fill the destination (128 rows at a time)
        (dst,) = apply_mask(mask, dst)
        fill(dst, value)
        return
    value = as_tile(value, dst)
    dst, value = apply_mask(mask, dst, value)
    if value.buffer == "psum":
        value = copy(value)
    dma_move(dst, value)


@folds_constant_mask
def copy(x: NkiTensor, dtype=None, mask: Mask | None = None) -> NkiTensor:
    """A new SBUF tile with ``x``'s values (PSUM or SBUF source, VectorE copy)."""
    ctx = tracing.current()
    if x.buffer not in ON_CHIP:
        return load(x, dtype, mask)
    x = apply_mask(mask, x)[0]
    out = ndarray(x.shape, dtype or x.dtype, "sbuf")
    ctx.emit(TensorCopy(dst=out.access_pattern(), src=x.access_pattern(), engine="vector"))
    inherit_window(out, x)
    return out


def as_tile(value, like: NkiTensor) -> NkiTensor:
    """``value`` as a tensor: numbers become a filled SBUF tile shaped like ``like``."""
    if isinstance(value, NkiTensor):
        return value
    if isinstance(value, (int, float, bool)):
        shape = like.shape if like.ndim > 1 else (1,) + like.shape
        return full(shape, value, like.dtype)
    if isinstance(value, LoopReduction):
        raise tracing.current().error("loop_reduce.target", "nl.loop_reduce reduces into the tile it is assigned to "
                                      "(t[...] = nl.loop_reduce(x, op, loop_indices)); it is not a tile of its own")
    raise tracing.current().error("operand.type", f"expected a tensor or a number, got {type(value).__name__}")


class LoopReduction:
    """``nl.loop_reduce(x, op, loop_indices)``: NKI defines it by the tile it is assigned to, which
    is also the op's other input (``t[...] = nl.loop_reduce(x, np.add, [k])`` is ``t[...] = t[...]
    + x``). It is not a tile itself: anything but assigning it into its accumulator is refused."""

    __slots__ = ("x", "op", "mask")

    def __init__(self, x: NkiTensor, op: str, mask):
        self.x, self.op, self.mask = x, op, mask

    def reduce_into(self, dst: NkiTensor) -> None:
        (x,) = apply_mask(self.mask, self.x)
        tracing.current().emit(TensorTensor(dst=dst.access_pattern(), in0=dst.access_pattern(), in1=x.access_pattern(),
                                            op=self.op))


def loop_reduce(x: NkiTensor, op, loop_indices, *, dtype=None, mask: Mask | None = None, **_kwargs) -> LoopReduction:
    """See LoopReduction; ``loop_indices`` name the loops the compiler may reduce across (every
    loop is unrolled here) and the result takes the dtype of the tile it is assigned to."""
    if not isinstance(x, NkiTensor) or x.buffer not in ON_CHIP:
        raise tracing.current().error("loop_reduce.operand", f"nl.loop_reduce reduces an on-chip tile, got {x!r}")
    return LoopReduction(x, op_name(op), mask)


def assign(dst: NkiTensor, value) -> None:
    """``dst[...] = value``: write ``value`` into the view ``dst``."""
    ctx = tracing.current()
    if isinstance(value, LoopReduction):
        value.reduce_into(dst)
        return
    if value is dst or getattr(value, "_assigned_to", None) is dst:
        return  # the result was already computed into dst (``dst[...] += x`` lands here)
    value = as_tile(value, dst)
    if value._mask_window and value.shape != dst.shape:
        # ``t[i_p, i_f] = nisa.op(..., mask=m)``: a masked result fills only the window it computed.
        key = [slice(None)] * dst.ndim
        for axis, start in value._mask_window.items():
            if axis < dst.ndim and dst.shape[axis] != value.shape[axis]:
                key[axis] = slice(start, start + value.shape[axis])
        dst = dst[tuple(key)]
    if dst.buffer not in ON_CHIP or value.buffer not in ON_CHIP:
        dma_move(dst, value)
        return
    ctx.emit(TensorCopy(dst=dst.access_pattern(), src=value.access_pattern(), engine="vector"))


def accumulate_into(dst: NkiTensor, value) -> NkiTensor:
    """``dst += value``. A fresh matmul result retargets its matmul to accumulate into ``dst`` in
    PSUM, as the hardware does (``psum[...] += nl.matmul(...)``); anything else adds elementwise."""
    ctx = tracing.current()
    last = ctx.instructions[-1] if ctx.instructions else None
    pending = getattr(value, "_pending_matmul", None) if isinstance(value, NkiTensor) else None
    if pending is not None and pending is last and dst.buffer == "psum":
        target = dst.access_pattern()
        if (target.partition_count, target.free_size) != (pending.dst.partition_count, pending.dst.free_size):
            raise ctx.error("matmul.dst_shape", f"accumulating a {list(value.shape)} matmul result into {list(dst.shape)}")
        ctx.instructions.pop()
        ctx.emit(Matmul(dst=target, stationary=pending.stationary, moving=pending.moving,
                        accumulate=psum_written(dst), perf_mode=pending.perf_mode, location=pending.location))
        mark_psum_written(dst)
        result = dst
    else:
        value = as_tile(value, dst)
        ctx.emit(TensorTensor(dst=dst.access_pattern(), in0=dst.access_pattern(), in1=value.access_pattern(), op="add"))
        result = dst
    return result


def inherit_window(out, *inputs) -> None:
    """A tile computed from mask-restricted inputs covers the same window of the index space
    (along the axes it kept), so assigning it into a full tile lands in the right place."""
    if not isinstance(out, NkiTensor):
        return
    for t in inputs:
        if isinstance(t, NkiTensor) and t._mask_window:
            window = {a: s for a, s in t._mask_window.items() if a < out.ndim and a < t.ndim and out.shape[a] == t.shape[a]}
            if window:
                out._mask_window = window
                return


def psum_written(t: NkiTensor) -> bool:
    """Whether the PSUM region ``t`` addresses was written since its tile was allocated."""
    ap = t.access_pattern()
    p0, p1 = ap.partition_start, ap.partition_start + ap.partition_count
    lo, hi = ap.byte_span()
    return any(a <= p0 and p1 <= b and c <= lo and hi <= d for a, b, c, d in t.storage.written)


def mark_psum_written(t: NkiTensor) -> None:
    ap = t.access_pattern()
    t.storage.written.append((ap.partition_start, ap.partition_start + ap.partition_count, *ap.byte_span()))


def apply_mask(mask: Mask | None, *tensors: NkiTensor) -> list[NkiTensor]:
    """Restrict every tensor to the elements a legacy ``mask=`` keeps (per masked axis)."""
    if mask is None or mask is True or isinstance(mask, np.bool_) and mask:  # True: a folded predicate keeping all
        return list(tensors)
    if isinstance(mask, (bool, np.bool_)):
        raise tracing.current().error("mask.constant", "a mask that keeps no element reached an op that cannot drop "
                                      "its instruction (nl.loop_reduce); give the loop bounds instead")
    out = []
    for t in tensors:
        if not isinstance(t, NkiTensor):
            out.append(t)
            continue
        key, window = [], dict(t._mask_window or {})
        index_vars = t._index_vars or (None,) * t.ndim
        for axis, size in enumerate(t.shape):
            var = index_vars[axis]
            extent = mask.extent(axis, var)  # size of the index expression the mask constrains on this axis
            if size == 1 or extent is None:  # broadcast operands ([P, 1], [1, F]) and free axes stay whole
                key.append(slice(None))
                continue
            keep = mask.restrict(axis, extent, var)
            if len(keep) == 0:
                raise tracing.current().error("mask.empty", f"the mask leaves no elements along axis {axis}")
            if size >= keep.stop:  # positions of the index expression: cut them out
                key.append(slice(keep.start, keep.stop))
                window[axis] = keep.start
            elif size == len(keep) or axis in (t._mask_window or {}) and size < len(keep):
                # a tile a masked op already produced at the masked size (or smaller: a looser mask
                # than the one it was computed under - the positions past it were never computed)
                key.append(slice(None))
                window.setdefault(axis, keep.start)
            else:
                raise tracing.current().error(
                    "mask.shape", f"axis {axis} of {list(t.shape)} matches neither the masked index expression "
                    f"({extent} positions) nor the {len(keep)} positions the mask keeps")
        overrun = t._overrun
        t._overrun = None  # index the clipped view itself; the mask decides below
        try:
            view = t.masked_indirect(key) if t._indirect is not None else t[tuple(key)]
        finally:
            t._overrun = overrun
        view._mask_window = window or None
        # A clipped index expression is fine when the mask excludes every position past the end.
        if overrun:
            for axis, requested, message, location in overrun:
                if mask.restrict(axis, requested, index_vars[axis]).stop > t.shape[axis]:
                    raise NkiValidationError("index.out_of_bounds", message, location)
        out.append(view)
    return out
