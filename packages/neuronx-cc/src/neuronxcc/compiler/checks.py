"""Up-front checks of a graph: every refusal is a CompileError naming the op, types and location.

* names: graph inputs and outputs are named, uniquely;
* dtypes: float64 is refused (no engine computes it; int64 is stored as int64 in HBM and computed
  on chip as described in ``integers.py``, which also refuses integer ops no engine does exactly);
* types: each node's recorded output types must be what its op's shape rule infers (a graph read
  from a dict, or edited by hand, can disagree), and the op must exist.
"""

from __future__ import annotations

from neuron_sim import ValidationError
from neuron_sim.graph import infer

from .errors import CompileError, node_error

UNSUPPORTED_DTYPES = {"float64": "float64 has no NeuronCore engine type; convert to float32 first"}


def check_graph(graph) -> None:
    names = set()
    for v in graph.inputs:
        if not v.name:
            raise CompileError("compile.unnamed_input", f"graph input %{v.id} has no name", op="input")
        if v.name in names:
            raise CompileError("compile.duplicate_tensor", f"two graph inputs are named {v.name!r}", op="input")
        names.add(v.name)
        if v.type.dtype in UNSUPPORTED_DTYPES:
            raise CompileError("compile.dtype", f"input {v.name!r}: {UNSUPPORTED_DTYPES[v.type.dtype]}", op="input",
                               shapes=[str(v.type)])
    out_names = set()
    for v in graph.outputs:
        if not v.name:
            raise CompileError("compile.unnamed_output", f"graph output %{v.id} has no name", op="output")
        if v.name in out_names:
            raise CompileError("compile.duplicate_tensor", f"two graph outputs are named {v.name!r}", op="output")
        out_names.add(v.name)
    for node in graph.nodes:
        for v in list(node.inputs) + list(node.outputs):
            if v.type.dtype in UNSUPPORTED_DTYPES:
                raise node_error(node, "compile.dtype", f"dtype {v.type.dtype}: {UNSUPPORTED_DTYPES[v.type.dtype]}")
        try:
            inferred = infer(node.op, [v.type for v in node.inputs], node.attrs)
        except ValidationError as err:
            raise node_error(node, "compile.invalid_node", err.detail) from None
        except (KeyError, TypeError, IndexError, ValueError) as err:
            raise node_error(node, "compile.invalid_node", f"bad attributes {node.attrs}: {type(err).__name__}: {err}") from None
        recorded = [v.type for v in node.outputs]
        if inferred != recorded:
            raise node_error(node, "compile.shape_mismatch",
                             f"the graph records result type(s) {[str(t) for t in recorded]} but the operands give "
                             f"{[str(t) for t in inferred]}")
