"""A graph evaluated node by node with the definitions of ``ops.py``: every intermediate a fresh
array, outputs converted and copied at the end. This is the definition; the fast executor's
plans (``neuron_sim.executor.fast``) must match it bit for bit (tests, benchmarks)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..errors import ExecutionError, NeuronSimError, ValidationError
from .ir import Graph
from .ops import OPS


def evaluate_reference(graph: Graph, buffers: dict[str, np.ndarray]) -> None:
    """Evaluate ``graph`` over ``buffers`` (contiguous arrays by tensor name, e.g. flat uint8)."""
    env: dict[int, np.ndarray] = {}
    for v in graph.inputs:
        env[v.id] = _view(buffers[v.name], v.type)
    with np.errstate(all="ignore"):
        for node in graph.nodes:
            try:
                results = OPS[node.op].evaluate([env[v.id] for v in node.inputs], node.attrs, [v.type for v in node.outputs])
            except ValidationError as err:
                raise err.at(node.location) from None
            except NeuronSimError:
                raise
            except Exception as err:  # an op's numpy form failed: name it
                raise ExecutionError(f"graph op {node.op} at {node.location or '?'} failed: {type(err).__name__}: {err}") from err
            for v, r in zip(node.outputs, results):
                env[v.id] = r
    for v in graph.outputs:
        target = _view(buffers[v.name], v.type)
        target[...] = dtypes.convert(np.asarray(env[v.id]), v.type.dtype)


def _view(buffer: np.ndarray, type_) -> np.ndarray:
    return np.ndarray((type_.num_elements,), dtype=dtypes.to_numpy(type_.dtype), buffer=buffer).reshape(type_.shape)
