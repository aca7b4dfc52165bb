"""Threads blocked until the device catches up (``synchronize()``, an event, ``.item()``).

The runtime marks them (``waiting_for_device``); an executor that computes on the host may use
the cores they leave free (the fast executor's ``spare_core``). Kept apart from both so the
runtime tells a fact and the executors read it, neither reaching into the other.
"""

from __future__ import annotations

import contextlib
import os
import threading

_waiting = 0
_lock = threading.Lock()


@contextlib.contextmanager
def waiting_for_device():
    """Context for a thread that blocks until the device catches up: its core is free meanwhile."""
    global _waiting
    with _lock:
        _waiting += 1
    try:
        yield
    finally:
        with _lock:
            _waiting -= 1


def waiting_threads() -> int:
    """How many threads are inside ``waiting_for_device`` right now."""
    return _waiting


def _after_fork_in_child() -> None:
    global _waiting, _lock
    _waiting, _lock = 0, threading.Lock()  # the parent's waiting threads do not exist here


os.register_at_fork(after_in_child=_after_fork_in_child)
