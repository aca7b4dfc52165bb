"""What a queue holds: work (a launch or a host callable), event markers, and event waits.

Simulated times are assigned when a task is submitted, not when it runs: timing is
data-independent, so the device timeline is known up front and does not depend on how the host
threads happen to interleave. That keeps elapsed times deterministic and makes launches from
different queues of one core serialize in submission order.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

WORK = "work"
MARKER = "marker"
WAIT = "wait"


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
        "marker", "program", "buffers", "timing", "metadata", "mode", "executor",
    )

    def __init__(self, role: str, kind: str = "", name: str = "", context: str | None = None):
        self.role = role
        self.kind = kind
        self.name = name
        self.context = context
        self.seq = -1
        self.launch_id = 0
        self.start_ns = self.end_ns = 0.0
        self.execute = None  # callable(task) for WORK
        self.marker: Marker | None = None
        self.program = None
        self.buffers: dict | None = None
        self.timing = None
        self.metadata: dict = {}
        self.mode = ""  # the executor mode asked for
        self.executor = ""  # the mode that ran it


@dataclass(frozen=True)
class Submission:
    """What launch()/submit() return: the task's id and its place on the simulated timeline."""

    launch_id: int
    name: str
    start_ns: float
    end_ns: float

    @property
    def device_time_ns(self) -> float:
        return self.end_ns - self.start_ns


def describe(task: Task) -> str:
    what = "launch" if task.kind == "neff" else f"{task.kind} task"
    return f"{what} {task.name!r} (#{task.launch_id})"


__all__ = ["WORK", "MARKER", "WAIT", "Marker", "Task", "Submission", "describe"]
