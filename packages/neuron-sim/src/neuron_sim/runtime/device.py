"""A logical NeuronCore: its HBM, its executors (``core.py``), its timeline (``timeline.py``) and
its queues.

The core runs one launch at a time, in host time (``Core``: a lock around the executors, whose
on-chip state is shared) and in simulated time (``Timeline``: a launch starts no earlier than the
end of the previous launch on this core from any queue, in submission order). Each queue has its
own lane on the timeline, so host tasks and copies on one queue overlap launches on another.
"""

from __future__ import annotations

import itertools
import threading

from ..arch import Architecture
from ..memory import Hbm, HbmAllocation
from ..trace.records import ClockAnchor
from ..trace.sink import TraceSink, global_sink
from .core import Core
from .fork import ProcessGuard
from .queue import Queue, not_before, synchronize_all
from .timeline import Timeline


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
        lnc: int = 1,
        lnc_configured: bool = True,
        anchor: ClockAnchor | None = None,
    ):
        self.index = index
        self.core_id = index if core_id is None else core_id  # the logical core id (NEURON_RT_VISIBLE_CORES entry)
        self.name = f"neuron:{index}"
        self.arch = arch
        self.mode = mode
        self.blocking = blocking
        self.lnc = lnc  # physical NeuronCores in this logical core
        # How many programs one launch may run at once, one per physical core. With the LNC left
        # at the simulator's default (1) an LNC=2 kernel still runs, as NKI allows it then.
        self.physical_cores_per_launch = lnc if lnc_configured else max(lnc, 2)
        self.trace = trace if trace is not None else global_sink()
        self.guard = guard if guard is not None else ProcessGuard()
        self.pid = self.guard.pid
        self.anchor = anchor if anchor is not None else ClockAnchor.now()  # the host clocks at simulated time 0
        self.hbm = Hbm(hbm_capacity, name=f"HBM of {self.name}")
        self.core = Core(arch, self.hbm, mode)
        self.timeline = Timeline(self.name)
        self.new_launch_id = (launch_ids if launch_ids is not None else itertools.count(1)).__next__
        self._queues_lock = threading.Lock()
        self._queues: list[Queue] = []
        self._released_failures: list = []  # errors kept by released queues, for the next synchronize
        self.default_queue = self.new_queue("default")

    def __repr__(self) -> str:
        return f"<Device {self.name} (core {self.core_id}, {self.arch.name}, {self.hbm.capacity >> 20} MiB HBM)>"

    @property
    def used(self) -> bool:
        """Whether anything was ever allocated on or submitted to this device."""
        return self.hbm.stats.num_allocs > 0 or any(q.submitted for q in self.queues)

    # --- queues ----------------------------------------------------------------------------
    def new_queue(self, name: str | None = None, *, start_ns: float = 0.0) -> Queue:
        """A new queue on this device. It lives until ``queue.release()`` (a collected stream).

        Its first task starts no earlier than simulated time ``start_ns``. A framework re-creating
        the queue of a stream it released passes ``device.sim_time_ns``, so the stream's work does
        not go back in time; a queue made at 0 overlaps the device's earlier work as a stream
        that existed all along would."""
        self.guard.check()
        start_ns = not_before(start_ns, "start_ns")
        with self._queues_lock:
            taken = {q.name for q in self._queues if not q.released}  # a released queue's name is free at once
            if name is None:
                name = next(f"queue{i}" for i in itertools.count(len(self._queues)) if f"queue{i}" not in taken)
            elif name in taken:
                raise ValueError(f"{self.name} already has a queue named {name!r}")
            queue = Queue(self, name, on_retired=self._forget_queue, start_ns=start_ns)
            self._queues.append(queue)
        return queue

    def _forget_queue(self, queue: Queue) -> None:
        """A released queue is idle: drop it, keeping its error (if any) for the next synchronize."""
        with self._queues_lock:  # taken and kept in one step: a synchronize sees it in one place or the other
            failure = queue.take_failure()
            self._queues = [q for q in self._queues if q is not queue]
            if failure is not None:
                self._released_failures.append(failure)
        self.timeline.remove(queue.lane)

    def take_released_failures(self) -> list:
        """The errors kept by queues released since the last call (cleared)."""
        with self._queues_lock:
            taken, self._released_failures = self._released_failures, []
        return taken

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
        synchronize_all(self.queues, self.take_released_failures)

    def query(self) -> bool:
        return all(q.query() for q in self.queues)

    @property
    def sim_time_ns(self) -> float:
        """Simulated time at which all work submitted to this device so far completes."""
        return self.timeline.end_ns

    # --- memory ----------------------------------------------------------------------------
    def allocate(self, nbytes: int, tag: str = "", poison: bool = True) -> HbmAllocation:
        self.guard.check()
        return self.hbm.allocate(nbytes, tag, poison=poison)

    def free(self, block: HbmAllocation) -> None:
        self.hbm.free(block)

    def check_valid(self, address: int, nbytes: int) -> None:
        """Raise InvalidMemoryError (with the original error) if any of device bytes
        ``[address, address + nbytes)`` hold no valid data because work that should have written
        them failed or was skipped; what a framework calls before a host read of device memory.
        ``AccessPatternError`` if the bytes are not inside one live allocation of this device."""
        block, _ = self.hbm.resolve(address, max(nbytes, 1))
        found = self.hbm.invalid.find(block.address, address, address + nbytes) if self.hbm.invalid else None
        if found is not None:
            cause, lo, hi = found
            where = (f"bytes [{max(lo, address):#x}, {min(hi, address + nbytes):#x}) of {self.name} "
                     f"(allocation {block.tag or 'untagged'!r} at {block.address:#x})")
            raise cause.invalid_memory_error(where)

    def memory_stats(self) -> dict[str, int]:
        return {**self.hbm.stats.as_dict(), "capacity_bytes": self.hbm.capacity, "free_bytes": self.hbm.free_bytes}
