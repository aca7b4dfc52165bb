"""Storage: what a tensor's views address - an HBM tensor of the kernel's tensor table, or a block
of bytes in every partition of SBUF/PSUM, reserved from the trace's on-chip allocators."""

from __future__ import annotations

import math
import weakref

from neuron_sim import dtypes
from neuron_sim.memory.access_pattern import PSUM, SBUF

ON_CHIP = (SBUF, PSUM)
HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")


class Allocation:
    """An ``nki.compiler`` ``buffer=`` value that places each logical tile: ``place(idx, pdim_size,
    fdim_bytes)`` -> (start partition, byte address per partition) of logical block ``idx``."""

    def __init__(self, buffer: str, place, description: str):
        self.buffer, self.place, self.description = buffer, place, description

    def __repr__(self) -> str:
        return self.description


# Kernel functions (their code objects) marked ``nki.compiler.force_auto_alloc``: their direct
# allocations are automatic ones.
_FORCED_AUTO: set = set()


def force_auto(kernel) -> None:
    code = getattr(getattr(kernel, "func", kernel), "__code__", None)  # a function or an nki.jit Kernel
    if code is not None:
        _FORCED_AUTO.add(code)


def auto_allocated(kernel_code) -> bool:
    return kernel_code in _FORCED_AUTO


class Storage:
    """An allocation: an HBM tensor of the tensor table, or per-partition bytes on chip."""

    __slots__ = ("buffer", "dtype", "shape", "name", "partition_offset", "byte_offset", "written", "partition_axis",
                 "blocks", "__weakref__")

    def __init__(self, buffer: str, dtype: str, shape: tuple[int, ...], name: str,
                 partition_offset: int = 0, byte_offset: int = 0, partition_axis: int = 0):
        self.buffer = buffer
        # On chip: which dim of ``shape`` is the partition dim. Dims before it are legacy block
        # dims (``nl.ndarray((4, nl.par_dim(128), 512))``: four [128, 512] tiles side by side in
        # each partition's bytes, ``t[i]`` one of them).
        self.partition_axis = partition_axis
        self.dtype = dtype
        self.shape = shape
        self.name = name
        self.partition_offset = partition_offset
        self.byte_offset = byte_offset
        # PSUM regions written so far, (first partition, end partition, first byte, end byte): a
        # matmul with accumulate=None overwrites a region on its first write and adds afterwards.
        self.written: list[tuple[int, int, int, int]] = []
        # A directly allocated tensor with block dims (nki.compiler): (allocation, {block index:
        # tile Storage}); each logical block is a tile at the address the allocation gives it.
        self.blocks = None

    @property
    def on_chip(self) -> bool:
        return self.buffer in ON_CHIP

    @property
    def free_elements(self) -> int:
        """Elements per partition (on chip); the partition stride of its views."""
        return math.prod(s for i, s in enumerate(self.shape) if i != self.partition_axis) if len(self.shape) > 1 else 1

    def strides(self) -> tuple[int, ...]:
        """Element strides of the whole storage: row-major, except that on chip the partition dim
        steps one partition (``free_elements``) and the other dims are row-major among themselves."""
        if not self.on_chip:
            return row_major_strides(self.shape)
        pa = self.partition_axis
        inner = iter(row_major_strides(tuple(s for i, s in enumerate(self.shape) if i != pa)))
        return tuple(self.free_elements if i == pa else next(inner) for i in range(len(self.shape)))


def row_major_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for d in reversed(shape):
        strides.append(acc)
        acc *= d
    return tuple(reversed(strides))


