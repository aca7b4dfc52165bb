"""Host-speed forms of graph ops: the same bits as ``graph/ops.py``, computed sooner.

* Composite activations (dozens of numpy passes: erf, GELU, sigmoid...) over a large array run
  - while a core is free (``spare_core``), as two halves at once, one call over each: 1.6x (erf)
    to 2x (sigmoid) sooner. Passes over small chunks of each half were slower than no split at
    all: the two threads mostly waited for each other's GIL between their short calls;
  - inside a half of a split elementwise run (``split.py``), in one call over that half;
  - otherwise in passes of ``CHUNK`` elements, so their whole-array temporaries stay in cache and
    reuse freed memory instead of faulting in fresh pages for each (GELU: 2x sooner), except for
    those that compute in place (erf), which one call computes sooner.
  Every op is elementwise, so the results are the same bits either way.
* ``dot_general``'s two halves of a large product (``graph/matmul.py``) run at once while a core
  is free.

``evaluator(op)`` is what plans and split runs call for an op: its fast form if it has one, else
its definition.
"""

from __future__ import annotations

import numpy as np

from ... import dtypes
from ...graph import ops as graph_ops
from ...graph.matmul import matmul_into as _matmul_into
from ...isa import ops as alu
from . import spare_core

CHUNK = 32768

# ScalarE activations worth chunking or halving, and whether in chunks (False: in place, erf).
_COMPOSITE = {
    "sigmoid": True, "gelu": True, "gelu_apprx_tanh": True, "gelu_apprx_sigmoid": True, "gelu_dx": True,
    "gelu_apprx_sigmoid_dx": True, "silu_dx": True, "erf_dx": True, "silu": True, "softplus": True, "mish": True,
    "erf": False,
}


def in_chunks(fn, chunked: bool = True):
    """``fn`` (an elementwise fp32 function of one array) evaluated as described above."""

    def evaluate(x):
        if not isinstance(x, np.ndarray) or x.dtype != np.float32 or x.size <= 2 * CHUNK or spare_core.splitting():
            return fn(x)
        flat = x.reshape(-1)
        if spare_core.available():
            out = np.empty(flat.shape, dtype=np.float32)
            middle = flat.size // 2

            def half(part):
                out[part] = fn(flat[part])

            spare_core.run_halves(lambda: half(slice(None, middle)), lambda: half(slice(middle, None)))
            return out.reshape(x.shape)
        if not chunked:
            return fn(x)
        out = np.empty(flat.shape, dtype=np.float32)
        for start in range(0, flat.size, CHUNK):
            out[start:start + CHUNK] = fn(flat[start:start + CHUNK])
        return out.reshape(x.shape)

    evaluate.__name__ = fn.__name__
    evaluate.__doc__ = fn.__doc__
    evaluate.__wrapped__ = fn
    return evaluate


ACTIVATIONS = {name: in_chunks(alu.ACTIVATIONS[name], chunked) for name, chunked in _COMPOSITE.items()}


def matmul_into(L: np.ndarray, R: np.ndarray, out: np.ndarray) -> None:
    """``graph.matmul.matmul_into``, its halves at once while a core is free."""
    _matmul_into(L, R, out, spare_core.run_halves)


def dot_into(arrays, attrs, out: np.ndarray) -> None:
    """A dot_general's fp32 product computed into ``out`` (of the result's shape)."""
    L, R = graph_ops.dot_operands(arrays, attrs)
    matmul_into(L, R, out.reshape(L.shape[0], L.shape[1], R.shape[2]))


def _dot_eval(arrays, attrs, out_types):
    exact = graph_ops.integer_dot(arrays, attrs, out_types[0])
    if exact is not None:
        return [exact]
    L, R = graph_ops.dot_operands(arrays, attrs)
    out = np.empty((L.shape[0], L.shape[1], R.shape[2]), dtype=np.float32)
    matmul_into(L, R, out)
    return [dtypes.convert(out.reshape(out_types[0].shape), out_types[0].dtype)]


def _fast_forms() -> dict:
    forms = {"dot_general": _dot_eval}
    by_function = {id(fn): name for name, fn in alu.ACTIVATIONS.items() if name in ACTIVATIONS}
    for op, fn in graph_ops.UNARY.items():
        activation = by_function.get(id(fn))  # graph ops that are ScalarE activations
        if activation is not None:
            forms[op] = graph_ops.unary_evaluator(op, ACTIVATIONS[activation])
    return forms


FAST = _fast_forms()


def evaluator(op: str):
    """The evaluate function (``OpSpec.evaluate``'s signature) the fast executor uses for ``op``."""
    form = FAST.get(op)
    return form if form is not None else graph_ops.OPS[op].evaluate
