"""The compiler's frontend: StableHLO from torch-mlir (text, an ``ir.Module``, or an FX graph) ->
``neuron_sim.graph.Graph``.

    from neuronxcc.frontend import import_text, import_module, from_fx, run_graph
    graph = import_module(torch_mlir.fx.export_and_import(model, x, output_type="stablehlo"))
    (y,) = run_graph(graph, x.numpy())        # whole-tensor evaluation (neuron_sim's fast executor)

torch-mlir's pass pipeline runs in a worker process with a memory and a time bound (``pipeline``):
a graph it crashes or runs away on raises ``LoweringStopped`` instead of killing the process.

Needs the ``stablehlo`` extra (torch-mlir, torch) to import; this package itself imports without it.
"""

from .errors import FrontendError, MissingDependency, UnsupportedOp
from .execute import run_graph
from .fx import decompositions, from_fx, insert_none_outputs, sdpa_math, strip_none_outputs
from .fx_graph_ops import register_graph_op
from .pipeline import LoweringStopped
from .stablehlo import import_module, import_text

__all__ = ["FrontendError", "MissingDependency", "UnsupportedOp", "LoweringStopped", "import_module", "import_text",
           "from_fx", "decompositions", "sdpa_math", "insert_none_outputs", "strip_none_outputs", "run_graph",
           "register_graph_op"]
