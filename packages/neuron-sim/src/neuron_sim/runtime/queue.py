"""A queue (a stream): tasks on it run one after another, in submission order.

Submitting never waits for the device: ``launch`` checks its arguments, places the task on the
simulated timeline and queues it. Tasks run on the queue's worker thread, or in the thread that
synchronizes with them: a synchronizing caller would only wait, so it runs what is pending itself
(the worker stands aside meanwhile, after the task it is running).
The worker is not woken per task: it picks up submitted work after a short delay
(``WAKE_DELAY_SECONDS``), in batches. Handing every small task to another thread cost more than
running it (both threads need the GIL), while batches still let large tasks (numpy kernels that
release the GIL) overlap with the caller issuing more work. For the same reason a small launch
(``INLINE_MAX_BYTES`` of buffers, run by the fast executor) submitted to an idle queue runs right
away in the submitting thread; it still reports errors only at the next synchronization point. A task that raises poisons the queue: the error is
kept, later work on the queue is skipped (and counted) instead of running on garbage, and the next
synchronization point raises it as an ``ExecutionError``; after that the queue works again. Event
markers and waits are never skipped, so synchronizing and cross-queue waits cannot hang on a
failed queue. In blocking mode every task runs in the caller's thread and raises right away.

The worker thread exits after a few idle seconds and is restarted by the next submission, so
many rarely used queues do not pin many threads.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Mapping

from ..errors import ValidationError
from ..executor import registry
from ..executor.waiting import waiting_for_device
from ..timing import estimate, program_timing
from ..trace.records import LaunchRecord
from .bindings import as_program, bind_buffers
from .constants import with_constants
from .errors import RuntimeUsageError
from .failure import Failure, raise_failures
from .task import MARKER, WAIT, WORK, Marker, Submission, Task
from .timing_cache import has_runtime_trip_counts

IDLE_EXIT_SECONDS = 5.0
WAKE_DELAY_SECONDS = 0.0005
INLINE_MAX_BYTES = 256 * 1024

_running = threading.local()  # .queue: the queue whose task this thread is running


class Queue:
    def __init__(self, device, name: str):
        self.device = device
        self.name = name
        self._lock = threading.Lock()
        self._has_work = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._pending: deque[Task] = deque()
        self._outstanding = 0  # submitted and not finished (pending + running)
        self._worker: threading.Thread | None = None
        self._inline = threading.RLock()  # blocking mode: one task at a time, reentrant for nested submits
        self._run_lock = threading.Lock()  # held while a task runs: tasks run one at a time, in order
        self._worker_sleeping = False
        self._callers_draining = 0  # threads synchronizing with this queue, running its tasks themselves
        self._seq = 0
        self._sim_ns = 0.0  # simulated time at which everything submitted so far is done
        self._failure: Failure | None = None

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} of {self.device.name}>"

    # --- submitting work -------------------------------------------------------------------
    def launch(self, neff_or_program, buffers: Mapping, name: str | None = None, context: str | None = None,
               *, executor: str | None = None) -> Submission:
        """Run a program (or a Neff's program) on this queue's NeuronCore with ``buffers`` bound
        to its input/output/inout tensors (numpy arrays or HbmAllocations, by tensor name).
        Internal tensors are allocated from the device's HBM for the duration of the launch.
        ``executor`` ("exact", "fast", or another registered mode) overrides the device's mode
        (``NEURON_SIM_MODE``) for this launch."""
        self.device.guard.check()
        mode = self.device.mode if executor is None else registry.spec(executor).mode
        program = as_program(neff_or_program)
        arch = self.device.arch
        if program.target != arch.name:
            raise ValidationError(
                "launch.target", f"program {program.name!r} was built for {program.target!r}, but {self.device.name} is {arch.name!r}"
            )
        buffers = with_constants(program, buffers)  # constants stored in the program bind themselves
        bound = bind_buffers(program, buffers, self.device.hbm, self.device.name)
        if has_runtime_trip_counts(program):
            return self._launch_with_runtime_loops(program, bound, name, context, neff_or_program, mode)
        timing = program_timing(neff_or_program, arch)  # a NEFF's recorded summary, if still valid
        task = Task(WORK, "neff", name or program.name, context)
        task.execute = self.device._run_launch
        task.program = program
        task.buffers = bound
        task.timing = timing
        task.metadata = getattr(neff_or_program, "metadata", None) or program.metadata or {}
        task.mode = mode
        small = sum(b.nbytes for b in bound.values()) <= INLINE_MAX_BYTES and registry.resolve(mode, program).mode == "fast"
        return self._submit(task, timing.total_ns, occupies_core=True, inline_ok=small)

    def _launch_with_runtime_loops(self, program, bound, name, context, source, mode) -> Submission:
        """A program whose loop bounds are read at run time has data-dependent device time, and
        the timeline places every launch when it is submitted: such a launch runs right away
        (after the work already queued), then takes its place on the timeline with the timing of
        the iterations it actually ran."""
        self.synchronize()
        task = Task(WORK, "neff", name or program.name, context)
        task.program = program
        task.buffers = bound
        task.mode = mode
        report = self.device._run_launch(task)
        timing = estimate(program, self.device.arch, report.trip_counts if report is not None else {})
        done = Task(WORK, "neff", task.name, context)
        done.execute = lambda _task: None
        done.program = program
        done.buffers = bound
        done.timing = timing
        done.metadata = getattr(source, "metadata", None) or program.metadata or {}
        return self._submit(done, timing.total_ns, occupies_core=True)

    def submit(
        self,
        fn: Callable[[], object],
        *,
        device_time_ns: float = 0.0,
        name: str | None = None,
        kind: str = "host",
        context: str | None = None,
        occupies_core: bool = False,
    ) -> Submission:
        """Run ``fn()`` in order on this queue (CPU fallback ops, copies, ...) and advance the
        queue's simulated clock by ``device_time_ns``. ``occupies_core`` makes the task also hold
        the NeuronCore on the simulated timeline, as a launch does; host work and DMA copies do not."""
        self.device.guard.check()
        if not callable(fn):
            raise TypeError(f"submit expects a callable, got {type(fn).__name__}")
        if not device_time_ns >= 0:
            raise ValueError(f"device_time_ns must be >= 0, got {device_time_ns}")
        task = Task(WORK, kind, name or getattr(fn, "__name__", kind), context)
        task.execute = _call_fn(fn)
        return self._submit(task, float(device_time_ns), occupies_core)

    def record_event(self, event=None):
        """Record ``event`` (a new timing Event if None) at this point of the queue and return it."""
        from .event import Event

        event = event if event is not None else Event()
        event.record(self)
        return event

    def wait_event(self, event) -> None:
        """Later tasks on this queue start only after ``event`` completes, in host time and in
        simulated time. Waiting on an event that was never recorded does nothing (as in CUDA)."""
        self.device.guard.check()
        marker = event._marker
        if marker is None:
            return
        task = Task(WAIT)
        task.marker = marker
        self._submit(task, 0.0, False, not_before_ns=marker.sim_ns)

    def wait_queue(self, other: Queue) -> None:
        """Later tasks on this queue wait for everything submitted to ``other`` so far."""
        if other is not self:
            self.wait_event(other.record_event())

    def _record_marker(self) -> Marker:
        self.device.guard.check()
        task = Task(MARKER)
        self._submit(task, 0.0, False)
        return task.marker

    # --- synchronization -------------------------------------------------------------------
    def query(self) -> bool:
        """True if every task submitted so far has finished. Never raises a kept error."""
        return self._outstanding == 0

    def synchronize(self) -> None:
        """Wait for every task submitted so far, then raise the kept error, if any."""
        self._wait_idle()
        raise_failures([self._take_failure()])

    def _wait_idle(self) -> None:
        self.device.guard.check()
        self._check_not_inside_own_task()
        with waiting_for_device():
            self._drain(by_caller=True)
            with self._lock:
                while self._outstanding:
                    self._idle.wait()

    def _run_until(self, seq: int) -> None:
        """Run this queue's tasks up to ``seq`` in the calling thread (an event being waited for)."""
        self._check_not_inside_own_task()
        with waiting_for_device():
            self._drain(until_seq=seq, by_caller=True)

    def _check_not_inside_own_task(self) -> None:
        if getattr(_running, "queue", None) is self:
            raise RuntimeUsageError(f"synchronizing {self!r} from a task running on it would wait for itself forever")

    def _take_failure(self, before_seq: int | None = None) -> Failure | None:
        with self._lock:
            failure = self._failure
            if failure is None or (before_seq is not None and failure.task.seq >= before_seq):
                return None
            self._failure = None
            return failure

    @property
    def sim_time_ns(self) -> float:
        """Simulated time at which everything submitted to this queue so far completes."""
        return self._sim_ns

    @property
    def submitted(self) -> int:
        """How many tasks were ever submitted to this queue."""
        return self._seq

    @property
    def has_error(self) -> bool:
        return self._failure is not None

    # --- machinery -------------------------------------------------------------------------
    def _submit(self, task: Task, device_ns: float, occupies_core: bool, not_before_ns: float = 0.0,
                inline_ok: bool = False) -> Submission:
        device = self.device
        blocking = device.blocking
        inline = False
        if blocking:
            self._inline.acquire()  # schedule and run as one step, so inline order matches the timeline
        try:
            with self._lock:
                with device._clock:
                    start = max(self._sim_ns, not_before_ns)
                    if occupies_core and device._core_free_ns > start:
                        start = device._core_free_ns
                    end = start + device_ns
                    self._sim_ns = end
                    if occupies_core:
                        device._core_free_ns = end
                task.seq = self._seq
                self._seq += 1
                task.start_ns, task.end_ns = start, end
                if task.role == WORK:
                    task.launch_id = next(device._ids)
                elif task.role == MARKER:
                    task.marker = Marker(self, task.seq, end)
                if not blocking and inline_ok and not self._pending and self._run_lock.acquire(blocking=False):
                    inline = True  # an idle queue and a small task: run it now (below), in order
                    self._outstanding += 1
                elif not blocking:
                    self._pending.append(task)
                    self._outstanding += 1
                    if self._worker is None:
                        self._worker = threading.Thread(
                            target=self._work, name=f"neuron-sim {device.name} {self.name}", daemon=True
                        )
                        self._worker.start()
                    elif self._worker_sleeping:
                        self._worker_sleeping = False
                        self._has_work.notify()
            if blocking:
                self._execute(task, raise_now=True)
            elif inline:
                try:
                    self._run(task)
                finally:
                    self._run_lock.release()
        finally:
            if blocking:
                self._inline.release()
        return Submission(task.launch_id, task.name, start, end)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending or self._callers_draining:
                    self._worker_sleeping = True
                    if not self._has_work.wait(IDLE_EXIT_SECONDS) and not self._pending:
                        self._worker_sleeping = False
                        self._worker = None
                        return
            time.sleep(WAKE_DELAY_SECONDS)  # let a burst of submissions arrive: run them as one batch
            self._drain()

    def _drain(self, until_seq: int | None = None, by_caller: bool = False) -> None:
        """Run pending tasks in order (those up to ``until_seq``, or all), one at a time.

        A synchronizing caller (``by_caller``) takes over from the worker, which stops after its
        current task until the caller is done: taking turns task by task, the two threads handed
        the run lock (and the GIL) back and forth, each hand-over a thread wake-up."""
        if by_caller:
            with self._lock:
                self._callers_draining += 1
        try:
            while True:
                with self._run_lock:
                    with self._lock:
                        if (not self._pending or (until_seq is not None and self._pending[0].seq > until_seq)
                                or (self._callers_draining and not by_caller)):
                            return
                        task = self._pending.popleft()
                    self._run(task)
                    task = None  # do not keep the task (its program and buffers) alive while idle
        finally:
            if by_caller:
                with self._lock:
                    self._callers_draining -= 1
                    if not self._callers_draining and self._pending and self._worker_sleeping:
                        self._worker_sleeping = False
                        self._has_work.notify()  # what the caller left (past ``until_seq``)

    def _run(self, task: Task) -> None:
        """Run ``task`` (the caller holds ``_run_lock``) and count it done."""
        outer = getattr(_running, "queue", None)  # a task may submit to another queue
        _running.queue = self
        try:
            self._execute(task, raise_now=False)
        finally:
            _running.queue = outer
            with self._lock:
                self._outstanding -= 1
                if not self._outstanding:
                    self._idle.notify_all()

    def _execute(self, task: Task, raise_now: bool) -> None:
        if task.role == MARKER:
            task.marker.done.set()
            return
        if task.role == WAIT:
            task.marker.done.wait()
            return
        failure = self._failure
        if failure is not None:  # poisoned: do not run on the failed task's results
            failure.skipped += 1
            task.buffers = None
            return
        device = self.device
        host_start = time.perf_counter_ns()
        error = None
        try:
            task.execute(task)
        except BaseException as err:  # the worker must survive anything a task raises
            error = err
        host_end = time.perf_counter_ns()
        task.buffers = None  # release the caller's arrays as soon as the task is done
        if device.trace.enabled:
            device.trace.publish(
                LaunchRecord(
                    launch_id=task.launch_id, device=device.index, queue=self.name, name=task.name, kind=task.kind,
                    start_ns=task.start_ns, end_ns=task.end_ns, host_start_ns=host_start, host_end_ns=host_end,
                    context=task.context, timing=task.timing, program=task.program, metadata=task.metadata,
                    executor=task.executor, core_id=device.core_id,
                    error=None if error is None else f"{type(error).__name__}: {error}",
                )
            )
        if error is None:
            return
        failure = Failure(task, device.name, self.name, error)
        if raise_now:
            raise failure.to_exception() from error
        with self._lock:
            self._failure = failure


def _call_fn(fn):
    def execute(task: Task) -> None:
        fn()

    return execute
