"""Evaluate an imported graph on numpy arrays (the fast executor's numerics), for tests and tools."""

from __future__ import annotations

import numpy as np
from neuron_sim import dtypes
from neuron_sim.executor.fast import evaluate
from neuron_sim.graph import Graph


def run_graph(graph: Graph, *inputs) -> list[np.ndarray]:
    """Inputs in the graph's input order (numpy arrays, or anything ``np.asarray`` takes: CPU
    torch tensors too); returns one array per graph output."""
    if len(inputs) != len(graph.inputs):
        raise ValueError(f"graph {graph.name} takes {len(graph.inputs)} inputs, got {len(inputs)}")
    buffers = {}
    for v, x in zip(graph.inputs, inputs):
        arr = np.asarray(x.detach().numpy() if hasattr(x, "detach") else x)
        if arr.shape != v.type.shape:
            raise ValueError(f"input {v.name} expects shape {v.type.shape}, got {arr.shape}")
        buffers[v.name] = np.ascontiguousarray(arr, dtype=dtypes.to_numpy(v.type.dtype))
    for v in graph.outputs:
        buffers[v.name] = np.empty(v.type.shape, dtype=dtypes.to_numpy(v.type.dtype))
    evaluate(graph, buffers)
    return [buffers[v.name] for v in graph.outputs]
