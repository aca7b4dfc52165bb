"""One BLAS thread for the fast executor's matmuls.

The executor runs on a queue's worker thread while the thread that issues ops keeps working, so
a multi-threaded BLAS call competes with it for the cores: on 2 cores, numpy's OpenBLAS spent
5.5 ms on a [32,128,64] @ [32,64,128] batch that takes 1.1 ms on one thread. OpenBLAS splits a
product by output blocks, so the result does not depend on the thread count (checked on the
shapes of a transformer step); the limit is applied per call and restored after it, leaving
the caller's own numpy code as it was.
"""

from __future__ import annotations

import contextlib
import functools


@functools.cache
def _controller():
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:  # an optional speed-up: without it, BLAS keeps its own thread count
        return None
    controller = ThreadpoolController()
    return controller if controller.select(user_api="blas").lib_controllers else None


def one_blas_thread():
    """Context manager: BLAS calls inside run on one thread."""
    controller = _controller()
    return controller.limit(limits=1, user_api="blas") if controller is not None else contextlib.nullcontext()
