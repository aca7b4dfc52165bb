"""Host nodes of a compiled graph (an optimizer's bias corrections) get their operands from
builders made once per node: the same structures tree_map would build, node by node."""

from __future__ import annotations

import collections

import torch
from torch import fx
from torch.fx.immutable_collections import immutable_dict, immutable_list
from torch.utils._pytree import tree_map
from torch_neuronx.dynamo.host_operands import operand_builder

Pair = collections.namedtuple("Pair", "first second")


def _nodes():
    graph = fx.Graph()
    return graph.placeholder("a"), graph.placeholder("b")


def test_builders_rebuild_nested_structures_as_tree_map_does():
    a, b = _nodes()
    values = {a: torch.tensor(1.0), b: torch.tensor(2.0)}
    structures = [
        (a, 2.5, "x", None),
        (immutable_list([a, b, 3]), {"alpha": b}),
        immutable_dict({"out": immutable_list([b]), "dim": (0, 1)}),
        (Pair(a, 4), [[a], (b, (a,))]),
        (1, 2, (3,)),
        {},
    ]
    for structure in structures:
        built = operand_builder(structure)(values.__getitem__)
        expected = tree_map(lambda n: values[n] if isinstance(n, fx.Node) else n, structure)
        assert _plain(built) == _plain(expected), structure


def test_parts_without_nodes_are_reused_as_they_are():
    a, _ = _nodes()
    constant = (1, (2, 3))
    built = operand_builder((a, constant))(lambda n: 0)
    assert built[1] is constant
    assert operand_builder(constant)(lambda n: 0) is constant


def _plain(x):
    """Compare lists and tuples by contents (an fx immutable_list rebuilt as a plain list)."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return (type(x).__name__ if hasattr(x, "_fields") else "seq", [_plain(v) for v in x])
    if isinstance(x, torch.Tensor):
        return ("tensor", x.item())
    return x
