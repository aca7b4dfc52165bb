"""The emitter: a ProgramBuilder plus what every lowering shares.

* the source location of the graph node being lowered (instructions carry it, so profiles and
  runtime errors point at the model line rather than at the compiler);
* engine balancing: float elementwise instructions (tensor_tensor, tensor_scalar, copies, selects)
  go to whichever of VectorE/ScalarE/GpSimd that can run them would finish first (queued work plus
  the instruction's cost there, by neuron-sim's own cost formulas); memsets and the lowerings' other
  choices between two engines go to the one with the least work queued;
* DMA queues (``dma.DmaQueues``): loads on Sync, stores on GpSimd.
"""

from __future__ import annotations

from dataclasses import dataclass

from neuron_sim import AccessPattern, Architecture, ProgramBuilder, ValidationError, dtypes
from neuron_sim.isa import (
    DmaCopy,
    Instruction,
    Matmul,
    ScalarTensorTensor,
    Select,
    TensorCopy,
    TensorScalar,
    TensorTensor,
    Transpose,
)
from neuron_sim.isa.dma import DmaInstruction
from neuron_sim.memory.access_pattern import PSUM
from neuron_sim.timing.costs import compute_cost

from .dma import DmaQueues
from .errors import CompileError


def onchip_dtype(dtype: str) -> str:
    """The dtype a value has on chip: engines have no 64-bit types, int64 is computed as int32."""
    if dtype == "int64":
        return "int32"
    if dtype == "float64":
        raise CompileError("dtype.unsupported", "float64 has no NeuronCore engine type; convert to float32 first")
    return dtype


@dataclass
class Operand:
    """A value inside one tile of a loop.

    ``ap`` reads it as ``[partitions, *counts]`` (stride 0 along dims it does not vary in);
    ``col`` is set when it is constant along every free dim (a ``[P, 1]`` per-partition scalar, usable
    as a tensor_scalar operand); ``imm`` when it is one number (an immediate).
    """

    dtype: str
    ap: AccessPattern | None = None
    col: AccessPattern | None = None
    imm: float | int | bool | None = None
    # A deferred tensor_scalar (``lower/deferred.py``): ``ap`` is where it would be written; the
    # consumer folds it into its own instruction or writes it out first.
    pending: object | None = None

    @property
    def is_imm(self) -> bool:
        return self.ap is None

    @property
    def is_col(self) -> bool:
        return self.col is not None

    @property
    def scalar(self):
        """The tensor_scalar operand form: the immediate or the [P, 1] column."""
        return self.imm if self.is_imm else self.col


