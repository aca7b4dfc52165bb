"""Fork detection. Queue workers are threads, which fork() does not copy, and a lock held by one
of them at fork time stays held in the child forever; so a runtime created before a fork refuses
to work in the child, with a message pointing at the 'spawn' start method (as CUDA does).

``os.register_at_fork`` bumps a generation counter in every child, so the check on hot paths is
one integer comparison; the pid comparison catches forks made outside Python's ``os.fork``.
"""

from __future__ import annotations

import os

from .errors import FORK_MESSAGE, ForkedProcessError

_generation = 0


def _after_fork_in_child() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


class ProcessGuard:
    """Remembers the process it was created in."""

    __slots__ = ("pid", "generation")

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.generation = _generation

    def check(self) -> None:
        if self.generation != _generation:
            raise ForkedProcessError(FORK_MESSAGE.format(parent=self.pid, child=os.getpid()))

    def check_thoroughly(self) -> None:
        """Also compare pids (a system call): for entry points, not per launch."""
        self.check()
        if os.getpid() != self.pid:
            raise ForkedProcessError(FORK_MESSAGE.format(parent=self.pid, child=os.getpid()))

    @property
    def in_child(self) -> bool:
        return self.generation != _generation or os.getpid() != self.pid
