"""Which ATen ops ran on the neuron device, and which of them fell back to CPU kernels.

As TorchNeuron does: each op that falls back is logged once (a warning naming it), and the
lists are available from ``get_fallback_ops()`` / ``get_executed_ops()`` until
``clear_op_tracking()``. ``get_fallback_reasons()`` says why an op that has a compiled path
fell back (the compiler's message: an op torch-mlir or neuronx-cc cannot lower, a dtype policy).
"""

from __future__ import annotations

import threading
import warnings

from ..execution import user_stacklevel

_lock = threading.Lock()
_executed: dict[str, int] = {}
_fallback: dict[str, int] = {}
_warned: set[str] = set()
_reasons: dict[str, str] = {}


class NeuronFallbackWarning(UserWarning):
    """An ATen op ran through CPU kernels instead of on the NeuronCore."""


def record(name: str, fallback: bool) -> None:
    with _lock:
        _executed[name] = _executed.get(name, 0) + 1
        if fallback:
            _fallback[name] = _fallback.get(name, 0) + 1
            first = name not in _warned
            _warned.add(name)
        else:
            first = False
    if first:
        warnings.warn(f"Operator '{name}' executed via CPU fallback", NeuronFallbackWarning, stacklevel=user_stacklevel())


def note_fallback_reason(name: str, reason: str) -> None:
    with _lock:
        _reasons[name] = reason


def get_fallback_reasons() -> dict[str, str]:
    """Why each op in ``get_fallback_ops()`` that was tried on the compiled path fell back (the
    latest reason per op). Views, random draws and data-dependent ops fall back by design and
    have no entry."""
    with _lock:
        return {name: _reasons[name] for name in _fallback if name in _reasons}


def get_executed_ops() -> list[str]:
    """ATen ops executed on neuron tensors since the last clear (on device or through fallback)."""
    with _lock:
        return sorted(_executed)


def get_fallback_ops() -> list[str]:
    """ATen ops that ran through CPU kernels since the last clear."""
    with _lock:
        return sorted(_fallback)


def get_op_counts() -> dict[str, dict[str, int]]:
    with _lock:
        return {"executed": dict(_executed), "fallback": dict(_fallback)}


def clear_op_tracking() -> None:
    with _lock:
        _executed.clear()
        _fallback.clear()
        _reasons.clear()