class Emitter:
    def __init__(self, builder: ProgramBuilder, arch: Architecture):
        self.builder = builder
        self.arch = arch
        self.queues = DmaQueues()
        self.busy_ns = {"vector": 0.0, "scalar": 0.0, "gpsimd": 0.0}
        self.location: str | None = None
        self.counts: dict[str, int] = {}
        self.tape: list | None = None  # recording: instructions of the current tile
        self.prologue: list = []  # recorded loop-invariant setup (constant tiles), emitted first

    def emit(self, inst: Instruction, hoist: bool = False) -> Instruction:
        """Emit ``inst`` (or record it while a tape runs; ``hoist``: loop-invariant setup)."""
        if inst.location is None and self.location is not None:
            inst.location = self.location
        if type(inst) in BALANCED and inst.engine in ("vector", "scalar"):
            self._balance(inst)
        if self.tape is not None:
            (self.prologue if hoist else self.tape).append(inst)
        else:
            self.builder.emit(inst)
        self.counts[inst.opcode] = self.counts.get(inst.opcode, 0) + 1
        if inst.engine in self.busy_ns and not isinstance(inst, (DmaInstruction, Matmul, Transpose)):
            self.busy_ns[inst.engine] += compute_cost(inst, self.arch).issue_ns
        return inst

    # --- software pipelining ---------------------------------------------------------------------
    def record(self) -> None:
        """Start recording one tile's instructions (see ``pipelined``)."""
        self.tape = []

    def stop(self) -> list:
        tape, self.tape = self.tape, None
        return tape

    def pipelined(self, tapes: list[list], in_flight: int = 2) -> None:
        """Emit recorded tiles skewed by half a tile: instruction k of tile t goes at t * H + k with
        H = ceil(longest / 2). Each engine's in-order stream then alternates between two tiles, so
        a chain bouncing between VectorE and ScalarE keeps both busy, and tile t+1's loads issue
        while tile t computes. At most two tiles are ever in flight in program order, so rings of
        two buffers stay correct; instructions at the same position of consecutive tiles (a
        reduction's accumulation) keep their order.
        """
        prologue, self.prologue = self.prologue, []
        for inst in prologue:
            self.builder.emit(inst)
        skew = -(-max((len(t) for t in tapes), default=0) // max(1, in_flight))
        order = sorted(((t * skew + k, t, k) for t, tape in enumerate(tapes) for k in range(len(tape))))
        for _, t, k in order:
            self.builder.emit(tapes[t][k])

    def _balance(self, inst: Instruction) -> None:
        """Move a float elementwise instruction to whichever engine able to run it (VectorE, ScalarE,
        GpSimd: the hardware rules decide, e.g. GpSimd reaches no PSUM, ScalarE's ALU only adds and
        multiplies) would finish it first, by the queued work and its cost there. GpSimd's lanes
        stream fp32 as fast as VectorE's, so a chain of elementwise ops spreads over three engines
        instead of two. Integer data keeps the engine the lowering chose (exactness)."""
        aps = inst.reads() + inst.writes()
        if not all(dtypes.is_float(ap.dtype) for ap in aps):
            return
        inst.engine, _ = self.best_engine(inst)

    def best_engine(self, inst: Instruction) -> tuple[str, float]:
        """(engine, modelled finish) of the balanced engine choice for ``inst`` (left unchanged)."""
        psum = any(ap.memory == PSUM for ap in inst.reads() + inst.writes())
        original = inst.engine
        chosen, best = original, None
        for engine in BALANCE_ENGINES if type(inst) in BALANCED else (original,):
            if engine not in inst.engines or (engine == "gpsimd" and psum):
                continue
            inst.engine = engine
            try:
                inst.validate(self.arch)
            except ValidationError:
                continue
            finish = self.busy_ns[engine] + compute_cost(inst, self.arch).issue_ns
            if best is None or finish < best:
                chosen, best = engine, finish
        inst.engine = original
        return chosen, best if best is not None else float("inf")

    def pick(self, *engines: str) -> str:
        """The engine among ``engines`` with the least queued work (the first on ties)."""
        return min(engines, key=lambda e: self.busy_ns.get(e, 0.0))

    # --- DMA ---------------------------------------------------------------------------------
    def load(self, dst: AccessPattern, src: AccessPattern) -> None:
        engine, queue = self.queues.load()
        self.emit(DmaCopy(dst=dst, src=src, engine=engine, queue=queue))

    def store(self, dst: AccessPattern, src: AccessPattern) -> None:
        engine, queue = self.queues.store()
        self.emit(DmaCopy(dst=dst, src=src, engine=engine, queue=queue))

    def copy_onchip(self, dst: AccessPattern, src: AccessPattern) -> None:
        """An SBUF -> SBUF DMA (exact integer-to-integer casts, which engines do through fp32)."""
        engine, queue = self.queues.load()
        self.emit(DmaCopy(dst=dst, src=src, engine=engine, queue=queue))


# Elementwise instructions several engines run with the same numerics (engine choice is free).
BALANCED = frozenset({TensorTensor, TensorScalar, ScalarTensorTensor, TensorCopy, Select})
BALANCE_ENGINES = ("vector", "scalar", "gpsimd")


def is_exact_in_fp32(dtype: str) -> bool:
    """Whether every value of ``dtype`` survives the engines' fp32 datapath unchanged."""
    return dtypes.is_float(dtype) or dtype in ("bool", "int8", "uint8", "int16", "uint16")
