"""A second host thread for the fast executor, used only while a core would otherwise idle.

The executor normally runs beside the thread that issues ops, one core each, so it computes on
one thread. When that thread blocks until the device catches up (``synchronize()``, ``.item()``,
an event: ``executor.waiting``), its core is free: then the executor computes large matmuls,
composite activations (erf, GELU) and long runs of elementwise ops over large tensors
(``split.py``) as two halves at once. The halves are the same whether they run at once or one
after the other, so results never depend on timing; only the split itself (chosen from shapes
alone) decides the arithmetic. Small work is not split: each half's numpy calls wait for the GIL
while the other half holds it, which cost more than the second core saved.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..waiting import waiting_threads


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


# Whether halves may run at once at all: this process may use two cores. A module setting, so a
# test can pretend either way.
CAN_OVERLAP = _cores() >= 2

_splitting = 0  # run_halves calls under way: their halves do not split again
_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def available() -> bool:
    """Whether a core is free for a second half of executor work right now."""
    return CAN_OVERLAP and waiting_threads() > 0 and not _splitting


def splitting() -> bool:
    """Whether two halves are under way: work inside one runs whole, without a split of its own."""
    return _splitting > 0


def run_halves(first, second) -> None:
    """Run ``first()`` and ``second()`` (independent: each writes its own outputs), at once when a
    core is free, else one after the other. Raises what either raised."""
    if not available():
        first()
        second()
        return
    global _splitting
    errors = np.geterr()  # numpy's error state is per thread: the other half keeps the caller's

    def second_half():
        with np.errstate(**errors):
            second()

    with _lock:
        _splitting += 1
    try:
        other = _executor().submit(second_half)
        try:
            first()
        finally:
            other.result()
    finally:
        with _lock:
            _splitting -= 1


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="neuron-sim spare core")
    return _pool


def _after_fork_in_child() -> None:
    # The parent's pool thread does not exist in a child; its executor would wait for it forever.
    global _pool, _splitting, _lock
    _pool, _splitting, _lock = None, 0, threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
