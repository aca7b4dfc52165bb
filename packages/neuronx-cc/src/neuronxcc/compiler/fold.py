"""Constant folding: elementwise and view ops whose operands are all constants are evaluated at
compile time with the graph's own op definitions (so the values are exactly the fast executor's)
and become constants themselves - immediates when uniform, generated or stored otherwise.

Only uniform values (computed on one element) and small results are folded, so folding never
materializes large arrays at compile time.
"""

from __future__ import annotations

import numpy as np
from neuron_sim.graph.ops import ELEMENTWISE_OPS, OPS, VIEW_OPS

from .constants import constant_value

MAX_FOLDED_ELEMENTS = 4096


def fold_constants(nodes) -> dict[int, np.ndarray]:
    """Value id -> its compile-time value, for every value computable from constants alone."""
    known: dict[int, np.ndarray] = {}
    for node in nodes:
        out = node.outputs[0]
        if node.op == "constant":
            known[out.id] = constant_value(node)
            continue
        if node.op not in ELEMENTWISE_OPS and node.op not in VIEW_OPS:
            continue
        if not node.inputs or any(v.id not in known for v in node.inputs):
            continue
        arrays = [known[v.id] for v in node.inputs]
        uniform = all(_uniform(a) for a in arrays)
        if not uniform and out.type.num_elements > MAX_FOLDED_ELEMENTS:
            continue
        if uniform and node.op in ELEMENTWISE_OPS:
            small = [a.reshape(-1)[:1].reshape(()) if a.size else a for a in arrays]
            with np.errstate(all="ignore"):
                (value,) = OPS[node.op].evaluate(small, node.attrs, [v.type for v in node.outputs])
            known[out.id] = np.broadcast_to(np.asarray(value), out.type.shape)
            continue
        if uniform and node.op in VIEW_OPS and arrays[0].size:
            known[out.id] = np.broadcast_to(arrays[0].reshape(-1)[:1].reshape(()), out.type.shape)
            continue
        with np.errstate(all="ignore"):
            (value,) = OPS[node.op].evaluate(arrays, node.attrs, [v.type for v in node.outputs])
        known[out.id] = np.asarray(value).reshape(out.type.shape)
    return known


def _uniform(a: np.ndarray) -> bool:
    if a.size <= 1:
        return True
    flat = np.ascontiguousarray(a).reshape(-1)
    if a.strides and all(s == 0 for s in a.strides):
        return True
    bits = flat.view(f"u{flat.dtype.itemsize}")
    return bool(np.all(bits == bits[0]))
