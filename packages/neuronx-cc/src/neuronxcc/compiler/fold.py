"""Constant folding: elementwise and view ops whose operands are all constants are evaluated at
compile time with the graph's own op definitions (so the values are exactly the fast executor's)
and become constants themselves - immediates when uniform, generated or stored otherwise.

Only uniform values (computed on one element) and results of at most
``neuron_sim.graph.folding.FOLD_MAX_ELEMENTS`` are folded, so folding never materializes large
arrays at compile time (``folding`` says why each layer folds).
"""

from __future__ import annotations

import numpy as np
from neuron_sim.graph.folding import FOLD_MAX_ELEMENTS, evaluate, is_uniform
from neuron_sim.graph.ops import ELEMENTWISE_OPS, VIEW_OPS

from .constants import constant_value


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
        uniform = all(is_uniform(a) for a in arrays)
        if not uniform and out.type.num_elements > FOLD_MAX_ELEMENTS:
            continue
        types = [v.type for v in node.outputs]
        if uniform and node.op in ELEMENTWISE_OPS:
            small = [a.reshape(-1)[:1].reshape(()) if a.size else a for a in arrays]
            (value,) = evaluate(node.op, small, node.attrs, types)
            known[out.id] = np.broadcast_to(value, out.type.shape)
            continue
        if uniform and node.op in VIEW_OPS and arrays[0].size:
            known[out.id] = np.broadcast_to(arrays[0].reshape(-1)[:1].reshape(()), out.type.shape)
            continue
        (value,) = evaluate(node.op, arrays, node.attrs, types)
        known[out.id] = value.reshape(out.type.shape)
    return known
