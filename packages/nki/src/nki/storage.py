"""Storage: what a tensor's views address - an HBM tensor of the kernel's tensor table, or a block
of bytes in every partition of SBUF/PSUM, reserved from the trace's on-chip allocators."""

from __future__ import annotations

import math
import weakref

from neuron_sim import dtypes
from neuron_sim.memory.access_pattern import PSUM, SBUF

ON_CHIP = (SBUF, PSUM)
HBM_BUFFERS = ("hbm", "shared_hbm", "private_hbm")


class Storage:
    """An allocation: an HBM tensor of the tensor table, or per-partition bytes on chip."""

    __slots__ = ("buffer", "dtype", "shape", "name", "partition_offset", "byte_offset", "written", "partition_axis",
                 "__weakref__")

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
        return Storage(buffer, dtype, shape, name, partition_offset, byte_offset, partition_axis)
    try:
        offset = allocator.allocate(nbytes, f"tile {name or ''}{list(shape)} {dtype}")
    except Exception as err:  # capacity errors carry the allocator's numbers
        raise ctx.error(getattr(err, "rule", f"{buffer}.capacity"), getattr(err, "detail", str(err))) from None
    storage = Storage(buffer, dtype, shape, name, 0, offset, partition_axis)
    weakref.finalize(storage, allocator.free, offset)
    return storage


def hbm_storage(ctx, shape, dtype, name: str, kind: str, buffer: str = "shared_hbm") -> Storage:
    """Declare an HBM tensor in the kernel's tensor table."""
    name = ctx.unique_name(name or "hbm_tensor")
    ctx.tensor(name, tuple(shape), dtype, kind)
    return Storage(buffer, dtypes.dtype_name(dtype), tuple(shape), name)


__all__ = ["Storage", "allocate_on_chip", "hbm_storage", "row_major_strides", "ON_CHIP", "HBM_BUFFERS"]
