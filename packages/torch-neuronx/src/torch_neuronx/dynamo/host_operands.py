"""Operands of a compiled graph's host nodes (an optimizer's bias corrections: about a thousand
a step), rebuilt on every call from the values of the nodes they name.

``operand_builder(structure)`` is made once per node: a function of ``value`` (node -> its value)
that rebuilds ``structure`` - nested tuples, lists, namedtuples and dicts of fx nodes and constants
- with each node replaced by its value, as ``tree_map`` would, reusing every part that holds no
node as it is. tree_map walked every argument structure on every call, ~20 us per node.
"""

from __future__ import annotations

from torch import fx


def operand_builder(structure):
    """The function rebuilding ``structure`` from node values (``structure`` itself, if it holds no node)."""
    return _builder(structure) or _constant(structure)


def _builder(structure):
    """A function of ``value`` (node -> its value) that rebuilds ``structure`` (nested tuples,
    lists and dicts of nodes and constants) with each node replaced by its value, as tree_map
    does, or None if ``structure`` holds no node; parts without nodes are reused as they are."""
    if isinstance(structure, fx.Node):
        return lambda value: value(structure)
    if isinstance(structure, (tuple, list)):
        parts = [_builder(item) for item in structure]
        if not any(parts):
            return None
        makers = [part or _constant(item) for part, item in zip(parts, structure)]
        if isinstance(structure, list):  # fx's immutable_list too: ops take a plain list alike
            return lambda value: [make(value) for make in makers]
        if hasattr(structure, "_fields"):  # a namedtuple
            return lambda value: type(structure)(*[make(value) for make in makers])
        return lambda value: tuple([make(value) for make in makers])
    if isinstance(structure, dict):
        parts = {key: _builder(item) for key, item in structure.items()}
        if not any(parts.values()):
            return None
        makers = {key: part or _constant(structure[key]) for key, part in parts.items()}
        return lambda value: {key: make(value) for key, make in makers.items()}
    return None


def _constant(structure):
    return lambda value: structure
