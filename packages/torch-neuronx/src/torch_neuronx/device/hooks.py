"""Hooks the layers above register into the device layer.

The device layer never imports what runs ops, yet some of that code keeps device work or memory
back and must hear about two moments: a stream's queue is about to be used for work or waited
for (adaptive eager's deferred ops of that stream must be launched first), and the device is
synchronized or its memory cache emptied (kept device tensors, such as the eager path's uploaded
scalars, are dropped). A layer registers its functions once, at import.
"""

from __future__ import annotations

from collections.abc import Callable

# fn(device index, stream id): before a stream's queue is handed out for work or waited for.
before_queue_use: list[Callable[[int, int], None]] = []
# fn(): before every queue of the process is waited for (synchronize, exit): launch deferred work.
before_synchronize: list[Callable[[], None]] = []
# fn(): after a synchronization and at empty_cache(): drop device tensors kept for reuse.
release_kept_memory: list[Callable[[], None]] = []


def on_queue_use(fn: Callable[[int, int], None]) -> None:
    before_queue_use.append(fn)


def on_synchronize(fn: Callable[[], None]) -> None:
    before_synchronize.append(fn)


def on_release_memory(fn: Callable[[], None]) -> None:
    release_kept_memory.append(fn)


def run_before_synchronize() -> None:
    for fn in before_synchronize:
        fn()


def run_release_memory() -> None:
    for fn in release_kept_memory:
        fn()
