"""What the runtime tells trace subscribers: one record per finished task on a queue.

A ``LaunchRecord`` places a task on its device's simulated timeline (``start_ns``/``end_ns``,
absolute on the runtime's simulated clock, which starts at 0 when the runtime is created) and on
the host's clock (``perf_counter_ns``). For NEFF launches it carries the program's timing result,
whose instruction, DMA and semaphore records are relative to the program's start; the methods
below shift them onto the device timeline, which is what Neuron Explorer's Instruction,
DmaPacket and SemaphoreUpdate tables hold.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..timing import DmaRecord, InstructionRecord, SemaphoreUpdate, TimingResult


@dataclass(frozen=True)
class LaunchRecord:
    launch_id: int  # unique within the runtime, in submission order
    device: int  # the runtime's device index (neuron:<device>)
    queue: str
    name: str
    kind: str  # "neff" for program launches; what submit() was given otherwise ("host", "copy", ...)
    start_ns: float  # simulated, absolute on the device timeline
    end_ns: float
    host_start_ns: int  # time.perf_counter_ns() around the actual execution
    host_end_ns: int
    context: str | None = None  # the caller's description (e.g. the torch op and its shapes)
    # Shared with every launch of the same program: read it, never mutate it.
    timing: TimingResult | None = field(default=None, repr=False)
    program: Any = field(default=None, repr=False)  # the launched Program (for source locations, operands)
    metadata: dict = field(default_factory=dict, repr=False)  # the NEFF's metadata, if launched from one
    executor: str = ""  # executor mode that ran it ("exact", "fast"); "" for host tasks
    core_id: int | None = None  # logical NeuronCore id (the NEURON_RT_VISIBLE_CORES entry)
    error: str | None = None  # set when the task failed; the error itself surfaces at synchronization

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def host_duration_ns(self) -> int:
        return self.host_end_ns - self.host_start_ns

    # Shifted copies, produced on demand: the cached TimingResult is shared by every launch.
    def instructions(self) -> Iterator[InstructionRecord]:
        if self.timing is None:
            return
        base = self.start_ns
        for rec in self.timing.instructions:
            yield dataclasses.replace(rec, start_ts=rec.start_ts + base, end_ts=rec.end_ts + base)

    def dma_packets(self) -> Iterator[DmaRecord]:
        if self.timing is None:
            return
        base = self.start_ns
        for rec in self.timing.dma:
            yield dataclasses.replace(rec, start_ts=rec.start_ts + base, end_ts=rec.end_ts + base)

    def semaphore_updates(self) -> Iterator[SemaphoreUpdate]:
        if self.timing is None:
            return
        base = self.start_ns
        for rec in self.timing.semaphores:
            yield dataclasses.replace(rec, timestamp=rec.timestamp + base)


def device_events(record: LaunchRecord) -> Iterator[tuple[str, InstructionRecord | DmaRecord | SemaphoreUpdate]]:
    """Every device-level record of a launch on the absolute device timeline, tagged with the
    Neuron Explorer table it belongs to: ``"Instruction"``, ``"DmaPacket"``, ``"SemaphoreUpdate"``."""
    for rec in record.instructions():
        yield "Instruction", rec
    for rec in record.dma_packets():
        yield "DmaPacket", rec
    for rec in record.semaphore_updates():
        yield "SemaphoreUpdate", rec
