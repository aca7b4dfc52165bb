"""The fp32 matrix product of ``dot_general``, with bits fixed by its shapes alone.

The PE array multiplies in fp32 and accumulates in fp32 PSUM; on the host the product is a BLAS
sgemm, whose last bits depend on how BLAS blocks the work: OpenBLAS adds in another order with
more threads (a [1024, 256] @ [256, 768] product differs between one thread and two) and for
other shapes (the two row halves of that product differ from the whole). So the definition
fixes both, from the shapes alone:

* BLAS runs on one thread (the limit applies per call and is restored after it, leaving the
  caller's own numpy code as it was): the bits do not depend on the host's cores;
* a product of at least ``SPLIT_MIN_MACS`` multiply-adds is two products over halves of its
  batch, else of its output rows, else of its columns (``halves``), computed one after the other
  here. The fast executor computes the same two halves at once while a core is free
  (``neuron_sim.executor.fast``): the same bits, sooner.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

import numpy as np

# Products smaller than this many multiply-adds are one BLAS call: handing a half to another
# thread costs tens of microseconds, about what 4M multiply-adds take on one core.
SPLIT_MIN_MACS = 1 << 22
_ROWS_QUANTUM = 16  # halves of the rows/columns start at a multiple of this (whole kernel tiles)


def _make_controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # without it, BLAS keeps its own thread count
        return None
    controller = ThreadpoolController()
    return controller if controller.select(user_api="blas").lib_controllers else None


# Made at import, not at the first matmul: finding the BLAS libraries walks the loaded libraries
# (dl_iterate_phdr) holding the dynamic loader's lock while calling back into Python for the GIL;
# done on a worker thread while another thread held the GIL inside dlopen (its first import of an
# extension module), the two waited for each other forever.
_CONTROLLER = _make_controller()


def blas_controllable() -> bool:
    """Whether the BLAS library's thread count can be limited (threadpoolctl found it)."""
    return _CONTROLLER is not None


def one_blas_thread():
    """Context manager: BLAS calls inside run on one thread."""
    if _CONTROLLER is None:
        return contextlib.nullcontext()
    return _CONTROLLER.limit(limits=1, user_api="blas")


def blas_thread_counts() -> list[int]:
    """The thread count of each BLAS library loaded (empty without threadpoolctl)."""
    if _CONTROLLER is None:
        return []
    return [lib["num_threads"] for lib in _CONTROLLER.select(user_api="blas").info()]


def halves(nb: int, m: int, k: int, n: int):
    """Index tuples (for L, R, out) of the two halves of a [nb,m,k] @ [nb,k,n] product, or None
    when it is one product."""
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


def _in_turn(first: Callable[[], None], second: Callable[[], None]) -> None:
    first()
    second()


def matmul_into(L: np.ndarray, R: np.ndarray, out: np.ndarray, run_halves: Callable = _in_turn) -> None:
    """``out[...] = L @ R`` for fp32 ``L [nb,m,k]``, ``R [nb,k,n]``, ``out [nb,m,n]``.
    ``run_halves(first, second)`` runs the two halves of a split product (in turn by default)."""
    nb, m, k = L.shape
    n = R.shape[2]
    parts = halves(nb, m, k, n)
    with one_blas_thread():
        if parts is None:
            np.matmul(L, R, out=out)
            return
        (l1, r1, o1), (l2, r2, o2) = parts
        run_halves(lambda: np.matmul(L[l1], R[r1], out=out[o1]), lambda: np.matmul(L[l2], R[r2], out=out[o2]))


def matmul(L: np.ndarray, R: np.ndarray) -> np.ndarray:
    """``L @ R`` as a new fp32 ``[nb, m, n]`` array (see ``matmul_into``)."""
    out = np.empty((L.shape[0], L.shape[1], R.shape[2]), dtype=np.float32)
    matmul_into(L, R, out)
    return out
