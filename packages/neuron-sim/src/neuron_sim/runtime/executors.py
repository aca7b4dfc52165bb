"""Executor modes: which functional executor runs a launched program.

``exact`` runs instruction by instruction with the hardware's numerics. ``fast`` (the default,
``neuron_sim.graph``) evaluates a program's graph-level form over whole tensors; a program without
a graph form (an NKI kernel) runs ``exact`` under it. Timing never depends on the mode: it always
comes from the ISA program.

A factory takes the Architecture and returns an object with ``run(program, buffers)``, where
``buffers`` maps every tensor name to a flat uint8 array. A device makes one executor per mode
and runs one program at a time on it, so executors may keep on-chip state between calls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..executor import ExactExecutor

FALLBACK_MODE = "exact"
# Named here so NEURON_SIM_MODE=fast is valid before a fast executor exists (it falls back).
_RESERVED_MODES = ("exact", "fast")


@dataclass(frozen=True)
class ExecutorEntry:
    factory: Callable
    requires_graph: bool  # programs without ``program.graph`` fall back to the exact executor


_lock = threading.Lock()
_registry: dict[str, ExecutorEntry] = {"exact": ExecutorEntry(ExactExecutor, requires_graph=False)}


def register_executor(mode: str, factory: Callable, *, requires_graph: bool | None = None) -> None:
    """Make ``mode`` run programs with executors built by ``factory(arch)``. ``requires_graph``
    defaults to True for ``fast`` (it evaluates the graph form) and False otherwise."""
    if not isinstance(mode, str) or not mode or mode != mode.lower():
        raise ValueError(f"executor mode must be a non-empty lowercase string, got {mode!r}")
    if not callable(factory):
        raise TypeError(f"executor factory for {mode!r} must be callable")
    if requires_graph is None:
        requires_graph = mode == "fast"
    with _lock:
        _registry[mode] = ExecutorEntry(factory, requires_graph)


def unregister_executor(mode: str) -> None:
    if mode == FALLBACK_MODE:
        raise ValueError("the exact executor cannot be unregistered: every other mode falls back to it")
    with _lock:
        _registry.pop(mode, None)


def evaluates_graph_form(mode: str) -> bool:
    """Whether ``mode``'s executor evaluates programs' graph-level form (not their instructions)."""
    entry = _registry.get(mode)
    return mode != FALLBACK_MODE and entry is not None and entry.requires_graph


def known_modes() -> tuple[str, ...]:
    with _lock:
        return tuple(sorted(set(_RESERVED_MODES) | set(_registry)))


def resolve_mode(mode: str, program) -> tuple[str, Callable]:
    """The mode that actually runs ``program`` under ``mode``, and its factory."""
    entry = _registry.get(mode)
    if entry is None or (entry.requires_graph and getattr(program, "graph", None) is None):
        return FALLBACK_MODE, _registry[FALLBACK_MODE].factory
    return mode, entry.factory
