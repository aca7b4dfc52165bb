"""What the timing model produces: per-instruction records shaped like Neuron Explorer's tables.

Field names follow the profiler's Parquet schema (Instruction, DmaPacket, SemaphoreUpdate) so the
profiler package can write them out directly. Times are nanoseconds from the start of the program.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass(slots=True)
class InstructionRecord:
    index: int  # position in the program (the profiler's pc)
    opcode: str  # profiler opcode, e.g. MATMUL, LDWEIGHTS, ACTIVATE, DMA_COPY
    engine: str  # tensor | vector | scalar | gpsimd | sync | dma
    timeline_track: str  # TensorE (LDWEIGHTS) / TensorMatrix / Vector / Scalar / GpSimd / Sync / q<queue>
    start_ts: float
    end_ts: float
    evt_wait_time_ns: float  # time spent waiting on semaphores (dependencies) before starting
    waited_on: str  # track of the producer waited on ("" if none), e.g. "TensorMatrix" / "qSyncIO0" / "WAR"
    hbm_read_bytes: int = 0
    hbm_write_bytes: int = 0
    sbuf_read_bytes: int = 0
    sbuf_write_bytes: int = 0
    psum_read_bytes: int = 0
    psum_write_bytes: int = 0
    raw_flops: int = 0  # 2 per MAC
    adjusted_flops: float = 0.0  # BF16-equivalent (fp32 x4, fp8 x0.5)
    transpose_flops: int = 0  # work of TensorE transposes (a pass against an identity matrix)
    performance_mode: str = ""
    nki_source_location: str = ""
    operands: str = ""  # filled on demand by TimingResult.describe (costly to format for every record)

    @property
    def duration_ns(self) -> float:
        return self.end_ts - self.start_ts

    def as_dict(self) -> dict:
        d = asdict(self)
        d["duration_ns"] = self.duration_ns
        return d


@dataclass(slots=True)
class DmaRecord:
    """One DMA transfer on one DMA engine (the profiler's DmaPacket, aggregated per engine)."""

    instruction_index: int
    queue_name: str
    engine_idx: int
    start_ts: float
    end_ts: float
    transfer_bytes: int
    source: str  # "HBM" | "SBUF" | tensor name
    dest: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class SemaphoreUpdate:
    timestamp: float
    semaphore: str
    value: int
    update_source: str  # engine or DMA queue that incremented it
    instruction_index: int

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class TimingResult:
    """The device timeline of one program on one NeuronCore.

    The scheduler keeps compact rows ``(index, kind, cost entry, start, end, wait, waited_on,
    extra)``; they become InstructionRecord objects (a matmul gives two: LDWEIGHTS and MATMUL)
    only when someone asks for ``instructions``.
    """

    total_ns: float
    rows: list[tuple]
    locations: list[str]  # per program instruction
    dma: list[DmaRecord]
    semaphores: list[SemaphoreUpdate]
    summary: dict = field(default_factory=dict)
    _records: list[InstructionRecord] | None = field(default=None, repr=False)

    @property
    def instructions(self) -> list[InstructionRecord]:
        if self._records is None:
            self._records = [rec for row in self.rows for rec in expand_row(row, self.locations[row[0]])]
        return self._records

    def with_operands(self, program) -> TimingResult:
        """Fill each record's ``operands`` text from the program (for display and export)."""
        for rec in self.instructions:
            if not rec.operands:
                rec.operands = program.instructions[rec.index].describe()
        return self


# Row kinds (the scheduler's dispatch codes).
COMPUTE, TENSOR, DMA, SYNC = range(4)


def expand_row(row: tuple, location: str) -> list[InstructionRecord]:
    idx, kind, cost, start, end, wait, by, extra = row
    if kind == COMPUTE:
        opcode, engine, track, _, _, sr, sw, pr, pw, mode = cost
        return [InstructionRecord(idx, opcode, engine, track, start, end, wait, by, 0, 0, sr, sw, pr, pw,
                                  performance_mode=mode, nki_source_location=location)]
    if kind == TENSOR:
        opcode, _, _, st_bytes, sr, pr, pw, raw, adjusted, tflops, mode = cost
        ls_start, ls_end, throttled = extra
        return [
            InstructionRecord(idx, "LDWEIGHTS", "tensor", "TensorE", ls_start, ls_end, 0.0, "", sbuf_read_bytes=st_bytes,
                              nki_source_location=location),
            InstructionRecord(idx, opcode, "tensor", "TensorMatrix", start, end, wait, by, 0, 0, sr, 0, pr, pw, raw,
                              adjusted, tflops, mode or ("throttled" if throttled else ""), nki_source_location=location),
        ]
    if kind == DMA:
        opcode = cost[0]
        hbm_r, hbm_w, sbuf_r, sbuf_w = cost[6:10]
        return [InstructionRecord(idx, opcode, "dma", extra, start, end, wait, by, hbm_r, hbm_w, sbuf_r, sbuf_w,
                                  nki_source_location=location)]
    opcode, engine, track = cost
    return [InstructionRecord(idx, opcode, engine, track, start, end, wait, by, nki_source_location=location)]
