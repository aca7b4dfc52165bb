"""A failed task, kept on its queue until the next synchronization point raises it.

Like the hardware, the runtime reports an asynchronous failure late, so the raised error must
carry everything needed to find the op that caused it: the task's name, device, queue, the
caller's ``context`` (e.g. the torch op and its shapes), and how many later tasks on the queue
were skipped because they would have run on the failed task's garbage.
"""

from __future__ import annotations

import time

from ..errors import ExecutionError
from .task import Task, describe


class Failure:
    __slots__ = ("task", "device", "queue", "error", "skipped", "host_ns")

    def __init__(self, task: Task, device: str, queue: str, error: BaseException):
        self.task = task
        self.device = device
        self.queue = queue
        self.error = error
        self.skipped = 0
        self.host_ns = time.perf_counter_ns()

    def to_exception(self, others: list[Failure] = ()) -> ExecutionError:
        task = self.task
        lines = [f"{describe(task)} failed on {self.device} queue {self.queue!r}: {type(self.error).__name__}: {self.error}"]
        if task.context:
            lines.append(f"  context: {task.context}")
        lines.append(f"  simulated time: {task.start_ns:.0f}-{task.end_ns:.0f} ns")
        if self.skipped:
            lines.append(f"  {self.skipped} later task(s) on this queue were skipped and did not run")
        for other in others:
            lines.append(
                f"  also failed: {describe(other.task)} on {other.device} queue {other.queue!r}: "
                f"{type(other.error).__name__}: {other.error}"
                + (f" (context: {other.task.context})" if other.task.context else "")
                + (f"; {other.skipped} later task(s) skipped" if other.skipped else "")
            )
        err = ExecutionError("\n".join(lines))
        # Structured fields, so a framework can map the failure back to its op without parsing text.
        err.launch_name = task.name
        err.launch_id = task.launch_id
        err.kind = task.kind
        err.device = self.device
        err.queue = self.queue
        err.context = task.context
        err.skipped = self.skipped
        err.original = self.error
        err.other_failures = len(others)
        return err


def raise_failures(failures: list[Failure]) -> None:
    """Raise the earliest failure, naming the others (all are cleared: none is silently kept)."""
    failures = [f for f in failures if f is not None]
    if not failures:
        return
    failures.sort(key=lambda f: f.host_ns)
    first = failures[0]
    raise first.to_exception(failures[1:]) from first.error
