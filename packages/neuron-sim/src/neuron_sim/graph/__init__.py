"""Graph-level programs: the whole-tensor form a NEFF carries beside its ISA program, its ops'
shape rules and semantics (``ops.py``), and their node-by-node evaluation (``reference.py``).
The fast executor that runs this form lives in ``neuron_sim.executor.fast``."""

from .ir import Graph, Node, TensorType, Value
from .ops import OPS, infer
from .program_form import graph_of
from .reference import evaluate_reference

__all__ = ["Graph", "Node", "TensorType", "Value", "OPS", "infer", "evaluate_reference", "graph_of"]
