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
    allocator = ctx.sbuf_allocator if buffer == SBUF else ctx.psum_allocator
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


def hbm_storage(ctx, shape, dtype, name: str, kind: str, buffer: str = "shared_hbm") -> Storage:
    """Declare an HBM tensor in the kernel's tensor table."""
    name = ctx.unique_name(name or "hbm_tensor")
    ctx.tensor(name, tuple(shape), dtype, kind)
    return Storage(buffer, dtypes.dtype_name(dtype), tuple(shape), name)


__all__ = ["Storage", "allocate_on_chip", "hbm_storage", "ON_CHIP", "HBM_BUFFERS"]
