"""First-fit allocation of on-chip memory (byte ranges within every partition).

Used by program builders and the NKI tracer: live tiles occupy disjoint per-partition byte ranges,
and asking for more than is free is a capacity error naming the numbers.
"""

from __future__ import annotations

import bisect

from ..errors import ValidationError


class OnChipAllocator:
    def __init__(self, memory: str, capacity: int, alignment: int = 4, bank_bytes: int | None = None):
        self.memory = memory
        self.capacity = capacity
        self.alignment = alignment
        self.bank_bytes = bank_bytes  # PSUM: an allocation never crosses a bank unless it spans whole banks
        self._live: list[tuple[int, int]] = []  # sorted (offset, size)
        self._reserved: list[tuple[int, int]] = []  # sorted (offset, size): placed by their owner, never allocated
        self.peak = 0

    @property
    def used(self) -> int:
        return sum(size for _, size in self._live)

    def reserve(self, offset: int, nbytes: int) -> None:
        """Keep bytes ``[offset, offset + nbytes)`` out of every later allocation: a tile placed at an
        address by its kernel (NKI direct allocation) owns them for the rest of the program, so
        tiles allocated automatically (the tracer's temporaries) must not land on them."""
        if nbytes > 0 and (offset, nbytes) not in self._reserved:
            bisect.insort(self._reserved, (offset, nbytes))

    def allocate(self, nbytes: int, what: str = "tile") -> int:
        """Offset (bytes within each partition) of a free block of ``nbytes``."""
        size = max(self.alignment, -(-nbytes // self.alignment) * self.alignment)
        if self.bank_bytes and size < self.bank_bytes:
            step = self.alignment
        elif self.bank_bytes:
            size = -(-size // self.bank_bytes) * self.bank_bytes
            step = self.bank_bytes
        else:
            step = self.alignment
        cursor = 0
        taken = sorted(self._live + self._reserved) if self._reserved else self._live
        for off, used in taken + [(self.capacity, 0)]:
            start = -(-cursor // step) * step
            if self.bank_bytes and size < self.bank_bytes and start // self.bank_bytes != (start + size - 1) // self.bank_bytes:
                start = -(-start // self.bank_bytes) * self.bank_bytes
            if start + size <= off:
                bisect.insort(self._live, (start, size))
                self.peak = max(self.peak, max(o + s for o, s in self._live))
                return start
            cursor = max(cursor, off + used)
        raise ValidationError(
            f"{self.memory}.capacity",
            f"{self.memory.upper()} is full: {what} needs {size} bytes per partition but only "
            f"{self.capacity - self.used - self._reserved_bytes()} of {self.capacity} are free ({len(self._live)} live tiles"
            f"{f', {len(self._reserved)} directly placed' if self._reserved else ''}, largest free block "
            f"{self._largest_free()} bytes)",
        )

    def free(self, offset: int) -> None:
        for i, (off, _) in enumerate(self._live):
            if off == offset:
                del self._live[i]
                return
        raise ValueError(f"{self.memory}: no live allocation at offset {offset}")

    def _reserved_bytes(self) -> int:
        """Bytes reserved and not also held by a live tile (reservations may overlap)."""
        total, cursor = 0, 0
        live = [(o, o + n) for o, n in self._live]
        for off, size in self._reserved:
            lo, hi = max(off, cursor), off + size
            if hi > lo:
                total += (hi - lo) - sum(max(0, min(hi, b) - max(lo, a)) for a, b in live)
                cursor = hi
        return total

    def _largest_free(self) -> int:
        best, cursor = 0, 0
        for off, used in sorted(self._live + self._reserved) + [(self.capacity, 0)]:
            best = max(best, off - cursor)
            cursor = max(cursor, off + used)
        return best
