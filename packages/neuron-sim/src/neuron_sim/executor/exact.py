"""The exact executor: runs a program instruction by instruction with the hardware's numerics.

Engines read their operands as fp32 (integers too, except for bitvec ops), compute in fp32, and
round to the destination dtype on write (RNE for floats, RNE + saturation for integers). TensorE
multiplies in fp32 and accumulates in fp32 PSUM. SBUF and PSUM start poisoned (NaN bytes) on
every launch, so reading memory no instruction wrote shows up as NaN - or, with
``uninitialized="error"``, as an UninitializedReadError naming the instruction's source line.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import dtypes
from ..arch import Architecture
from ..errors import AccessPatternError, ExecutionError, NeuronSimError, UninitializedReadError, ValidationError
from ..isa import ops
from ..isa.control import LoopEnd, LoopStart, loop_structure
from ..memory.access_pattern import HBM, PSUM, SBUF, AccessPattern
from ..memory.onchip import OnChipMemory
from ..program import Program
from . import accumulator_semantics, rng_semantics, search_semantics, semantics  # noqa: F401 - they register handlers
from .engine_state import EngineState
from .protocol import RunReport

UNINITIALIZED_POLICIES = (None, "warn", "error")
MAX_LOOP_ITERATIONS = 10_000_000  # a while loop whose condition never clears is a bug, not a hang


class ExactExecutor:
    """One NeuronCore's on-chip state plus the interpreter loop."""

    def __init__(self, arch: Architecture, uninitialized: str | None = None, issue_warnings: bool = True):
        """``uninitialized``: what a read of never-written on-chip memory does (None: reads NaN;
        "warn"; "error": raises). ``issue_warnings=False`` keeps the warnings of each run in its
        RunReport instead of issuing them on the running thread (a queue's worker, where no
        caller's warning filters apply)."""
        if uninitialized not in UNINITIALIZED_POLICIES:
            raise ValueError(f"uninitialized must be one of {UNINITIALIZED_POLICIES}, got {uninitialized!r}")
        self.arch = arch
        self.uninitialized = uninitialized
        self.issue_warnings = issue_warnings
        self.warnings: list[str] = []  # this run's, when not issued
        track = uninitialized is not None
        self.sbuf = OnChipMemory("SBUF", arch.num_partitions, arch.sbuf_bytes_per_partition, track)
        self.psum = OnChipMemory("PSUM", arch.num_partitions, arch.psum_bytes_per_partition, track)
        self.hbm: dict[str, np.ndarray] = {}
        self.registers: dict[str, int] = {}
        self.engine_state = EngineState(arch.num_partitions)  # VectorE accumulators, the RNG
        self.trip_counts: dict[int, list[int]] = {}
        self._tensor_bytes: dict[str, int] = {}  # declared HBM tensor sizes of the running program
        self._warned: set = set()
        self._current = None  # the instruction being executed, for warnings

    # --- operand access ----------------------------------------------------------------------
    def _dyn_offset(self, ap: AccessPattern) -> int:
        if not ap.dynamic:
            return 0
        missing = [reg for reg, _ in ap.dynamic if reg not in self.registers]
        if missing:
            raise ExecutionError(
                f"{ap.describe()} has a run-time offset from register(s) {missing} that hold no value "
                f"(set: {sorted(self.registers)})"
            )
        return sum(int(self.registers[reg]) * stride for reg, stride in ap.dynamic) * ap.itemsize

    def view(self, ap: AccessPattern) -> np.ndarray:
        extra = self._dyn_offset(ap)
        if ap.memory == SBUF:
            return self.sbuf.view(ap, extra)
        if ap.memory == PSUM:
            return self.psum.view(ap, extra)
        try:
            buf = self.hbm[ap.tensor]
        except KeyError:
            raise ExecutionError(f"HBM tensor {ap.tensor!r} is not bound for this launch") from None
        if extra:
            # A run-time offset must stay inside the declared tensor, not just inside the bound
            # buffer (which may be a larger allocation): Program.validate checked only the static part.
            nbytes = self._tensor_bytes.get(ap.tensor)
            lo, hi = ap.byte_span()
            if nbytes is not None and (lo + extra < 0 or hi + extra > nbytes):
                raise AccessPatternError(
                    "ap.tensor_bounds",
                    f"{ap.describe()} with run-time offset {extra} bytes reaches bytes [{lo + extra}, {hi + extra}) "
                    f"of tensor {ap.tensor!r} of {nbytes} bytes",
                )
        return ap.view(buf, 0, extra)

    def read(self, ap: AccessPattern, role: str = "operand") -> np.ndarray:
        """The operand's raw stored values (zero-copy where possible)."""
        values = self.view(ap)  # first: it checks the (run-time) bounds the shadow mask relies on
        if ap.memory != HBM and self.uninitialized is not None:
            memory = self.sbuf if ap.memory == SBUF else self.psum
            try:
                memory.check_initialized(ap, self._dyn_offset(ap), role)
            except UninitializedReadError as err:
                if self.uninitialized == "error":
                    raise
                current = getattr(self, "_current", None)
                location = current.location if current is not None else None
                # Once per source line and operand (an unrolled loop warns once, not per iteration).
                key = (location if location is not None else id(current), role)
                if key not in self._warned:
                    self._warned.add(key)
                    where = f" (in {current.opcode} at {location})" if location else (f" (in {current.opcode})" if current else "")
                    if self.issue_warnings:
                        warnings.warn(f"{err}{where}", RuntimeWarning, stacklevel=2)
                    else:
                        self.warnings.append(f"{err}{where}")
        return values

    def read_f32(self, ap: AccessPattern, role: str = "operand") -> np.ndarray:
        return dtypes.compute_view(self.read(ap, role))

    def write(self, ap: AccessPattern, values: np.ndarray) -> None:
        """Round ``values`` to the destination dtype and store them in pattern order."""
        dst = self.view(ap)
        converted = dtypes.convert(np.asarray(values), ap.dtype)
        dst[...] = converted.reshape(dst.shape)
        self.mark_written(ap)

    def mark_written(self, ap: AccessPattern) -> None:
        """Record that ``ap`` now holds data (for the uninitialized-read check)."""
        if ap.memory != HBM and self.uninitialized is not None:
            (self.sbuf if ap.memory == SBUF else self.psum).mark_written(ap, self._dyn_offset(ap))

    def scalar_operand(self, operand, role: str) -> np.ndarray | float:
        """An immediate as fp32, or a [P, 1] tile as a (P, 1) fp32 column for broadcasting."""
        if isinstance(operand, AccessPattern):
            return self.read_f32(operand, role).reshape(operand.partition_count, 1)
        return np.float32(operand)

    # --- running -----------------------------------------------------------------------------
    def bind(self, buffers: dict[str, np.ndarray]) -> None:
        """Attach HBM tensors (flat uint8 arrays, zero-copy) by name."""
        self.hbm = dict(buffers)

    def run(self, program: Program, buffers: dict[str, np.ndarray] | None = None, reset: bool = True) -> RunReport:
        if buffers is not None:
            self.bind(buffers)
        missing = [t.name for t in program.tensors if t.name not in self.hbm]
        if missing:
            raise ExecutionError(f"program {program.name!r}: no buffer bound for tensor(s) {missing}")
        for t in program.tensors:
            if self.hbm[t.name].nbytes < t.nbytes:
                raise ExecutionError(
                    f"program {program.name!r}: buffer for {t.name!r} holds {self.hbm[t.name].nbytes} bytes, "
                    f"the tensor needs {t.nbytes} ({list(t.shape)} {t.dtype})"
                )
        self._tensor_bytes = {t.name: t.nbytes for t in program.tensors}
        if reset:
            self.sbuf.reset()
            self.psum.reset()
            self.engine_state.reset()
        self.trip_counts = {}  # not a previous launch's counts if this one fails
        self.warnings = []
        if not self.issue_warnings:
            self._warned = set()  # kept warnings are per run: each report says what its run read
        with np.errstate(all="ignore"):
            if not any(isinstance(i, LoopStart) for i in program.instructions):
                for inst in program.instructions:
                    self._step(inst)
            else:
                self.trip_counts = self._run_with_loops(program.instructions)
        return RunReport(self.trip_counts, tuple(self.warnings))

    def _step(self, inst) -> None:
        self._current = inst
        try:
            semantics.HANDLERS[type(inst)](self, inst)
        except ValidationError as err:
            raise err.at(inst.location) from None
        except ExecutionError as err:  # e.g. an unbound tensor or unset register: say where
            raise ExecutionError(f"{inst.opcode} at {inst.location or '?'}: {err}") from err
        except NeuronSimError:
            raise
        except Exception as err:  # a bug or an unexpected operand: name the instruction
            raise ExecutionError(f"{inst.opcode} at {inst.location or '?'} failed: {type(err).__name__}: {err}") from err

    def register(self, name: str, where) -> int:
        try:
            return self.registers[name]
        except KeyError:
            raise ExecutionError(f"register {name!r} is read before it is set (at {where.location or '?'})") from None

    def _run_with_loops(self, instructions) -> dict[int, list[int]]:
        """Interpret with a program counter; returns each loop's trip counts in execution order
        (what the timing model needs for loops whose bounds are only known at run time)."""
        pairs = loop_structure(instructions)
        counts: dict[int, list[int]] = {}
        frames: list[list] = []  # [start pc, upper, step, iterations]
        pc, n = 0, len(instructions)
        while pc < n:
            inst = instructions[pc]
            if isinstance(inst, LoopStart):
                if inst.kind == "for":
                    lower = self.register(inst.lower, inst) if isinstance(inst.lower, str) else inst.lower
                    upper = self.register(inst.upper, inst) if isinstance(inst.upper, str) else inst.upper
                    self.registers[inst.register] = lower
                    running = lower < upper
                else:
                    upper = None
                    running = self.register(inst.register, inst) != 0
                if not running:
                    counts.setdefault(pc, []).append(0)
                    pc = pairs[pc] + 1
                    continue
                frames.append([pc, upper, inst.step, 1])
            elif isinstance(inst, LoopEnd):
                frame = frames[-1]
                start = instructions[frame[0]]
                if start.kind == "for":
                    self.registers[inst.register] += frame[2]
                    again = self.registers[inst.register] < frame[1]
                else:
                    again = self.register(inst.register, inst) != 0
                if again:
                    frame[3] += 1
                    if frame[3] > MAX_LOOP_ITERATIONS:
                        raise ExecutionError(
                            f"loop on {inst.register!r} at {start.location or '?'} ran {MAX_LOOP_ITERATIONS:,} iterations "
                            "without finishing (is its condition ever cleared?)"
                        )
                    pc = frame[0] + 1
                    continue
                frames.pop()
                counts.setdefault(frame[0], []).append(frame[3])
            else:
                self._step(inst)
            pc += 1
        return counts

__all__ = ["ExactExecutor", "AccessPatternError", "ops"]
