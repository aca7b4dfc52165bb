"""FX calls that become graph ops as they are, not through torch-mlir: ops a framework defines
whose graph form the compiler has (the generator's ``random_words``). torch-mlir cannot lower a
custom op (``torch.operator`` is illegal in its StableHLO backend), so each such call is cut out of
the FX graph before the import - its result becomes an extra graph input - and put back as the
graph op in the imported graph, reading the inputs the call read.

    register_graph_op(torch.ops.neuron_rng.random_words.default, "random_words",
                      lambda state, count: {"count": count})

A registered call's tensor arguments must be graph inputs (placeholders): what it reads exists
before anything runs, so the op goes first in the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from neuron_sim.graph import Graph

from .errors import UnsupportedOp

# FX target -> (graph op, attrs(*call args) -> dict)
GRAPH_OPS: dict = {}


def register_graph_op(target, graph_op: str, attrs: Callable[..., dict]) -> None:
    """Import calls of ``target`` as ``graph_op`` with ``attrs(*args)`` (its tensor arguments are
    the op's operands, in order)."""
    GRAPH_OPS[target] = (graph_op, attrs)


@dataclass(frozen=True)
class CutOp:
    op: str
    attrs: dict
    operands: tuple[int, ...]  # positions of the graph inputs it reads
    result: int  # position of the graph input that stands for its result


def cut_graph_ops(gm, torch) -> tuple[object, list[CutOp]]:
    """``gm`` without registered calls (a copy; ``gm`` itself is untouched), and what was cut."""
    if not any(n.op == "call_function" and n.target in GRAPH_OPS for n in gm.graph.nodes):
        return gm, []
    graph = torch.fx.Graph()
    env: dict = {}
    graph.output(graph.graph_copy(gm.graph, env))  # node metas are shared, not copied
    copy = torch.fx.GraphModule(gm, graph)
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    position = {n: i for i, n in enumerate(placeholders)}
    cut, last = [], placeholders[-1] if placeholders else None
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in GRAPH_OPS:
            continue
        graph_op, attrs = GRAPH_OPS[node.target]
        tensors = [a for a in node.args if isinstance(a, torch.fx.Node)]
        if any(a not in position for a in tensors):
            raise UnsupportedOp(str(node.target), "its tensor operands must be graph inputs (it is imported as the "
                                "graph op " + graph_op + " at the start of the graph)")
        with graph.inserting_after(last) if last is not None else graph.inserting_before(None):
            stand_in = graph.placeholder(f"_{graph_op}{len(cut)}")
        stand_in.meta = dict(node.meta)
        node.replace_all_uses_with(stand_in)
        graph.erase_node(node)
        last = stand_in
        cut.append(CutOp(graph_op, attrs(*[None if isinstance(a, torch.fx.Node) else a for a in node.args]),
                         tuple(position[a] for a in tensors), len(placeholders) + len(cut)))
    copy.recompile()
    return copy, cut


def put_back(graph: Graph, cut: list[CutOp]) -> None:
    """Replace the stand-in inputs of ``graph`` (imported from ``cut_graph_ops``' module) by the ops."""
    if not cut:
        return
    inputs = list(graph.inputs)
    replaced = {}
    ops = []
    for c in cut:
        stand_in = inputs[c.result]
        (value,) = graph.add(c.op, [inputs[i] for i in c.operands], c.attrs)
        if value.type != stand_in.type:
            raise UnsupportedOp(c.op, f"the graph op gives {value.type}, the traced call {stand_in.type}")
        ops.append(graph.nodes.pop())
        replaced[stand_in.id] = value
    graph.nodes[:0] = ops  # they read only graph inputs: first
    for node in graph.nodes:
        node.inputs = [replaced.get(v.id, v) for v in node.inputs]
    names = [v.name for v in graph.outputs]
    outputs = [replaced.get(v.id, v) for v in graph.outputs]
    for v in graph.outputs:
        v.name = None if v.id in replaced else v.name
    graph.inputs = [v for v in inputs if v.id not in replaced]
    graph.set_outputs(outputs, names)
