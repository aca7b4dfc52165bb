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
        self.peak = 0

    @property
    def used(self) -> int:
        return sum(size for _, size in self._live)

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
        for off, used in self._live + [(self.capacity, 0)]:
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
            f"{self.capacity - self.used} of {self.capacity} are free ({len(self._live)} live tiles, largest free block "
            f"{self._largest_free()} bytes)",
        )

    def free(self, offset: int) -> None:
        for i, (off, _) in enumerate(self._live):
            if off == offset:
                del self._live[i]
                return
        raise ValueError(f"{self.memory}: no live allocation at offset {offset}")

    def _largest_free(self) -> int:
        best, cursor = 0, 0
        for off, used in self._live + [(self.capacity, 0)]:
            best = max(best, off - cursor)
            cursor = max(cursor, off + used)
        return best
