"""A program's graph-level form (``program.graph``: a Graph or its dict), parsed once per program."""

from __future__ import annotations

import weakref

from ..errors import ExecutionError
from .ir import Graph

# id(program) -> (weak reference to the program, its parsed Graph). Keyed by identity: Program is a
# dataclass with value equality, so it is unhashable (a WeakKeyDictionary cannot hold it).
_GRAPHS: dict[int, tuple[weakref.ref, Graph]] = {}


def graph_of(program) -> Graph:
    """The parsed graph form of ``program`` (the same object for every call while it lives)."""
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
