"""Simulated HBM: real host memory, accounted against one NeuronCore's HBM capacity.

Every allocation is an aligned numpy buffer whose address is a genuine host pointer, so code that
reads a device tensor's pointer reads valid bytes, and executors work on zero-copy views. Fresh
memory is filled with 0xFF bytes (NaN in every float type) so reads of never-written data show.
"""

from __future__ import annotations

import bisect
import threading
import weakref
from dataclasses import dataclass, field

import numpy as np

from ..errors import AccessPatternError, OutOfMemoryError
from .validity import InvalidRanges

ALIGNMENT = 64
POISON_BYTE = 0xFF


@dataclass(eq=False)
class HbmAllocation:
    """One live block of device memory. ``array`` is its flat uint8 view."""

    address: int
    nbytes: int
    array: np.ndarray = field(repr=False)
    tag: str = ""
    _owner: np.ndarray = field(repr=False, default=None)  # the over-allocated host buffer

    def view(self, dtype, shape=None, offset: int = 0) -> np.ndarray:
        dt = np.dtype(dtype)
        count = (self.nbytes - offset) // dt.itemsize if shape is None else int(np.prod(shape))
        arr = np.ndarray((count,), dtype=dt, buffer=self.array, offset=offset)
        return arr if shape is None else arr.reshape(shape)


@dataclass
class MemoryStats:
    allocated_bytes: int = 0
    peak_allocated_bytes: int = 0
    num_allocs: int = 0
    num_frees: int = 0
    num_ooms: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Hbm:
    """The HBM of one NeuronCore: an allocator over host memory with a hard capacity."""

    def __init__(self, capacity: int, name: str = "HBM"):
        self.capacity = int(capacity)
        self.name = name
        self.stats = MemoryStats()
        self._lock = threading.Lock()
        self._starts: list[int] = []  # sorted addresses, for resolving a pointer to its block
        self._blocks: dict[int, HbmAllocation] = {}
        self.invalid = InvalidRanges()  # bytes that failed work should have written (validity.py)
        _LIVE.add(self)

    @property
    def allocated(self) -> int:
        return self.stats.allocated_bytes

    @property
    def free_bytes(self) -> int:
        return self.capacity - self.stats.allocated_bytes

    def allocate(self, nbytes: int, tag: str = "", poison: bool = True) -> HbmAllocation:
        nbytes = int(nbytes)
        if nbytes < 0:
            raise ValueError(f"allocation size must be >= 0, got {nbytes}")
        charged = _round_up(max(nbytes, 1), ALIGNMENT)
        with self._lock:
            if charged > self.free_bytes:
                self.stats.num_ooms += 1
                raise OutOfMemoryError(nbytes, self.free_bytes, self.capacity, self.name)
            previous_peak = self.stats.peak_allocated_bytes
            self.stats.allocated_bytes += charged
            self.stats.peak_allocated_bytes = max(self.stats.peak_allocated_bytes, self.stats.allocated_bytes)
            self.stats.num_allocs += 1
        try:
            owner = np.empty(charged + ALIGNMENT, dtype=np.uint8)
        except MemoryError:
            with self._lock:  # undo the accounting: the allocation never happened
                self.stats.allocated_bytes -= charged
                self.stats.num_allocs -= 1
                self.stats.num_ooms += 1
                if self.stats.peak_allocated_bytes == self.stats.allocated_bytes + charged:
                    self.stats.peak_allocated_bytes = max(previous_peak, self.stats.allocated_bytes)
            raise OutOfMemoryError(nbytes, self.free_bytes, self.capacity, f"{self.name} (host memory exhausted)") from None
        shift = (-owner.ctypes.data) % ALIGNMENT
        array = owner[shift : shift + charged]
        if poison:
            array.fill(POISON_BYTE)
        block = HbmAllocation(address=array.ctypes.data, nbytes=nbytes, array=array[:nbytes], tag=tag, _owner=owner)
        if self.invalid:
            self.invalid.forget(block.address)  # fresh memory: whatever a freed block there was is gone
        with self._lock:
            bisect.insort(self._starts, block.address)
            self._blocks[block.address] = block
        return block

    def free(self, block: HbmAllocation) -> None:
        with self._lock:
            if self._blocks.pop(block.address, None) is None:
                raise ValueError(f"{self.name}: address {block.address:#x} is not a live allocation (double free?)")
            self._starts.pop(bisect.bisect_left(self._starts, block.address))
            self.stats.allocated_bytes -= _round_up(max(block.nbytes, 1), ALIGNMENT)
            self.stats.num_frees += 1
        if self.invalid:
            self.invalid.forget(block.address)

    def resolve(self, address: int, nbytes: int = 1) -> tuple[HbmAllocation, int]:
        """The allocation containing ``[address, address + nbytes)`` and the offset into it."""
        block = self.find(address, nbytes)
        if block is None:
            raise AccessPatternError(
                "hbm.unmapped", f"{self.name}: bytes [{address:#x}, {address + nbytes:#x}) are not inside a live allocation"
            )
        return block, address - block.address

    def find(self, address: int, nbytes: int = 1) -> HbmAllocation | None:
        """The live allocation containing ``[address, address + nbytes)``, or None."""
        with self._lock:
            i = bisect.bisect_right(self._starts, address) - 1
            block = self._blocks[self._starts[i]] if i >= 0 else None
        if block is None or address + nbytes > block.address + max(block.nbytes, 1):
            return None
        return block

    def reset_peak(self) -> None:
        with self._lock:
            self.stats.peak_allocated_bytes = self.stats.allocated_bytes

    def live_allocations(self) -> list[HbmAllocation]:
        with self._lock:
            return [self._blocks[a] for a in self._starts]


_LIVE: weakref.WeakSet[Hbm] = weakref.WeakSet()  # every Hbm of the process, to find an array's
_byte_bounds = getattr(getattr(np.lib, "array_utils", None), "byte_bounds", None) or np.byte_bounds  # numpy 2 / 1.26


def locate(array: np.ndarray) -> tuple[Hbm, HbmAllocation, int, int] | None:
    """The HBM and allocation holding ``array``'s bytes (a view of device memory), and those
    bytes as an absolute [lo, hi); None if the array is not device memory (or is empty)."""
    if not array.nbytes:
        return None
    if array.flags.c_contiguous:
        lo = array.__array_interface__["data"][0]
        hi = lo + array.nbytes
    else:
        lo, hi = _byte_bounds(array)
    for hbm in list(_LIVE):
        block = hbm.find(lo, hi - lo)
        if block is not None:
            return hbm, block, lo, hi
    return None


def _round_up(n: int, to: int) -> int:
    return (n + to - 1) // to * to
