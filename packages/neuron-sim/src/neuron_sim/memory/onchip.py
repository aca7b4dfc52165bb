"""SBUF and PSUM: partitions x bytes of on-chip SRAM, as one uint8 array per memory.

A shadow mask of written bytes is kept when asked for, so reads of never-written data can be
reported precisely (the poison fill makes them NaN either way).
"""

from __future__ import annotations

import numpy as np

from ..errors import UninitializedReadError
from .access_pattern import AccessPattern
from .hbm import POISON_BYTE


class OnChipMemory:
    def __init__(self, name: str, partitions: int, bytes_per_partition: int, track_writes: bool = False):
        self.name = name
        self.partitions = partitions
        self.bytes_per_partition = bytes_per_partition
        self.data = np.full((partitions, bytes_per_partition), POISON_BYTE, dtype=np.uint8)
        self.written = np.zeros((partitions, bytes_per_partition), dtype=bool) if track_writes else None

    def reset(self) -> None:
        self.data.fill(POISON_BYTE)
        if self.written is not None:
            self.written.fill(False)

    def view(self, ap: AccessPattern, offset_bytes: int = 0) -> np.ndarray:
        return ap.view(self.data, self.bytes_per_partition, offset_bytes)

    def mark_written(self, ap: AccessPattern, offset_bytes: int = 0) -> None:
        if self.written is not None:
            self._mask_view(ap, offset_bytes)[...] = True

    def check_initialized(self, ap: AccessPattern, offset_bytes: int = 0, what: str = "operand") -> None:
        if self.written is None:
            return
        mask = self._mask_view(ap, offset_bytes)
        if not mask.all():
            missing = int(mask.size - np.count_nonzero(mask))
            first = np.argwhere(~mask)[0].tolist()
            raise UninitializedReadError(
                "memory.uninitialized_read",
                f"{what} reads {missing} byte(s) of {self.name} that were never written "
                f"(first at partition {ap.partition_start + first[0]}, element index {first[1:-1]}) in {ap.describe()}",
            )

    def _mask_view(self, ap: AccessPattern, offset_bytes: int) -> np.ndarray:
        # One bool per byte: view the mask with the element's byte width as an extra trailing axis.
        size = ap.itemsize
        start = ap.partition_start * self.bytes_per_partition + ap.offset + offset_bytes
        strides = (self.bytes_per_partition,) + tuple(s * size for s, _ in ap.free) + (1,)
        shape = ap.shape + (size,)
        return np.ndarray(shape, dtype=np.bool_, buffer=self.written, offset=start, strides=strides)
