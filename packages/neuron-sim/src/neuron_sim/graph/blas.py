"""The fast executor's matmuls: one BLAS thread, large products computed as two halves.

The executor runs on a queue's worker thread while the thread that issues ops keeps working, so
a multi-threaded BLAS call competes with it for the cores: on 2 cores, numpy's OpenBLAS spent
5.5 ms on a [32,128,64] @ [32,64,128] batch that takes 1.1 ms on one thread, and far longer when
another process is busy too (its threads spin while they wait for each other). So BLAS gets one
thread, and the executor parallelizes by itself: a large product is two products over halves of
its batch or of its output rows (or columns), run at once while a core is free
(``spare_core``), else one after the other - the same arithmetic either way. The thread limit is
applied per call and restored after it, leaving the caller's own numpy code as it was.
"""

from __future__ import annotations

import contextlib

import numpy as np

from .. import spare_core

# Products smaller than this many multiply-adds are not split: a hand-off to the other thread
# costs tens of microseconds, about what 4M multiply-adds take on one core.
SPLIT_MIN_MACS = 1 << 22
_ROWS_QUANTUM = 16  # halves of the rows/columns start at a multiple of this (whole kernel tiles)


def _make_controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # an optional speed-up: without it, BLAS keeps its own thread count
        return None
    controller = ThreadpoolController()
    return controller if controller.select(user_api="blas").lib_controllers else None


# Made at import, not at the first matmul: finding the BLAS libraries walks the loaded libraries
# (dl_iterate_phdr) holding the dynamic loader's lock while calling back into Python for the GIL;
# done on a worker thread while another thread held the GIL inside dlopen (its first import of an
# extension module), the two waited for each other forever.
_CONTROLLER = _make_controller()


def one_blas_thread():
    """Context manager: BLAS calls inside run on one thread."""
    if _CONTROLLER is None:
        return contextlib.nullcontext()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def _halves(nb: int, m: int, k: int, n: int):
    """Index tuples (for L, R, out) of the two halves of a [nb,m,k] @ [nb,k,n] product, or None."""
    if nb * m * n * k < SPLIT_MIN_MACS:
        return None
    whole = slice(None)
    if nb >= 2:
        cut = slice(None, nb // 2), slice(nb // 2, None)
        return [((half,), (half,), (half,)) for half in cut]
    if m >= 2 * _ROWS_QUANTUM:
        at = m // 2 // _ROWS_QUANTUM * _ROWS_QUANTUM
        return [((whole, half), (whole,), (whole, half)) for half in (slice(None, at), slice(at, None))]
    if n >= 2 * _ROWS_QUANTUM:
        at = n // 2 // _ROWS_QUANTUM * _ROWS_QUANTUM
        return [((whole,), (whole, whole, half), (whole, whole, half)) for half in (slice(None, at), slice(at, None))]
    return None


def matmul_into(L: np.ndarray, R: np.ndarray, out: np.ndarray) -> None:
    """``out[...] = L @ R`` for fp32 ``L [nb,m,k]``, ``R [nb,k,n]``, ``out [nb,m,n]``."""
    nb, m, k = L.shape
    n = R.shape[2]
    halves = _halves(nb, m, k, n)
    with one_blas_thread():
        if halves is None:
            np.matmul(L, R, out=out)
            return
        (l1, r1, o1), (l2, r2, o2) = halves
        spare_core.run_halves(lambda: np.matmul(L[l1], R[r1], out=out[o1]),
                              lambda: np.matmul(L[l2], R[r2], out=out[o2]))
