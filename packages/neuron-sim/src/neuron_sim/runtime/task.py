"""What a queue holds: work (a launch or a host callable), event markers, event waits, and marks of
memory that failed work did not write.

Simulated times are assigned when a task is submitted, not when it runs: timing is
data-independent, so the device timeline is known up front and does not depend on how the host
threads happen to interleave. That keeps elapsed times deterministic and makes launches from
different queues of one core serialize in submission order.
"""

from __future__ import annotations

import threading

WORK = "work"
MARKER = "marker"
WAIT = "wait"
UNWRITTEN = "unwritten"  # marks memory that failed work did not write (Queue.mark_unwritten)


class Marker:
    """One recording of an event: where (queue, position) and when (simulated) it sits."""

    __slots__ = ("queue", "seq", "sim_ns", "done")

    def __init__(self, queue, seq: int, sim_ns: float):
        self.queue = queue
        self.seq = seq
        self.sim_ns = sim_ns
        self.done = threading.Event()


class Task:
    __slots__ = (
        "role", "seq", "launch_id", "kind", "name", "context", "start_ns", "end_ns", "execute",
        "marker", "programs", "buffers", "timings", "metadata", "spec", "options", "executor", "reports",
        "reads", "writes", "errors", "cause", "call_site",
    )

    def __init__(self, role: str, kind: str = "", name: str = "", context: str | None = None):
        self.role = role
        self.kind = kind
        self.name = name
        self.context = context
        self.call_site: str | None = None  # the framework user's line that issued it ("file:line")
        self.seq = -1
        self.launch_id = 0
        self.start_ns = self.end_ns = 0.0
        self.execute = None  # callable(task) for WORK
        self.marker: Marker | None = None
        self.programs: tuple = ()  # a launch's program, or one per physical core (LNC=2)
        self.buffers: dict | None = None
        self.timings: tuple = ()  # TimingResult per program
        self.metadata: dict = {}
        self.spec = None  # the ExecutorSpec that runs a launch
        self.options = None  # options for its executor
        self.executor = ""  # the mode that ran it
        self.reports: tuple = ()  # RunReport per program, once it ran
        self.reads: tuple = ()  # device memory a host task declared it reads (launches: their tensor table)
        self.writes: tuple = ()
        self.errors = None  # a launch's mapping of the error it raises to the one its caller reports
        self.cause = None  # UNWRITTEN: the Failure its memory is invalid by


class Submission:
    """What launch()/submit() return: the task's id, its place on the simulated timeline, and for
    a launch the timing of each program (one; one per physical core for an LNC=2 launch)."""

    __slots__ = ("launch_id", "name", "start_ns", "end_ns", "timings", "_task")

    def __init__(self, launch_id: int, name: str, start_ns: float, end_ns: float, timings: tuple = (), task=None):
        self.launch_id = launch_id
        self.name = name
        self.start_ns = start_ns
        self.end_ns = end_ns
        self.timings = timings
        self._task = task

    def __repr__(self) -> str:
        return f"<Submission #{self.launch_id} {self.name!r} {self.start_ns:.0f}-{self.end_ns:.0f} ns>"

    @property
    def device_time_ns(self) -> float:
        return self.end_ns - self.start_ns

    @property
    def kind(self) -> str:
        """What the task is (a ``RecordKind``: "neff" for launches, submit()'s kind otherwise)."""
        return self._task.kind if self._task is not None else ""

    @property
    def timing(self):
        """The TimingResult of a one-program launch (None for host tasks and LNC=2 launches)."""
        return self.timings[0] if len(self.timings) == 1 else None

    @property
    def executor(self) -> str:
        """The executor mode that ran the launch ("" for host tasks, and until it ran)."""
        return self._task.executor if self._task is not None else ""

    @property
    def reports(self) -> tuple:
        """Each program's RunReport (trip counts, kept warnings) once the launch ran; () for
        host tasks, and before it ran or when it did not (failed, skipped). Read it after
        synchronizing."""
        return self._task.reports if self._task is not None else ()


def describe(task: Task) -> str:
    what = "launch" if task.kind == "neff" else f"{task.kind} task"
    return f"{what} {task.name!r} (#{task.launch_id})"


__all__ = ["WORK", "MARKER", "WAIT", "UNWRITTEN", "Marker", "Task", "Submission", "describe"]
