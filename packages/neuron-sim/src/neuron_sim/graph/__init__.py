"""Graph-level programs: the whole-tensor form a NEFF carries beside its ISA program, and the fast
executor that evaluates it (``NEURON_SIM_MODE=fast``)."""

from ..runtime.executors import register_executor
from .evaluate import FastExecutor, evaluate, evaluate_reference, graph_of
from .ir import Graph, Node, TensorType, Value
from .ops import OPS, infer

register_executor("fast", FastExecutor, requires_graph=True)

__all__ = ["Graph", "Node", "TensorType", "Value", "OPS", "infer", "evaluate", "evaluate_reference", "graph_of", "FastExecutor"]
