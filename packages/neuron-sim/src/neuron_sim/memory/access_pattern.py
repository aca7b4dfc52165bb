"""Access patterns: how an instruction addresses a block of memory.

On-chip (SBUF/PSUM) an access pattern selects ``partition_count`` consecutive partitions starting
at ``partition_start`` and walks the same free-dimension pattern in each: a byte ``offset`` inside
the partition plus up to four ``[stride, count]`` pairs in elements. In HBM, which has no
partitions, the first dimension is ``[partition_stride, partition_count]`` over the tensor named
``tensor`` and ``offset`` is a byte offset into that tensor.

``dynamic`` holds ``(register, element_stride)`` terms added to the offset at run time (NKI's
``scalar_offset``); a static program has none.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import dtypes
from ..errors import AccessPatternError

SBUF, PSUM, HBM = "sbuf", "psum", "hbm"
MEMORIES = (SBUF, PSUM, HBM)
MAX_FREE_DIMS = 4
DEPENDENCY_BLOCK = 64  # bytes per partition; the timing model's on-chip dependency granularity
_SIGNATURES: dict[tuple, int] = {}
_LOCATIONS: dict[tuple, int] = {}


@dataclass(frozen=True, slots=True)
class AccessPattern:
    memory: str
    dtype: str
    partition_start: int
    partition_count: int
    free: tuple[tuple[int, int], ...]  # ((stride, count), ...) in elements
    offset: int = 0  # bytes: inside each partition on chip, inside the tensor in HBM
    tensor: str | None = None  # HBM only: name in the program's tensor table
    partition_stride: int = 0  # HBM only: elements between consecutive rows of dim 0
    dynamic: tuple[tuple[str, int], ...] = ()
    # Derived once at construction: the timing model and executor ask for them per instruction.
    itemsize: int = field(init=False, repr=False, compare=False)
    free_size: int = field(init=False, repr=False, compare=False)  # elements per partition
    _span: tuple[int, int] = field(init=False, repr=False, compare=False)
    # What an instruction's cost can depend on (memory, dtype, partitions, free pattern), interned
    # to a small int so cost memo keys hash fast.
    cost_signature: int = field(init=False, repr=False, compare=False)
    # On chip: the range of 64-byte dependency blocks touched in each partition (timing model).
    dependency_blocks: tuple[int, int] = field(init=False, repr=False, compare=False)
    # Where the pattern lands (memory, HBM tensor, byte span, whether a run-time offset moves it),
    # interned to a small int: the timing model caches each location's dependency footprint.
    location_key: int = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if self.memory not in MEMORIES:
            raise AccessPatternError("ap.memory", f"unknown memory {self.memory!r}; expected one of {MEMORIES}")
        object.__setattr__(self, "dtype", dtypes.dtype_name(self.dtype))
        object.__setattr__(self, "free", tuple((int(s), int(c)) for s, c in self.free))
        if self.partition_count <= 0:
            raise AccessPatternError("ap.empty", f"partition count must be positive, got {self.partition_count}")
        if self.partition_start < 0:
            raise AccessPatternError("ap.bounds", f"partition start must be >= 0, got {self.partition_start}")
        if len(self.free) > MAX_FREE_DIMS:
            raise AccessPatternError(
                "ap.too_many_dims",
                f"an access pattern has at most {MAX_FREE_DIMS} free dimensions, got {len(self.free)}: {list(self.free)}",
            )
        for _, count in self.free:
            if count <= 0:
                raise AccessPatternError("ap.empty", f"free dimension count must be positive, got {list(self.free)}")
        if self.offset < 0:
            raise AccessPatternError("ap.bounds", f"byte offset must be >= 0, got {self.offset}")
        if self.memory == HBM:
            if self.tensor is None:
                raise AccessPatternError("ap.hbm_tensor", "an HBM access pattern must name its tensor")
            if self.partition_start != 0:
                # HBM has no partitions: rows start at ``offset``. A nonzero start would be ignored
                # by every consumer, silently addressing the wrong rows.
                raise AccessPatternError(
                    "ap.hbm_partition_start",
                    f"an HBM access pattern starts at row 0 (use the byte offset), got partition_start {self.partition_start}",
                )
        elif self.tensor is not None or self.partition_stride:
            raise AccessPatternError("ap.onchip_tensor", f"an {self.memory} access pattern has no tensor name or row stride")
        object.__setattr__(self, "itemsize", dtypes.itemsize(self.dtype))
        n = 1
        for _, count in self.free:
            n *= count
        object.__setattr__(self, "free_size", n)
        object.__setattr__(self, "_span", self._compute_byte_span())
        signature = (self.memory, self.dtype, self.partition_start, self.partition_count, self.free)
        object.__setattr__(self, "cost_signature", _SIGNATURES.setdefault(signature, len(_SIGNATURES)))
        lo, hi = self._span
        object.__setattr__(self, "dependency_blocks", (lo // DEPENDENCY_BLOCK, (hi - 1) // DEPENDENCY_BLOCK + 1))
        location = (self.memory, self.tensor, lo, hi, bool(self.dynamic))
        object.__setattr__(self, "location_key", _LOCATIONS.setdefault(location, len(_LOCATIONS)))

    # --- shape -----------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return (self.partition_count,) + tuple(c for _, c in self.free)

    @property
    def num_elements(self) -> int:
        return self.partition_count * self.free_size

    @property
    def nbytes(self) -> int:
        return self.num_elements * self.itemsize

    @property
    def on_chip(self) -> bool:
        return self.memory != HBM

    def free_byte_span(self) -> tuple[int, int]:
        """[lo, hi) byte range touched inside one partition (on chip) or one row (HBM)."""
        lo = hi = 0
        for stride, count in self.free:
            step = stride * (count - 1)
            if step < 0:
                lo += step
            else:
                hi += step
        size = self.itemsize
        return self.offset + lo * size, self.offset + hi * size + size

    def byte_span(self) -> tuple[int, int]:
        """[lo, hi) byte range touched in the tensor (HBM) or in one partition (on chip)."""
        return self._span

    def _compute_byte_span(self) -> tuple[int, int]:
        lo, hi = self.free_byte_span()
        if self.memory == HBM:
            step = self.partition_stride * (self.partition_count - 1) * self.itemsize
            lo, hi = (lo + step, hi) if step < 0 else (lo, hi + step)
        return lo, hi

    def is_contiguous(self) -> bool:
        """True when each partition's (row's) elements are one dense run in order."""
        expected = 1
        for stride, count in reversed(self.free):
            if count != 1 and stride != expected:
                return False
            expected *= count
        return True

    def contiguous_run_bytes(self) -> int:
        """Length in bytes of the longest innermost dense run (a DMA descriptor's payload)."""
        run = 1
        expected = 1
        for stride, count in reversed(self.free):
            if count == 1:
                continue
            if stride != expected:
                break
            run *= count
            expected *= count
        return run * self.itemsize

    # --- checks ----------------------------------------------------------------------------
    def check_bounds(self, partitions: int, bytes_per_partition: int, what: str) -> None:
        """Raise unless the pattern stays inside ``partitions`` x ``bytes_per_partition``."""
        if self.partition_start + self.partition_count > partitions:
            raise AccessPatternError(
                "ap.partition_bounds",
                f"{what}: partitions [{self.partition_start}, {self.partition_start + self.partition_count}) "
                f"exceed the {partitions} partitions of {self.memory.upper()}",
            )
        lo, hi = self.free_byte_span()
        if lo < 0 or hi > bytes_per_partition:
            raise AccessPatternError(
                "ap.free_bounds",
                f"{what}: bytes [{lo}, {hi}) of each partition fall outside {self.memory.upper()}'s "
                f"{bytes_per_partition} bytes per partition (offset {self.offset}, pattern {list(self.free)}, {self.dtype})",
            )

    def check_tensor_bounds(self, tensor_nbytes: int, what: str) -> None:
        lo, hi = self.byte_span()
        if lo < 0 or hi > tensor_nbytes:
            raise AccessPatternError(
                "ap.tensor_bounds",
                f"{what}: bytes [{lo}, {hi}) fall outside tensor {self.tensor!r} of {tensor_nbytes} bytes "
                f"(offset {self.offset}, rows [{self.partition_stride}, {self.partition_count}], pattern {list(self.free)})",
            )

    # --- numpy views -----------------------------------------------------------------------
    def view(self, buffer: np.ndarray, row_bytes: int, offset_bytes: int = 0) -> np.ndarray:
        """A zero-copy numpy view of the elements this pattern addresses.

        ``buffer`` is the flat uint8 backing store; ``row_bytes`` the distance between partitions
        (on chip) and is ignored in HBM, where ``partition_stride`` applies. ``offset_bytes`` adds
        the run-time (dynamic) part of the offset.
        """
        size = self.itemsize
        if self.memory == HBM:
            start = self.offset + offset_bytes
            dim0 = self.partition_stride * size
        else:
            # Each partition is its own row of ``row_bytes``: a pattern (or a run-time offset) that
            # runs past it must not silently spill into the next partition.
            lo, hi = self.free_byte_span()
            if lo + offset_bytes < 0 or hi + offset_bytes > row_bytes:
                raise AccessPatternError(
                    "ap.free_bounds",
                    f"{self.describe()} (run-time offset {offset_bytes} bytes) reaches bytes "
                    f"[{lo + offset_bytes}, {hi + offset_bytes}) of {row_bytes}-byte partitions",
                )
            start = self.partition_start * row_bytes + self.offset + offset_bytes
            dim0 = row_bytes
        strides = (dim0,) + tuple(s * size for s, _ in self.free)
        shape = self.shape
        lo = start + sum(min(0, st * (n - 1)) for st, n in zip(strides, shape))
        hi = start + sum(max(0, st * (n - 1)) for st, n in zip(strides, shape)) + size
        if lo < 0 or hi > buffer.nbytes:
            raise AccessPatternError(
                "ap.buffer_bounds", f"{self.describe()} reaches bytes [{lo}, {hi}) of a {buffer.nbytes}-byte buffer"
            )
        return np.ndarray(shape, dtype=dtypes.to_numpy(self.dtype), buffer=buffer, offset=start, strides=strides)

    def describe(self) -> str:
        """Profiler-style operand text: ``dtype@memory[partitions][pattern]``."""
        where = self.tensor if self.memory == HBM else self.memory.upper()
        parts = f"{self.partition_start}:{self.partition_start + self.partition_count}"
        return f"{self.dtype}@{where}+{self.offset}[{parts}]{[list(p) for p in self.free]}"

    # --- serialization ---------------------------------------------------------------------
    def to_dict(self) -> dict:
        d = {"m": self.memory, "t": self.dtype, "p": [self.partition_start, self.partition_count], "f": [list(x) for x in self.free]}
        if self.offset:
            d["o"] = self.offset
        if self.tensor is not None:
            d["n"] = self.tensor
            d["ps"] = self.partition_stride
        if self.dynamic:
            d["d"] = [list(x) for x in self.dynamic]
        return d

    @classmethod
    def from_dict(cls, d: dict) -> AccessPattern:
        return cls(
            memory=d["m"],
            dtype=d["t"],
            partition_start=d["p"][0],
            partition_count=d["p"][1],
            free=tuple(tuple(x) for x in d["f"]),
            offset=d.get("o", 0),
            tensor=d.get("n"),
            partition_stride=d.get("ps", 0),
            dynamic=tuple((str(r), int(s)) for r, s in d.get("d", ())),
        )


def onchip(memory: str, dtype, partition_start: int, partition_count: int, free_counts, offset: int = 0) -> AccessPattern:
    """A dense on-chip pattern: ``partition_count`` partitions x row-major ``free_counts``."""
    free = []
    stride = 1
    for count in reversed(tuple(free_counts)):
        free.append((stride, count))
        stride *= count
    return AccessPattern(memory, dtype, partition_start, partition_count, tuple(reversed(free)), offset)


def hbm(tensor: str, dtype, shape, offset_elements: int = 0, row_stride: int | None = None) -> AccessPattern:
    """A dense row-major HBM pattern over ``shape`` (dim 0 is the row dimension)."""
    shape = tuple(shape)
    rest = shape[1:] or (1,)
    free = []
    stride = 1
    for count in reversed(rest):
        free.append((stride, count))
        stride *= count
    size = dtypes.itemsize(dtype)
    return AccessPattern(
        HBM,
        dtype,
        0,
        shape[0],
        tuple(reversed(free)),
        offset=offset_elements * size,
        tensor=tensor,
        partition_stride=stride if row_stride is None else row_stride,
    )
