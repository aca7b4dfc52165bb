"""A logical NeuronCore: its HBM, its executors, its queues and its simulated clock.

The core runs one program at a time, in host time (a lock around the executor, whose on-chip
state is shared) and in simulated time (``_core_free_ns``: a launch starts no earlier than the
end of the previous launch on this core from any queue, in submission order). Each queue also
keeps its own clock, so host tasks and copies on one queue overlap launches on another.
"""

from __future__ import annotations

import itertools
import threading

from ..arch import Architecture
from ..executor import registry
from ..memory import Hbm, HbmAllocation
from ..trace.sink import TraceSink, global_sink
from .failure import raise_failures
from .fork import ProcessGuard
from .queue import Queue
from .timing_cache import has_runtime_trip_counts


class Device:
    def __init__(
        self,
        index: int,
        arch: Architecture,
        hbm_capacity: int,
        *,
        core_id: int | None = None,
        mode: str = "exact",
        blocking: bool = False,
        trace: TraceSink | None = None,
        guard: ProcessGuard | None = None,
        launch_ids: itertools.count | None = None,
    ):
        self.index = index
        self.core_id = index if core_id is None else core_id  # the logical core id (NEURON_RT_VISIBLE_CORES entry)
        self.name = f"neuron:{index}"
        self.arch = arch
        self.mode = mode
        self.blocking = blocking
        self.trace = trace if trace is not None else global_sink()
        self.guard = guard if guard is not None else ProcessGuard()
        self.hbm = Hbm(hbm_capacity, name=f"HBM of {self.name}")
        self._ids = launch_ids if launch_ids is not None else itertools.count(1)
        self._core_lock = threading.Lock()  # one program at a time on the executors
        self._executors: dict[str, object] = {}
        self._clock = threading.Lock()  # guards _core_free_ns and the queues' clocks
        self._core_free_ns = 0.0
        self._queues_lock = threading.Lock()
        self._queues: list[Queue] = []
        self.default_queue = self.new_queue("default")

    def __repr__(self) -> str:
        return f"<Device {self.name} (core {self.core_id}, {self.arch.name}, {self.hbm.capacity >> 20} MiB HBM)>"

    @property
    def used(self) -> bool:
        """Whether anything was ever allocated on or submitted to this device."""
        return self.hbm.stats.num_allocs > 0 or any(q.submitted for q in self.queues)

    # --- queues ----------------------------------------------------------------------------
    def new_queue(self, name: str | None = None) -> Queue:
        """A new queue on this device. Queues live as long as the device (like a stream pool)."""
        self.guard.check()
        with self._queues_lock:
            taken = {q.name for q in self._queues}
            if name is None:
                name = next(f"queue{i}" for i in itertools.count(len(self._queues)) if f"queue{i}" not in taken)
            elif name in taken:
                raise ValueError(f"{self.name} already has a queue named {name!r}")
            queue = Queue(self, name)
            self._queues.append(queue)
        return queue

    @property
    def queues(self) -> tuple[Queue, ...]:
        with self._queues_lock:
            return tuple(self._queues)

    def launch(self, neff_or_program, buffers, name=None, context=None, **options):
        """``default_queue.launch`` (same options)."""
        return self.default_queue.launch(neff_or_program, buffers, name=name, context=context, **options)

    def submit(self, fn, **kwargs):
        return self.default_queue.submit(fn, **kwargs)

    # --- synchronization -------------------------------------------------------------------
    def synchronize(self) -> None:
        """Wait for every queue of this device, then raise the earliest kept error (naming any others)."""
        queues = self.queues
        for q in queues:
            q._wait_idle()
        raise_failures([q._take_failure() for q in queues])

    def query(self) -> bool:
        return all(q.query() for q in self.queues)

    @property
    def sim_time_ns(self) -> float:
        """Simulated time at which all work submitted to this device so far completes."""
        with self._clock:
            return max([self._core_free_ns] + [q._sim_ns for q in self.queues])

    # --- memory ----------------------------------------------------------------------------
    def allocate(self, nbytes: int, tag: str = "", poison: bool = True) -> HbmAllocation:
        self.guard.check()
        return self.hbm.allocate(nbytes, tag, poison=poison)

    def free(self, block: HbmAllocation) -> None:
        self.hbm.free(block)

    def memory_stats(self) -> dict[str, int]:
        return {**self.hbm.stats.as_dict(), "capacity_bytes": self.hbm.capacity, "free_bytes": self.hbm.free_bytes}

    # --- execution (called on a queue's worker, or inline in blocking mode) ----------------
    def _run_launch(self, task) -> None:
        program = task.program
        buffers = dict(task.buffers)
        scratch = []
        try:
            spec = registry.resolve(task.mode or self.mode, program, needs_trip_counts=has_runtime_trip_counts(program))
            mode = spec.mode
            # A graph-form executor never reads internal tensors: they only hold the launch's HBM
            # (as on the device), without the poison fill (a backward graph's took 30 ms a step).
            poison = not spec.needs_graph
            for decl in program.tensors:
                if decl.kind == "internal" and decl.name not in buffers:
                    block = self.hbm.allocate(decl.nbytes, tag=f"{program.name}/{decl.name} (internal)", poison=poison)
                    scratch.append(block)
                    buffers[decl.name] = block.array
            with self._core_lock:
                executor = self._executors.get(mode)
                if executor is None:
                    executor = self._executors[mode] = spec.make(self.arch)
                task.executor = mode
                report = executor.run(program, buffers)
            return report
        finally:
            for block in scratch:
                self.hbm.free(block)
