"""A failed task, kept on its queue until the next synchronization point raises it.

Like the hardware, the runtime reports an asynchronous failure late, so the raised error must
carry everything needed to find the op that caused it: the task's name, device, queue, the
caller's ``context`` (e.g. the torch op and its shapes), and how many later tasks on the queue
were skipped because they would have run on the failed task's garbage.

A task skipped because it reads memory that an earlier failure left invalid fails too, with the
*original* error (``cause``: the failure that left the memory invalid), so every later use of
the unwritten data raises what went wrong in the first place.

A launch's ``errors=`` mapping may report the failure in its caller's words (a framework op's
own error); the text then also names what the device found (``found``: the simulator's error,
with its rule and instruction), which is what a kernel's author needs.
"""

from __future__ import annotations

import time

from ..errors import ExecutionError, InvalidMemoryError
from .task import Task, describe


class Failure:
    __slots__ = ("task", "device", "queue", "error", "found", "skipped", "host_ns", "cause", "where")

    def __init__(self, task: Task, device: str, queue: str, error: BaseException,
                 cause: Failure | None = None, where: str | None = None, found: BaseException | None = None):
        self.task = task
        self.device = device
        self.queue = queue
        self.error = error if cause is None else cause.error
        # The simulator's error when the launch's errors= mapping reported another one.
        self.found = found if cause is None else cause.found
        self.skipped = 0
        self.host_ns = time.perf_counter_ns()
        self.cause = cause  # the failure whose unwritten memory this task read (None: it failed itself)
        self.where = where  # which memory that was

    @property
    def root(self) -> Failure:
        """The failure that started it: this one, or the one whose unwritten memory it read."""
        return self if self.cause is None else self.cause

    def error_text(self) -> str:
        """The error that started it, as the caller reports it, and what the device found."""
        root = self.root
        text = f"{type(root.error).__name__}: {root.error}"
        if root.found is not None:
            text += f" (the device found {type(root.found).__name__}: {root.found})"
        return text

    def headline(self) -> str:
        root = self.root
        if self.cause is None:
            return f"{describe(self.task)} failed on {self.device} queue {self.queue!r}: {self.error_text()}"
        return (f"{describe(self.task)} on {self.device} queue {self.queue!r} was skipped: it reads {self.where}, which "
                f"{describe(root.task)} on {root.device} queue {root.queue!r} should have written; that failed: "
                f"{self.error_text()}")

    def summary(self) -> str:
        """One line for a trace record: the error, or why the task was skipped."""
        error = self.error_text()
        root = self.root
        if self.cause is None:
            return error
        return f"skipped: it reads {self.where}, which {describe(root.task)} should have written; that failed: {error}"

    def to_exception(self, others: list[Failure] = ()) -> ExecutionError:
        task = self.task
        lines = [self.headline()]
        if task.context:
            lines.append(f"  context: {task.context}")
        if self.cause is not None and self.cause.task.context:
            lines.append(f"  context of the failed {describe(self.cause.task)}: {self.cause.task.context}")
        lines.append(f"  simulated time: {task.start_ns:.0f}-{task.end_ns:.0f} ns")
        if self.skipped:
            lines.append(f"  {self.skipped} later task(s) on this queue were skipped and did not run")
        for other in others:
            also = (f"also failed: {describe(other.task)} on {other.device} queue {other.queue!r}: "
                    f"{other.error_text()}") if other.cause is None else f"also: {other.headline()}"
            lines.append(
                f"  {also}"
                + (f" (context: {other.task.context})" if other.task.context else "")
                + (f"; {other.skipped} later task(s) skipped" if other.skipped else "")
            )
        return self._fill(ExecutionError("\n".join(lines)), others)

    def invalid_memory_error(self, where: str) -> InvalidMemoryError:
        """The error for a host read of memory this failure left unwritten."""
        root = self.root
        message = (f"{where} holds no valid data: {describe(root.task)} on {root.device} queue {root.queue!r} should have "
                   f"written it, and failed: {self.error_text()}")
        if root.task.context:
            message += f"\n  context: {root.task.context}"
        return root._fill(InvalidMemoryError(message))

    def _fill(self, err: ExecutionError, others: list[Failure] = ()) -> ExecutionError:
        # Structured fields, so a framework can map the failure back to its op without parsing text.
        task = self.task
        root = self.root
        err.launch_name = task.name
        err.launch_id = task.launch_id
        err.kind = task.kind
        err.device = self.device
        err.queue = self.queue
        err.context = task.context
        err.skipped = self.skipped
        err.original = root.error  # the error that started it, also for a skipped task's failure
        err.origin_launch_id = root.task.launch_id
        err.origin_name = root.task.name
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