def allocate_on_chip(ctx, buffer: str, shape: tuple[int, ...], dtype: str, name: str, address=None,
                     partition_axis: int = 0) -> Storage:
    """Reserve SBUF/PSUM bytes for a tile; they are released when the last view of it dies.
    ``partition_axis``: the dim of ``shape`` that is the partition dim (legacy block dims before it)."""
    arch = ctx.arch
    if not shape:
        raise ctx.error("tile.shape", "an on-chip tile needs at least a partition dimension")
    partitions = shape[partition_axis]
    if partitions > arch.num_partitions:
        raise ctx.error(
            "partition.limit",
            f"partition dimension {partitions} of tile {list(shape)} exceeds the {arch.num_partitions} partitions",
        )
    nbytes = math.prod(s for i, s in enumerate(shape) if i != partition_axis) * dtypes.itemsize(dtype)
    allocator = ctx.sbuf_allocator if buffer == SBUF else ctx.psum_allocator
    if address is not None:
        partition_offset, byte_offset = (int(a) for a in address)
        limit = arch.sbuf_usable_bytes_per_partition if buffer == SBUF else arch.psum_bytes_per_partition
        if byte_offset < 0 or byte_offset + nbytes > limit or partition_offset + partitions > arch.num_partitions:
            raise ctx.error("tile.address", f"address {tuple(address)} puts {list(shape)} {dtype} outside {buffer.upper()}")
        if buffer == PSUM and byte_offset % arch.psum_bank_bytes:
            raise ctx.error("psum.bank_alignment", f"PSUM tiles start on a bank boundary ({arch.psum_bank_bytes} B), got byte offset {byte_offset}")
        # The kernel owns these bytes (NKI: a kernel allocates all its tiles directly or none), so
        # the tiles the tracer itself allocates - an op's result before ``t[...] =`` copies it into
        # place - must go elsewhere, or they overwrite the kernel's data.
        allocator.reserve(byte_offset, nbytes)
        return Storage(buffer, dtype, shape, name, partition_offset, byte_offset, partition_axis)
    try:
        offset = allocator.allocate(nbytes, f"tile {name or ''}{list(shape)} {dtype}")
    except Exception as err:  # capacity errors carry the allocator's numbers
        raise ctx.error(getattr(err, "rule", f"{buffer}.capacity"), getattr(err, "detail", str(err))) from None
    storage = Storage(buffer, dtype, shape, name, 0, offset, partition_axis)
    weakref.finalize(storage, allocator.free, offset)
    return storage


def directly_allocated(ctx, allocation, shape: tuple[int, ...], dtype: str, name: str, partition_axis: int) -> Storage:
    """An on-chip tensor placed by an ``nki.compiler`` allocation: a tile at its address, or (with
    block dims before the partition dim) a tensor whose logical blocks are tiles at theirs."""
    tile_shape = shape[partition_axis:]
    if partition_axis == 0:
        address = _placed(ctx, allocation, (), tile_shape, dtype)
        return allocate_on_chip(ctx, allocation.buffer, tile_shape, dtype, name, address)
    storage = Storage(allocation.buffer, dtype, shape, name, partition_axis=partition_axis)
    storage.blocks = (allocation, {})
    return storage


def block_tile(ctx, storage: Storage, index: tuple[int, ...]) -> Storage:
    """The tile Storage of logical block ``index`` of a directly allocated tensor."""
    allocation, tiles = storage.blocks
    if index not in tiles:
        tile_shape = storage.shape[storage.partition_axis:]
        address = _placed(ctx, allocation, index, tile_shape, storage.dtype)
        tiles[index] = allocate_on_chip(ctx, storage.buffer, tile_shape, storage.dtype, storage.name, address)
    return tiles[index]


def _placed(ctx, allocation, index, tile_shape, dtype) -> tuple[int, int]:
    fdim_bytes = math.prod(tile_shape[1:]) * dtypes.itemsize(dtype)
    try:
        partition, byte = allocation.place(tuple(index), tile_shape[0], fdim_bytes)
    except (TypeError, ValueError) as err:
        raise ctx.error("alloc.function", f"{allocation!r} cannot place block {tuple(index)}: {err}") from None
    arch = ctx.arch
    allowed = (0,) if tile_shape[0] > 2 * arch.quadrant else (0, 2 * arch.quadrant) if tile_shape[0] > arch.quadrant \
        else tuple(range(0, arch.num_partitions, arch.quadrant))
    if partition not in allowed:
        raise ctx.error("alloc.start_partition", f"a tile of {tile_shape[0]} partitions starts at partition {list(allowed)}, "
                                                 f"{allocation!r} gives {partition} for block {tuple(index)}")
    return int(partition), int(byte)


def hbm_storage(ctx, shape, dtype, name: str, kind: str, buffer: str = "shared_hbm") -> Storage:
    """Declare an HBM tensor in the kernel's tensor table."""
    name = ctx.unique_name(name or "hbm_tensor")
    ctx.tensor(name, tuple(shape), dtype, kind)
    return Storage(buffer, dtypes.dtype_name(dtype), tuple(shape), name)


__all__ = ["Allocation", "auto_allocated", "force_auto", "Storage", "allocate_on_chip", "block_tile", "directly_allocated", "hbm_storage", "row_major_strides", "ON_CHIP", "HBM_BUFFERS"]
