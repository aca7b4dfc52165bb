"""A small front end for writing programs by hand (tests, demos, compiler lowering).

    b = ProgramBuilder("add")
    x = b.input("x", (128, 512), "float32"); y = b.output("y", (128, 512), "float32")
    t = b.sbuf((128, 512), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    ...
    program = b.build()

Every emitted instruction records the source line that emitted it (outside neuron_sim) and is
checked once, as it is emitted: against the hardware rules of the target and against the tensor
table (an HBM access must name a declared tensor and stay inside it). ``build`` only adds the
checks that need the whole program (balanced loops, no writes to ``input`` tensors). Front ends
build on this class - the NKI tracer is a ProgramBuilder whose locations are kernel lines.
"""

from __future__ import annotations

import sys

import numpy as np

from . import dtypes
from .arch import Architecture, get_architecture
from .errors import AccessPatternError, ValidationError
from .isa import Instruction
from .memory.access_pattern import HBM, PSUM, SBUF, AccessPattern
from .memory.allocator import OnChipAllocator
from .program import Program, TensorDecl, check_hbm_accesses


def in_packages(frame, packages: tuple[str, ...]) -> bool:
    """Whether ``frame`` runs code of one of ``packages`` (or their submodules), judged by the
    module the code belongs to - not by its file's directory, which a user package named like
    ours (``neuron_sim_tools/``) would share as a prefix."""
    return _module_in(frame.f_globals.get("__name__") or "", packages)


def _module_in(module: str, packages: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in packages)


# Skipped packages -> {module name: whether its frames are skipped}. A profiled eager op walks ~15
# frames per launch; judging each module once keeps the walk at a dict lookup per frame.
_skipped_modules: dict[tuple[str, ...], dict[str, bool]] = {}


def caller_location(skip_packages: tuple[str, ...] = ()) -> str | None:
    """``file:line`` of the innermost frame outside neuron_sim (and ``skip_packages``)."""
    frame = sys._getframe(1)
    skip = ("neuron_sim",) + tuple(skip_packages)
    known = _skipped_modules.get(skip)
    if known is None:
        known = _skipped_modules.setdefault(skip, {})
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        skipped = known.get(module)
        if skipped is None:
            skipped = known[module] = _module_in(module, skip)
        if not skipped and not frame.f_code.co_filename.startswith("<frozen"):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def _normalize_index(index, shape: tuple[int, ...]) -> list[tuple[int, int, int, bool]]:
    """Per dim: (start, count, step, keep). Integers select one element and drop the dim.

    Python's rules for negative indices apply (``t[-1]``, ``t[:, -4:]``); anything reaching outside
    the dimension, an empty slice, or a non-positive step is an error rather than being clipped.
    """
    if not isinstance(index, tuple):
        index = (index,)
    ellipses = [k for k, i in enumerate(index) if i is Ellipsis]
    if len(ellipses) > 1:
        raise AccessPatternError("ap.index", "an index can have only one Ellipsis (...)")
    if ellipses:
        at = ellipses[0]
        fill = len(shape) - (len(index) - 1)
        index = index[:at] + (slice(None),) * max(fill, 0) + index[at + 1 :]
    if len(index) > len(shape):
        raise AccessPatternError("ap.index", f"{len(index)} indices for a {len(shape)}-d tensor of shape {list(shape)}")
    out = []
    for i, dim in enumerate(shape):
        idx = index[i] if i < len(index) else slice(None)
        if isinstance(idx, slice):
            for bound in (idx.start, idx.stop, idx.step):
                if bound is not None and not _is_int(bound):
                    raise AccessPatternError("ap.index", f"slice bounds must be integers, got {idx!r} for dimension {i}")
            if idx.step is not None and int(idx.step) <= 0:
                raise AccessPatternError("ap.index", f"slice steps must be positive, got {idx.step}")
            if (idx.start is not None and not -dim <= int(idx.start) <= dim) or (
                idx.stop is not None and not -dim <= int(idx.stop) <= dim
            ):
                raise AccessPatternError(
                    "ap.bounds", f"slice {idx.start}:{idx.stop} is outside dimension {i} of size {dim}"
                )
            start, stop, step = idx.indices(dim)
            count = len(range(start, stop, step))
            if count <= 0:
                raise AccessPatternError("ap.bounds", f"slice {idx.start}:{idx.stop} of dimension {i} (size {dim}) is empty")
            out.append((start, count, step, True))
        elif _is_int(idx):
            k = int(idx)
            if not -dim <= k < dim:
                raise AccessPatternError("ap.bounds", f"index {k} is outside dimension {i} of size {dim}")
            out.append((k % dim, 1, 1, False))
        else:
            raise AccessPatternError("ap.index", f"index {idx!r} for dimension {i} is neither an integer nor a slice")
    return out


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


class Tile:
    """An on-chip tensor: dim 0 is the partition dim, the rest are row-major free dims."""

    def __init__(self, memory: str, dtype: str, shape: tuple[int, ...], offset: int, partition_start: int = 0):
        self.memory = memory
        self.dtype = dtypes.dtype_name(dtype)
        self.shape = tuple(shape)
        self.offset = offset
        self.partition_start = partition_start

    def __getitem__(self, index) -> AccessPattern:
        dims = _normalize_index(index, self.shape)
        p_start, p_count, p_step, _ = dims[0]
        if p_step != 1:
            raise AccessPatternError("ap.partition_stride", "partition slices must be contiguous (step 1)")
        strides = []
        acc = 1
        for d in reversed(self.shape[1:]):
            strides.append(acc)
            acc *= d
        strides.reverse()
        size = dtypes.itemsize(self.dtype)
        offset = self.offset
        free = []
        for (start, count, step, keep), stride in zip(dims[1:], strides):
            offset += start * stride * size
            if keep:
                free.append((stride * step, count))
        if not free:
            free = [(1, 1)]
        return AccessPattern(self.memory, self.dtype, self.partition_start + p_start, p_count, tuple(free), offset)

    @property
    def ap(self) -> AccessPattern:
        return self[tuple(slice(None) for _ in self.shape)]


