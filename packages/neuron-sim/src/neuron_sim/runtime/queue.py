"""A queue (a stream): tasks on it run one after another, in submission order.

Submitting never waits for the device: ``launch`` checks its arguments, places the task on the
core's timeline (``timeline.py``) and queues it. Tasks run on the queue's worker thread, or in the
thread that synchronizes with them: a synchronizing caller would only wait, so it runs what is
pending itself (the worker stands aside meanwhile, after the task it is running).
The worker is not woken per task: it picks up submitted work after a short delay
(``WAKE_DELAY_SECONDS``), in batches. Handing every small task to another thread cost more than
running it (both threads need the GIL), while batches still let large tasks (numpy kernels that
release the GIL) overlap with the caller issuing more work. For the same reason a small launch
(``INLINE_MAX_BYTES`` of buffers, run by the fast executor) submitted to an idle queue runs right
away in the submitting thread; it still reports errors only at the next synchronization point.

A task that raises poisons the queue: the error is kept, later work on the queue is skipped (and
counted) instead of running on garbage, and the next synchronization point raises it as an
``ExecutionError``; after that the queue works again. Event markers and waits are never skipped,
so synchronizing and cross-queue waits cannot hang on a failed queue. In blocking mode every task
runs in the caller's thread and raises right away.

The worker thread exits after a few idle seconds and is restarted by the next submission, so
many rarely used queues do not pin many threads.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence

from ..errors import ValidationError
from ..executor import registry
from ..executor.waiting import waiting_for_device
from ..memory.validity import INVALID
from ..timing import estimate, program_timing
from ..trace.records import LaunchRecord, OpRecord, RecordKind, record_kind
from . import task_memory
from .bindings import as_program, bind_buffers
from .constants import with_constants
from .errors import RuntimeUsageError
from .event import Event
from .failure import Failure, raise_failures
from .task import MARKER, UNWRITTEN, WAIT, WORK, Marker, Submission, Task
from .timing_cache import has_runtime_trip_counts

IDLE_EXIT_SECONDS = 5.0
WAKE_DELAY_SECONDS = 0.0005
INLINE_MAX_BYTES = 256 * 1024

_running = threading.local()  # .queue: the queue whose task this thread is running


class Queue:
    """Made by ``Device.new_queue``; ``device`` is the Device it belongs to."""

    def __init__(self, device, name: str, on_retired: Callable[[Queue], None] | None = None, start_ns: float = 0.0):
        self.device = device
        self.name = name
        self._on_retired = on_retired  # told once a released queue is idle (the device forgets it)
        self._released = False
        self._retired = False
        self._lane = device.timeline.lane(name, start_ns)
        self._new_launch_id = device.new_launch_id
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
        self._failure: Failure | None = None

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} of {self.device.name}>"

    # --- submitting work -------------------------------------------------------------------
    def launch(self, neff_or_program, buffers: Mapping, name: str | None = None, context: str | None = None, *,
               executor: str | None = None, executor_options: Mapping | None = None,
               not_before_ns: float = 0.0, errors: Callable[[BaseException], BaseException | None] | None = None,
               call_site: str | None = None) -> Submission:
        """Run a program (or a Neff's program) on this queue's NeuronCore with ``buffers`` bound
        to its input/output/inout tensors (numpy arrays or HbmAllocations, by tensor name).
        Internal tensors are allocated from the device's HBM for the duration of the launch.

        * ``neff_or_program`` may be a sequence of programs (or Neffs), one per physical core of
          the logical core (an NKI ``kernel[2]`` on LNC=2): one task whose programs share
          ``buffers`` (HBM) and run on the physical cores at once, so its device time is the
          longest program's, not the sum.
        * ``executor`` ("exact", "fast", or another registered mode) overrides the device's mode
          (``NEURON_SIM_MODE``) for this launch; ``executor_options`` are passed to that mode's
          executor factory (e.g. ``{"uninitialized": "error"}`` for exact).
        * ``not_before_ns``: the launch starts no earlier than this simulated time (all ranks of
          a collective start at the latest rank's arrival).
        * ``errors``: how the caller reports this launch's failures - maps the error its program
          raises to the one to keep (None: keep it), e.g. a framework op's own error type for an
          ``IndexOutOfBoundsError``. Applied when the launch fails, so the sync error's
          ``original`` and every later read of the memory it left unwritten carry the mapped
          error (chained to the simulator's).
        * ``call_site``: the framework user's source line that issued the launch (``file:line``),
          carried to its LaunchRecord for profilers (the program's own locations are shared by
          every call site of a cached program)."""
        device = self.device
        device.guard.check()
        if executor is not None:
            executor = registry.spec(executor).mode
        if isinstance(neff_or_program, (list, tuple)):
            programs, source = _programs(neff_or_program, device), neff_or_program[0]
            bound = _bind_shared(programs, buffers, device)
        else:
            program = as_program(neff_or_program)
            _check_target(program, device)
            programs, source = (program,), neff_or_program
            bound = bind_buffers(program, with_constants(program, buffers), device.hbm, device.name)
        task = Task(WORK, RecordKind.NEFF, name or programs[0].name, context)
        task.errors = errors
        task.call_site = call_site
        task.programs = programs
        task.buffers = bound
        task.spec = spec = device.core.resolve(executor, programs)
        if executor_options:
            if spec.mode != (executor or device.mode):
                raise ValueError(f"executor_options are for the {executor or device.mode!r} executor, but "
                                 f"{spec.mode!r} runs {programs[0].name!r} (no graph form, or loops with run-time bounds)")
            device.core.executor(spec, executor_options)  # bad options raise here, at the launch
            task.options = executor_options
        task.metadata = getattr(source, "metadata", None) or programs[0].metadata or {}
        if len(programs) == 1:
            if has_runtime_trip_counts(programs[0]):
                return self._launch_with_runtime_loops(task, not_before_ns)
            timing = program_timing(neff_or_program, device.arch)  # a NEFF's recorded summary, if still valid
            task.timings = (timing,)
            device_ns = timing.total_ns
            small = spec.mode == "fast" and sum(b.nbytes for b in bound.values()) <= INLINE_MAX_BYTES
        else:
            if any(has_runtime_trip_counts(p) for p in programs):
                return self._launch_with_runtime_loops(task, not_before_ns)
            task.timings = tuple(program_timing(p, device.arch) for p in neff_or_program)
            device_ns = max(t.total_ns for t in task.timings)  # the physical cores run at once
            small = False
        task.execute = self._run_launch
        return self._submit(task, device_ns, True, not_before(not_before_ns) if not_before_ns else 0.0, small)

    def _run_launch(self, task: Task) -> None:
        task.executor = task.spec.mode
        task.reports = self.device.core.run(task.programs, task.buffers, task.spec, task.options)

    def _launch_with_runtime_loops(self, task: Task, not_before_ns: float) -> Submission:
        """A program whose loop bounds are read at run time has data-dependent device time, and
        the timeline places every launch when it is submitted: such a launch runs right away
        (after the work already queued), then takes its place on the timeline with the timing of
        the iterations it actually ran."""
        not_before_ns = not_before(not_before_ns)
        self.synchronize()
        task.launch_id = self._new_launch_id()  # its errors are raised now: name the launch
        task.execute = self._run_launch
        host_start = time.perf_counter_ns()
        failure = self._run_work(task)
        if failure is not None:
            # It never takes a place on the timeline; a trace still shows it, with its error, at
            # the point where it would have started.
            with self._lock:
                task.start_ns = task.end_ns = max(self._lane.end_ns, not_before_ns)
            self._publish(task, host_start, time.perf_counter_ns(), failure)
            raise failure.to_exception() from failure.error
        task.timings = tuple(estimate(p, self.device.arch, r.trip_counts) for p, r in zip(task.programs, task.reports))
        task.execute = _ran_already
        return self._submit(task, max(t.total_ns for t in task.timings), True, not_before_ns)

    def submit(
        self,
        fn: Callable[[], object],
        *,
        device_time_ns: float = 0.0,
        name: str | None = None,
        kind: str | RecordKind = RecordKind.HOST,
        context: str | None = None,
        occupies_core: bool = False,
        not_before_ns: float = 0.0,
        reads: Iterable = (),
        writes: Iterable = (),
    ) -> Submission:
        """Run ``fn()`` in order on this queue (CPU fallback ops, copies, ...) and advance the
        queue's simulated clock by ``device_time_ns``. ``occupies_core`` makes the task also hold
        the NeuronCore on the simulated timeline, as a launch does; host work and DMA copies do
        not. ``kind`` says what the work is (a ``RecordKind``: host, copy, cpu_fallback, collective).
        ``not_before_ns``: the task starts no earlier than this simulated time.

        ``reads`` / ``writes``: the device memory ``fn`` reads and writes (numpy views of it, or
        HbmAllocations), so the task takes part in failure tracking as launches do: it is skipped
        if it would read memory a failed task left unwritten, and what it writes is valid again
        (or, if it fails or is skipped, invalid). Undeclared memory is not tracked."""
        self.device.guard.check()
        if not callable(fn):
            raise TypeError(f"submit expects a callable, got {type(fn).__name__}")
        if not device_time_ns >= 0:
            raise ValueError(f"device_time_ns must be >= 0, got {device_time_ns}")
        kind = record_kind(kind)
        task = Task(WORK, kind, name or getattr(fn, "__name__", kind.value), context)
        task.execute = _call_fn(fn)
        if reads:
            task.reads = task_memory.check_declared(reads, "reads")
        if writes:
            task.writes = task_memory.check_declared(writes, "writes")
        return self._submit(task, float(device_time_ns), occupies_core, not_before(not_before_ns) if not_before_ns else 0.0)

    def mark_unwritten(self, writes: Iterable, error: BaseException, *, name: str, context: str | None = None,
                       kind: str | RecordKind = RecordKind.NEFF) -> None:
        """Work that should have written ``writes`` (numpy views of device memory or
        HbmAllocations) failed before it reached this queue, and its caller raised ``error`` (a
        launch whose compile failed): at this point of the queue those bytes become invalid with
        ``error`` as their cause, as a failed launch leaves what it should have written - later
        tasks that read them are skipped with it, host reads (``Device.check_valid``) raise it.
        The queue itself does not fail: its next synchronization does not raise ``error`` again."""
        self.device.guard.check()
        task = Task(UNWRITTEN, record_kind(kind), name, context)
        task.writes = task_memory.check_declared(writes, "writes")
        task.launch_id = self._new_launch_id()  # the failed work's, as its errors name it
        task.cause = Failure(task, self.device.name, self.name, error)
        self._submit(task, 0.0, False)

    def record_event(self, event: Event | None = None) -> Event:
        """Record ``event`` (a new timing Event if None) at this point of the queue and return it."""
        event = event if event is not None else Event()
        event.record(self)
        return event

    def mark(self) -> Marker:
        """Put a marker at the current end of this queue (what ``Event.record`` keeps): it is done
        once every task submitted before it finished; its ``sim_ns`` is when they end."""
        self.device.guard.check()
        task = Task(MARKER)
        self._submit(task, 0.0, False)
        return task.marker

    def wait_event(self, event: Event) -> None:
        """Later tasks on this queue start only after ``event`` completes, in host time and in
        simulated time. Waiting on an event that was never recorded does nothing (as in CUDA)."""
        self.device.guard.check()
        marker = event.marker
        if marker is None:
            return
        task = Task(WAIT)
        task.marker = marker
        self._submit(task, 0.0, False, not_before_ns=marker.sim_ns)

    def wait_queue(self, other: Queue) -> None:
        """Later tasks on this queue wait for everything submitted to ``other`` so far."""
        if other is not self:
            self.wait_event(other.record_event())

    # --- release ------------------------------------------------------------------------------
    def release(self) -> None:
        """Release this queue (a stream that was collected): nothing more can be submitted to it,
        and once the work already on it has finished it is removed from its device (a kept
        error then surfaces at the device's next synchronize). Events recorded on it still work.
        Its name is free at once (a re-created stream's queue may take it while this one
        finishes). Releasing twice is harmless; the default queue cannot be released."""
        if self is self.device.default_queue:
            raise RuntimeUsageError(f"{self!r} is its device's default queue and cannot be released")
        with self._lock:
            if self._released:
                return
            self._released = True
            idle = not self._outstanding
            if self._worker_sleeping:
                self._worker_sleeping = False
                self._has_work.notify()  # its worker exits now instead of after the idle timeout
        if idle:
            self._retire()

    @property
    def released(self) -> bool:
        return self._released

    @property
    def lane(self):
        """This queue's lane on its device's timeline."""
        return self._lane

    def _retire(self) -> None:
        with self._lock:
            if self._retired:
                return
            self._retired = True
        if self._on_retired is not None:
            self._on_retired(self)

    # --- framework records ---------------------------------------------------------------------
    @property
    def tracing(self) -> bool:
        """Whether anyone (a trace session) receives records: check it before building one."""
        return self.device.trace.enabled

    def publish_op(self, name: str, submission: Submission | None, *, host_start_ns: int, host_end_ns: int | None = None,
                   context: str | None = None, framework: str = "torch", stream_id: int | None = None) -> OpRecord | None:
        """Publish a framework's record of one op that ran on this queue to the active trace
        sessions: ``submission`` is what the op's ``launch``/``submit`` on this queue returned (its
        launch id, task kind and simulated times go into the record), None if the op launched
        nothing. Host times are ``time.perf_counter_ns()`` readings (end: now, if omitted);
        ``stream_id`` is the framework's id of the stream this queue serves. Call it on the thread
        that issued the op (a profiler correlates the record with that thread's state). Returns
        the record, or None - building nothing - when no session listens (``tracing``)."""
        trace = self.device.trace
        if not trace.enabled:
            return None
        device = self.device
        host_end_ns = time.perf_counter_ns() if host_end_ns is None else host_end_ns
        if submission is None:
            record = OpRecord(name, None, device.index, self.name, context, host_start_ns, host_end_ns, device.pid,
                              device.anchor, framework, stream_id)
        else:
            record = OpRecord(name, submission.launch_id, device.index, self.name, context, host_start_ns, host_end_ns,
                              device.pid, device.anchor, framework, stream_id, record_kind(submission.kind),
                              submission.start_ns, submission.end_ns)
        trace.publish(record)
        return record

    # --- synchronization -------------------------------------------------------------------
    def query(self) -> bool:
        """True if every task submitted so far has finished. Never raises a kept error."""
        return self._outstanding == 0

    def synchronize(self) -> None:
        """Wait for every task submitted so far, then raise the kept error, if any."""
        self.wait_idle()
        raise_failures([self.take_failure()])

    def synchronize_until(self, marker: Marker) -> None:
        """Wait until ``marker`` (of this queue) is done, then raise an error kept by a task before it."""
        self.device.guard.check()
        self._check_not_inside_own_task()
        with waiting_for_device():
            self._drain(until_seq=marker.seq, by_caller=True)
            marker.done.wait()
        raise_failures([self.take_failure(before=marker)])

    def wait_idle(self) -> None:
        """Wait for every task submitted so far; a kept error stays kept (``take_failure``)."""
        self.device.guard.check()
        self._check_not_inside_own_task()
        with waiting_for_device():
            self._drain(by_caller=True)
            with self._lock:
                while self._outstanding:
                    self._idle.wait()

    def take_failure(self, before: Marker | None = None) -> Failure | None:
        """The kept failure (of a task before ``before``, if given), cleared: the queue works
        again. For whoever raises the errors of several queues at once (``synchronize_all``)."""
        with self._lock:
            failure = self._failure
            if failure is None or (before is not None and failure.task.seq >= before.seq):
                return None
            self._failure = None
            return failure

    def _check_not_inside_own_task(self) -> None:
        if getattr(_running, "queue", None) is self:
            raise RuntimeUsageError(f"synchronizing {self!r} from a task running on it would wait for itself forever")

    @property
    def sim_time_ns(self) -> float:
        """Simulated time at which everything submitted to this queue so far completes."""
        return self._lane.end_ns

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
                if self._released:
                    raise RuntimeUsageError(f"{self!r} was released: nothing can be submitted to it any more")
                start, end = device.timeline.reserve(self._lane, device_ns, occupies_core, not_before_ns)
                task.seq = self._seq
                self._seq += 1
                task.start_ns, task.end_ns = start, end
                if task.role == WORK:
                    if not task.launch_id:
                        task.launch_id = self._new_launch_id()
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
        return Submission(task.launch_id, task.name, start, end, task.timings, task if task.role == WORK else None)

    def _work(self) -> None:
        while True:
            with self._lock:
                while not self._pending or self._callers_draining:
                    self._worker_sleeping = True
                    if (not self._has_work.wait(IDLE_EXIT_SECONDS) or self._released) and not self._pending:
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
                idle = not self._outstanding
                if idle:
                    self._idle.notify_all()
            if idle and self._released:
                self._retire()

    def _execute(self, task: Task, raise_now: bool) -> None:
        if task.role == MARKER:
            task.marker.done.set()
            return
        if task.role == WAIT:
            task.marker.done.wait()
            return
        if task.role == UNWRITTEN:
            task_memory.mark_not_written(task, task.cause)
            task.writes = ()  # the cause keeps the task: not the caller's memory
            return
        failure = self._failure
        if failure is not None:  # poisoned: do not run on the failed task's results
            failure.skipped += 1
            task_memory.mark_not_written(task, failure.root)  # what it should have written is garbage
            task.buffers = task.execute = None
            return
        host_start = time.perf_counter_ns()
        failure = self._run_work(task)
        host_end = time.perf_counter_ns()
        task.buffers = task.execute = None  # release the caller's arrays (and callable) as soon as the task is done
        self._publish(task, host_start, host_end, failure)
        if failure is None:
            return
        if raise_now:
            raise failure.to_exception() from failure.error
        with self._lock:
            self._failure = failure

    def _publish(self, task: Task, host_start: int, host_end: int, failure: Failure | None) -> None:
        """The LaunchRecord of ``task``, which ran (or failed) between those host times."""
        device = self.device
        if device.trace.enabled:
            device.trace.publish(
                LaunchRecord(
                    launch_id=task.launch_id, device=device.index, queue=self.name, name=task.name, kind=task.kind,
                    start_ns=task.start_ns, end_ns=task.end_ns, host_start_ns=host_start, host_end_ns=host_end,
                    context=task.context, timings=task.timings, programs=task.programs, metadata=task.metadata,
                    executor=task.executor, core_id=device.core_id, call_site=task.call_site,
                    error=None if failure is None else failure.summary(),
                    pid=device.pid, anchor=device.anchor,
                )
            )

    def _run_work(self, task: Task) -> Failure | None:
        """Run a work task unless it reads memory a failure left invalid; keep its memory's
        validity up to date. Returns its failure, if any."""
        device = self.device
        if INVALID.count:
            bad = task_memory.first_invalid_read(task)
            if bad is not None:
                cause, hbm, lo, hi = bad
                failure = Failure(task, device.name, self.name, cause.root.error, cause=cause.root,
                                  where=f"bytes [{lo:#x}, {hi:#x}) of {hbm.name}")
                task_memory.mark_not_written(task, failure.root)
                return failure
        try:
            task.execute(task)
        except BaseException as err:  # the worker must survive anything a task raises
            reported = _reported(task, err)
            failure = Failure(task, device.name, self.name, reported, found=None if reported is err else err)
            task_memory.mark_not_written(task, failure)
            return failure
        if INVALID.count:
            task_memory.mark_written(task)
        return None


def _reported(task: Task, err: BaseException) -> BaseException:
    """The error ``task``'s failure keeps: ``err`` as the launch's ``errors`` maps it."""
    if task.errors is None or not isinstance(err, Exception):
        return err
    try:
        mapped = task.errors(err)
    except Exception as bad:  # a broken mapping must not hide what the program raised
        err.add_note(f"(the launch's errors= mapping failed on it: {type(bad).__name__}: {bad})")
        return err
    if mapped is None or mapped is err:
        return err
    if mapped.__cause__ is None:
        mapped.__cause__ = err
    return mapped


def synchronize_all(queues: Sequence[Queue], kept: Callable[[], list[Failure]] | None = None) -> None:
    """Wait for every queue, then raise the earliest failure kept by them (or returned by
    ``kept()``, asked after the wait: released queues' errors), naming the others; all are cleared."""
    for queue in queues:
        queue.wait_idle()
    raise_failures([queue.take_failure() for queue in queues] + (kept() if kept is not None else []))


def _programs(sequence, device) -> tuple:
    """A launch's programs, one per physical core, checked against the device."""
    if not sequence:
        raise ValidationError("launch.programs", "a launch needs at least one program, got an empty sequence")
    programs = tuple(as_program(p) for p in sequence)
    cores = device.physical_cores_per_launch
    if len(programs) > cores:
        raise ValidationError(
            "launch.lnc",
            f"{len(programs)} programs ({[p.name for p in programs]}) need {len(programs)} physical cores, but "
            f"{device.name} is a logical core of {cores} (NEURON_LOGICAL_NC_CONFIG={device.lnc})")
    for program in programs:
        _check_target(program, device)
    return programs


def _check_target(program, device) -> None:
    if program.target != device.arch.name:
        raise ValidationError(
            "launch.target", f"program {program.name!r} was built for {program.target!r}, but {device.name} is {device.arch.name!r}"
        )


def _bind_shared(programs: tuple, buffers: Mapping, device) -> dict:
    """One launch's buffers for several programs sharing HBM: each program binds the tensors it
    declares; a buffer no program declares is refused, as for one program."""
    if not isinstance(buffers, Mapping):
        raise TypeError(f"launch buffers must be a mapping of tensor name -> array, got {type(buffers).__name__}")
    declared = [frozenset(t.name for t in p.tensors) for p in programs]
    unknown = sorted(set(buffers) - frozenset().union(*declared))
    if unknown:
        raise ValidationError("launch.unknown_buffer", f"no program of the launch ({[p.name for p in programs]}) has tensor(s) {unknown}")
    bound: dict = {}
    for program, names in zip(programs, declared):
        own = with_constants(program, {name: buf for name, buf in buffers.items() if name in names})
        bound.update(bind_buffers(program, own, device.hbm, device.name))
    return bound


def not_before(value: float, what: str = "not_before_ns") -> float:
    """``value`` checked as a simulated time (ns) to start no earlier than."""
    if not (isinstance(value, (int, float)) and not isinstance(value, bool)) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite simulated time >= 0 (ns), got {value!r}")
    return float(value)


def _ran_already(task: Task) -> None:
    """The execute of a launch that ran before it was placed on the timeline (run-time loops)."""


def _call_fn(fn):
    def execute(task: Task) -> None:
        fn()

    return execute
