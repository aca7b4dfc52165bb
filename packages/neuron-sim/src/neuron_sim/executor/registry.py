"""The executor modes, listed explicitly: ``exact`` and ``fast``, and any a user registers.

``exact`` runs instruction by instruction with the hardware's numerics. ``fast`` (the default
``NEURON_SIM_MODE``) evaluates a program's graph-level form over whole tensors. Timing never
depends on the mode: it always comes from the ISA program.

``resolve`` is the one place that decides which executor runs a program under a mode: a program
the mode's executor cannot run (no graph form, or loops with run-time bounds it cannot count) runs
``exact``, which runs every program.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from .exact import ExactExecutor
from .fast import FastExecutor
from .protocol import ExecutorSpec

FALLBACK_MODE = "exact"

BUILTIN: dict[str, ExecutorSpec] = {
    "exact": ExecutorSpec("exact", ExactExecutor, needs_graph=False, reports_trip_counts=True),
    "fast": ExecutorSpec("fast", FastExecutor, needs_graph=True, reports_trip_counts=False),
}

_lock = threading.Lock()
_registry: dict[str, ExecutorSpec] = dict(BUILTIN)


def register_executor(mode: str, factory: Callable, *, requires_graph: bool | None = None,
                      reports_trip_counts: bool = False) -> ExecutorSpec:
    """Make ``mode`` run programs on executors built by ``factory(arch)`` (replacing a built-in
    mode's until ``unregister_executor``). ``requires_graph`` defaults to the built-in mode's
    (True for ``fast``), else False."""
    if not isinstance(mode, str) or not mode or mode != mode.lower():
        raise ValueError(f"executor mode must be a non-empty lowercase string, got {mode!r}")
    if not callable(factory):
        raise TypeError(f"executor factory for {mode!r} must be callable, got {type(factory).__name__}")
    if requires_graph is None:
        requires_graph = BUILTIN[mode].needs_graph if mode in BUILTIN else False
    spec = ExecutorSpec(mode, factory, needs_graph=bool(requires_graph), reports_trip_counts=bool(reports_trip_counts))
    with _lock:
        _registry[mode] = spec
    return spec


def unregister_executor(mode: str) -> None:
    """Remove a registered mode; a built-in mode gets its built-in executor back."""
    with _lock:
        if mode in BUILTIN:
            _registry[mode] = BUILTIN[mode]
        elif _registry.pop(mode, None) is None:
            raise KeyError(f"no executor mode {mode!r} is registered; known: {known_modes()}")


def known_modes() -> tuple[str, ...]:
    return tuple(sorted(_registry))


def spec(mode: str) -> ExecutorSpec:
    entry = _registry.get(mode)
    if entry is None:
        raise ValueError(f"unknown executor mode {mode!r}; choose one of {known_modes()}")
    return entry


def resolve(mode: str, program, needs_trip_counts: bool = False) -> ExecutorSpec:
    """The executor that runs ``program`` under ``mode``."""
    entry = spec(mode)
    if (entry.needs_graph and getattr(program, "graph", None) is None) or (needs_trip_counts and not entry.reports_trip_counts):
        return _registry[FALLBACK_MODE]
    return entry
