"""What the runtime tells trace subscribers: one record per finished task on a queue, and the
op-level records frameworks publish beside them.

A ``LaunchRecord`` places a task on its device's simulated timeline (``start_ns``/``end_ns``,
absolute on the runtime's simulated clock, which starts at 0 when the runtime is created) and on
the host's clock (``perf_counter_ns``). For NEFF launches it carries each program's timing result
(one; one per physical core of an LNC=2 launch), whose instruction, DMA and semaphore records are
relative to the program's start; the methods below shift them onto the device timeline, which is
what Neuron Explorer's Instruction, DmaPacket and SemaphoreUpdate tables hold.

Every record names its process (``pid``) and carries the runtime's ``ClockAnchor``: the host's
``perf_counter_ns`` and wall-clock ``time_ns`` read together at simulated time 0. Host times of
different processes compare only through the wall clock (``anchor.wall_ns``), and so do their
simulated timelines (``anchor.time_ns + start_ns``): that is how traces of several processes
(the ranks of a distributed job) are merged on one timeline.

An ``OpRecord`` is what a framework publishes for one op (``Queue.publish_op``), on the thread
that issued it, when the op is submitted: the op or graph name, the launch it produced (id, kind,
simulated interval), where it ran (device, queue, the framework's stream id), the framework's own
context, and host times - so a profiler can tie device launches to the ops that made them.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..timing import DmaRecord, InstructionRecord, SemaphoreUpdate, TimingResult


class RecordKind(enum.StrEnum):
    """What a record is about. Members equal their string values ("neff" == RecordKind.NEFF)."""

    NEFF = "neff"  # a program launch
    HOST = "host"  # host work on a queue (the default of Queue.submit)
    COPY = "copy"  # a copy between host and device or between devices
    CPU_FALLBACK = "cpu_fallback"  # an op a framework ran on the CPU in the queue's order
    COLLECTIVE = "collective"  # a collective (all-reduce, ...) across devices or processes
    OP = "op"  # a framework's op record (OpRecord)


KINDS = {kind.value: kind for kind in RecordKind}  # also looks up members: they hash as their values


def record_kind(kind: str | RecordKind) -> RecordKind:
    """``kind`` as a RecordKind; an unknown kind is a ValueError naming the known ones."""
    member = KINDS.get(kind)
    if member is None:
        raise ValueError(f"unknown record kind {kind!r}; one of {sorted(KINDS)}")
    return member


@dataclass(frozen=True)
class ClockAnchor:
    """The host's clocks read together at a runtime's simulated time 0."""

    perf_counter_ns: int
    time_ns: int

    @classmethod
    def now(cls) -> ClockAnchor:
        return cls(time.perf_counter_ns(), time.time_ns())

    def wall_ns(self, perf_counter_ns: int) -> int:
        """A ``perf_counter_ns`` reading of this process as wall-clock ``time_ns``."""
        return self.time_ns + (perf_counter_ns - self.perf_counter_ns)

    def sim_wall_ns(self, sim_ns: float) -> float:
        """A simulated time of this runtime placed on the wall clock."""
        return self.time_ns + sim_ns


_NO_ANCHOR = ClockAnchor(0, 0)


@dataclass(frozen=True)
class LaunchRecord:
    launch_id: int  # unique within the runtime, in submission order
    device: int  # the runtime's device index (neuron:<device>)
    queue: str
    name: str
    kind: RecordKind  # NEFF for program launches; what submit() was given otherwise
    start_ns: float  # simulated, absolute on the device timeline
    end_ns: float
    host_start_ns: int  # time.perf_counter_ns() around the actual execution
    host_end_ns: int
    context: str | None = None  # the caller's description (e.g. the torch op and its shapes)
    # Shared with every launch of the same programs: read them, never mutate them.
    timings: tuple[TimingResult, ...] = field(default=(), repr=False)  # one per program (physical core)
    programs: tuple[Any, ...] = field(default=(), repr=False)  # the launched Programs (source locations, operands)
    metadata: dict = field(default_factory=dict, repr=False)  # the NEFF's metadata, if launched from one
    executor: str = ""  # executor mode that ran it ("exact", "fast"); "" for host tasks
    core_id: int | None = None  # logical NeuronCore id (the NEURON_RT_VISIBLE_CORES entry)
    error: str | None = None  # set when the task failed or was skipped; the error surfaces at synchronization
    pid: int = field(default_factory=os.getpid)
    anchor: ClockAnchor = _NO_ANCHOR
    call_site: str | None = None  # the framework user's line that issued the launch ("file:line"), if given

    @property
    def duration_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def host_duration_ns(self) -> int:
        return self.host_end_ns - self.host_start_ns

    @property
    def timing(self) -> TimingResult | None:
        """The first (for LNC=2: physical core 0's) program's timing; None for host tasks."""
        return self.timings[0] if self.timings else None

    @property
    def program(self):
        """The first (for LNC=2: physical core 0's) launched program; None for host tasks."""
        return self.programs[0] if self.programs else None

    # Shifted copies, produced on demand: the cached TimingResults are shared by every launch. An
    # LNC=2 launch's physical cores start together, so each core's records shift by the same base.
    def instructions(self, core: int | None = None) -> Iterator[InstructionRecord]:
        """Instruction records on the device timeline (of physical core ``core``, or of all)."""
        base = self.start_ns
        for timing in self._timings(core):
            for rec in timing.instructions:
                yield dataclasses.replace(rec, start_ts=rec.start_ts + base, end_ts=rec.end_ts + base)

    def dma_packets(self, core: int | None = None) -> Iterator[DmaRecord]:
        base = self.start_ns
        for timing in self._timings(core):
            for rec in timing.dma:
                yield dataclasses.replace(rec, start_ts=rec.start_ts + base, end_ts=rec.end_ts + base)

    def semaphore_updates(self, core: int | None = None) -> Iterator[SemaphoreUpdate]:
        base = self.start_ns
        for timing in self._timings(core):
            for rec in timing.semaphores:
                yield dataclasses.replace(rec, timestamp=rec.timestamp + base)

    def _timings(self, core: int | None) -> tuple:
        if core is None:
            return self.timings
        if not 0 <= core < len(self.timings):
            raise IndexError(f"launch #{self.launch_id} ran {len(self.timings)} program(s); there is no physical core {core}")
        return (self.timings[core],)


@dataclass(frozen=True)
class OpRecord:
    """One framework op and the launch it produced (``launch_id`` None: it launched nothing, e.g.
    a view or an op queued for fusion)."""

    name: str  # the op or graph name (e.g. "aten::add.Tensor", a compiled graph's name)
    launch_id: int | None
    device: int
    queue: str  # the runtime queue (the framework's stream)
    context: str | None  # the framework's own description (shapes, dtypes, the call site)
    host_start_ns: int  # time.perf_counter_ns() around the framework's handling of the op
    host_end_ns: int
    pid: int
    anchor: ClockAnchor
    framework: str = "torch"  # which framework (or path of it: eager, torch.compile, ...) published it
    stream_id: int | None = None  # the framework's stream id on the device (None: the framework has no stream ids)
    task_kind: RecordKind | None = None  # what the op's work is (NEFF, COPY, ...); None if it launched nothing
    start_ns: float | None = None  # the work's simulated interval on the device timeline (the launch's)
    end_ns: float | None = None
    kind: RecordKind = RecordKind.OP

    @property
    def host_duration_ns(self) -> int:
        return self.host_end_ns - self.host_start_ns


def device_events(record: LaunchRecord) -> Iterator[tuple[str, InstructionRecord | DmaRecord | SemaphoreUpdate]]:
    """Every device-level record of a launch on the absolute device timeline, tagged with the
    Neuron Explorer table it belongs to: ``"Instruction"``, ``"DmaPacket"``, ``"SemaphoreUpdate"``
    (all physical cores' of an LNC=2 launch; ``record.instructions(core)`` and friends for one)."""
    for rec in record.instructions():
        yield "Instruction", rec
    for rec in record.dma_packets():
        yield "DmaPacket", rec
    for rec in record.semaphore_updates():
        yield "SemaphoreUpdate", rec
