"""The fast executor: evaluates a program's graph-level form over whole tensors.

Inputs and outputs are zero-copy numpy views of the launch's buffers (device memory); each op
runs once over whole tensors with the numerics of ``ops.py``, through a plan prepared once per
graph (``plan.py``: constants evaluated once, temporaries reused, results written in place). Timing never comes from here - it
always comes from the program's ISA, so fast and exact runs report the same device time.
"""

from __future__ import annotations

import weakref

import numpy as np

from .. import dtypes
from ..errors import ExecutionError, NeuronSimError, ValidationError
from .ir import Graph
from .ops import OPS
from .plan import BufferPool, plan_of

# id(program) -> (weak reference to the program, its parsed Graph). Keyed by identity: Program is a
# dataclass with value equality, so it is unhashable (a WeakKeyDictionary cannot hold it).
_GRAPHS: dict[int, tuple[weakref.ref, Graph]] = {}


def graph_of(program) -> Graph:
    key = id(program)
    entry = _GRAPHS.get(key)
    if entry is not None and entry[0]() is program:
        return entry[1]
    form = program.graph
    if form is None:
        raise ExecutionError(f"program {program.name!r} has no graph-level form for the fast executor")
    graph = form if isinstance(form, Graph) else Graph.from_dict(form)
    _GRAPHS[key] = (weakref.ref(program, lambda _ref, key=key: _GRAPHS.pop(key, None)), graph)
    return graph


def evaluate(graph: Graph, buffers: dict[str, np.ndarray], pool: BufferPool | None = None) -> None:
    """Evaluate ``graph`` over ``buffers`` (flat uint8 arrays by tensor name); ``pool`` keeps
    temporaries for reuse by later calls (see ``plan.py``)."""
    plan_of(graph).run(buffers, pool)


def evaluate_reference(graph: Graph, buffers: dict[str, np.ndarray]) -> None:
    """Node-by-node interpretation of ``ops.py`` (every intermediate a fresh array, outputs
    copied at the end): the definition plans must match bit for bit (tests, benchmarks)."""
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


class FastExecutor:
    """Runtime executor for ``NEURON_SIM_MODE=fast`` (registered by neuron_sim.graph). A device
    runs one program at a time on it, so its pool of temporaries needs no lock."""

    def __init__(self, arch=None):
        self.arch = arch
        self.pool = BufferPool()

    def run(self, program, buffers) -> None:
        plan_of(graph_of(program)).run(buffers, self.pool)