class HbmTensor:
    """A tensor in the program's tensor table; indexing gives HBM access patterns."""

    def __init__(self, decl: TensorDecl):
        self.decl = decl

    @property
    def shape(self):
        return self.decl.shape

    @property
    def name(self):
        return self.decl.name

    def __getitem__(self, index) -> AccessPattern:
        shape = self.decl.shape or (1,)
        dims = _normalize_index(index, shape)
        strides = []
        acc = 1
        for d in reversed(shape):
            strides.append(acc)
            acc *= d
        strides.reverse()
        offset = sum(start * stride for (start, _, _, _), stride in zip(dims, strides))
        kept = [(stride * step, count) for (_, count, step, keep), stride in zip(dims, strides) if keep]
        if not kept:
            kept = [(1, 1)]
        if len(kept) == 1:
            row = (0, 1)
            free = kept
        else:
            row = kept[0]
            free = kept[1:]
        size = dtypes.itemsize(self.decl.dtype)
        return AccessPattern(HBM, self.decl.dtype, 0, row[1], tuple(free), offset * size, self.decl.name, row[0])

    @property
    def ap(self) -> AccessPattern:
        return self[tuple(slice(None) for _ in (self.decl.shape or (1,)))]


class ProgramBuilder:
    def __init__(self, name: str, arch: Architecture | None = None):
        self.name = name
        self.arch = arch or get_architecture()
        self.tensors: list[TensorDecl] = []
        self.instructions: list[Instruction] = []
        self.sbuf_allocator = OnChipAllocator(SBUF, self.arch.sbuf_usable_bytes_per_partition)
        self.psum_allocator = OnChipAllocator(PSUM, self.arch.psum_bytes_per_partition, bank_bytes=self.arch.psum_bank_bytes)
        self._sizes: dict[str, int] = {}  # declared HBM tensors: name -> bytes (what emit checks against)

    # --- HBM tensors -------------------------------------------------------------------------
    def tensor(self, name: str, shape, dtype, kind: str) -> HbmTensor:
        decl = TensorDecl(name, tuple(shape), dtype, kind)
        if name in self._sizes:
            raise ValidationError("program.duplicate_tensor", f"tensor names must be unique, repeated: [{name!r}]", self.location())
        self._sizes[name] = decl.nbytes
        self.tensors.append(decl)
        return HbmTensor(decl)

    def input(self, name, shape, dtype) -> HbmTensor:
        return self.tensor(name, shape, dtype, "input")

    def output(self, name, shape, dtype) -> HbmTensor:
        return self.tensor(name, shape, dtype, "output")

    def inout(self, name, shape, dtype) -> HbmTensor:
        return self.tensor(name, shape, dtype, "inout")

    def internal(self, name, shape, dtype) -> HbmTensor:
        return self.tensor(name, shape, dtype, "internal")

    # --- on-chip tiles -----------------------------------------------------------------------
    def sbuf(self, shape, dtype, partition_start: int = 0) -> Tile:
        return self._tile(SBUF, self.sbuf_allocator, shape, dtype, partition_start)

    def psum(self, shape, dtype="float32", partition_start: int = 0) -> Tile:
        return self._tile(PSUM, self.psum_allocator, shape, dtype, partition_start)

    def _tile(self, memory, allocator, shape, dtype, partition_start) -> Tile:
        shape = tuple(shape)
        if not shape or any(d <= 0 for d in shape):
            raise AccessPatternError("ap.empty", f"a tile needs a partition dimension and positive sizes, got {list(shape)}")
        if shape[0] > self.arch.num_partitions:
            raise AccessPatternError(
                "partition.limit", f"a tile's partition dimension is at most {self.arch.num_partitions}, got {shape[0]}"
            )
        if not 0 <= partition_start <= self.arch.num_partitions - shape[0]:
            raise AccessPatternError(
                "partition.limit",
                f"a tile of {shape[0]} partitions starting at partition {partition_start} exceeds the "
                f"{self.arch.num_partitions} partitions",
            )
        free = 1
        for d in shape[1:]:
            free *= d
        offset = allocator.allocate(free * dtypes.itemsize(dtype), f"tile {list(shape)} {dtypes.dtype_name(dtype)}")
        return Tile(memory, dtype, shape, offset, partition_start)

    def release(self, *tiles: Tile) -> None:
        for t in tiles:
            (self.sbuf_allocator if t.memory == SBUF else self.psum_allocator).free(t.offset)

    # --- instructions ------------------------------------------------------------------------
    def location(self) -> str | None:
        """Where the instruction being emitted comes from (front ends name their user's line)."""
        return caller_location()

    def emit(self, inst: Instruction) -> Instruction:
        """Check ``inst`` (hardware rules, tensor table) and append it."""
        if inst.location is None:
            inst.location = self.location()
        inst.validate(self.arch)
        check_hbm_accesses(inst, self._sizes)
        self.instructions.append(inst)
        return inst

    def build(self, graph: dict | None = None, metadata: dict | None = None) -> Program:
        """The program. Its instructions were checked as they were emitted; this adds the checks
        of the whole (see ``Program.validate_structure``)."""
        program = Program(self.name, list(self.tensors), list(self.instructions), self.arch.name, graph, metadata or {})
        program.validate_structure()
        return program
