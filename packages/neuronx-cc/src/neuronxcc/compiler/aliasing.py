"""Which outputs of a graph may be written over which of its inputs: facts the compiler records in
every NEFF's metadata (``metadata["aliasing"]``) for the frameworks that launch it.

A launcher running an in-place op (``x.add_(y)``), an optimizer step or any graph whose result
replaces one of its inputs would rather bind that output's buffer to the input's memory than write
a temporary and copy it back. That is safe when each element of the output is computed only from
the elements at its own index of that input - each read before the write that depends on it, as a
tile loop does - and nothing else in the graph needs the input's old values (the compiler may
schedule such a reader after the writer). Both are properties of the graph, so they are computed
here, once, at compile time; a launcher checks only what it learns at the call: the tensors'
layouts and which of them share memory.

    facts = aliasing_facts(graph)       # {"version": 1, "in_place": [[i, j], ...]}
    # [i, j]: output j may be written into input i's buffer (same shape and dtype, the same bytes)
"""

from __future__ import annotations

from neuron_sim.graph import Graph
from neuron_sim.graph.ops import ELEMENTWISE_OPS, LEAF_OPS

ALIASING_KEY = "aliasing"
ALIASING_VERSION = 1

# Element k of these is made from element k of same-shaped operands (elementwise ops) or from
# nothing (leaves: constants, iotas).
_SAME_INDEX_OPS = ELEMENTWISE_OPS | LEAF_OPS


def aliasing_facts(graph: Graph) -> dict:
    """The aliasing facts of ``graph`` (JSON: lists of ints), for ``Neff.metadata[ALIASING_KEY]``."""
    return {"version": ALIASING_VERSION, "in_place": [[i, j] for i, j in in_place_pairs(graph)]}


def in_place_pairs(graph: Graph) -> list[tuple[int, int]]:
    """Every (input i, output j) such that output j may overwrite input i's buffer: they have the
    same shape and dtype, every node that reads input i - and whatever reads their results, up to
    output j's value - is an elementwise op over input i's shape, and no other output depends on
    input i's old value."""
    consumers: dict[int, list] = {}
    for node in graph.nodes:
        for v in node.inputs:
            consumers.setdefault(v.id, []).append(node)
    output_index: dict[int, list[int]] = {}
    for j, v in enumerate(graph.outputs):
        output_index.setdefault(v.id, []).append(j)
    pairs = []
    for i, start in enumerate(graph.inputs):
        reached = _outputs_reached_at_own_index(start, consumers, output_index)
        if reached is None or len(reached) > 1:
            continue  # read otherwise than at its own index, or by two outputs
        candidates = reached or {j for ids in output_index.values() for j in ids}  # unread: any output
        for j in sorted(candidates):
            end = graph.outputs[j]
            if start.type.shape == end.type.shape and start.type.dtype == end.type.dtype:
                pairs.append((i, j))
    return pairs


def _outputs_reached_at_own_index(start, consumers: dict, output_index: dict) -> set[int] | None:
    """The outputs whose values are made from value ``start`` through same-index ops of its shape,
    following reads of ``start`` until they reach an output; None if any read of it (direct or
    through such ops, before an output) is another kind of op."""
    reached: set[int] = set()
    seen, stack = set(), [start.id]
    while stack:
        vid = stack.pop()
        if vid in seen:
            continue
        seen.add(vid)
        if vid in output_index:  # an output's value: readers after it read the new value
            reached.update(output_index[vid])
            continue
        for node in consumers.get(vid, ()):
            if node.op not in _SAME_INDEX_OPS:
                return None
            if any(v.type.shape != start.type.shape for v in node.outputs):
                return None
            stack.extend(v.id for v in node.outputs)
    return reached


def in_place_pairs_of(metadata: dict) -> frozenset[tuple[int, int]]:
    """The (input, output) pairs recorded in a NEFF's metadata; empty for a NEFF compiled without
    them (nothing is then written in place)."""
    facts = metadata.get(ALIASING_KEY)
    if not isinstance(facts, dict) or facts.get("version") != ALIASING_VERSION:
        return frozenset()
    return frozenset((int(i), int(j)) for i, j in facts.get("in_place", ()))
