"""Running a compiled kernel on numpy arrays with the exact executor.

Arguments are bound zero-copy when they are C-contiguous and writable, so a kernel that writes an
input tensor updates the caller's array in place (as nki.simulate does); other arguments are
copied in and, if written, copied back. Returned tensors come back as new numpy arrays.
"""

from __future__ import annotations

import os
import re
import threading
import warnings

import numpy as np
from neuron_sim import ExactExecutor, dtypes
from neuron_sim.memory.hbm import POISON_BYTE

from .errors import NkiError

UNINITIALIZED_ENV = "NKI_UNINITIALIZED_READ"
_POLICIES = {"warn": "warn", "error": "error", "off": None}
_executors: dict = {}
_lock = threading.Lock()


def uninitialized_policy() -> str | None:
    value = os.environ.get(UNINITIALIZED_ENV, "warn").strip().lower()
    if value not in _POLICIES:
        raise NkiError(f"{UNINITIALIZED_ENV}={value!r}: choose warn, error or off")
    return _POLICIES[value]


def _executor(arch, policy) -> ExactExecutor:
    key = (arch.name, policy)
    if key not in _executors:
        _executors[key] = ExactExecutor(arch, uninitialized=policy)
    return _executors[key]


def _bind(value: np.ndarray, decl) -> tuple[np.ndarray, np.ndarray | None]:
    """(flat uint8 buffer, array to copy back into or None)."""
    expected = dtypes.to_numpy(decl.dtype)
    if value.dtype != expected:
        raise NkiError(f"argument {decl.name!r} has dtype {value.dtype}, the compiled kernel expects {expected}")
    if value.flags.c_contiguous and value.flags.writeable:
        return value.reshape(-1).view(np.uint8), None
    copy = np.ascontiguousarray(value)
    return copy.reshape(-1).view(np.uint8), value if value.flags.writeable else None


def execute(compiled, args, kwargs) -> tuple[dict[str, np.ndarray], list[dict]]:
    """Run the compiled programs; returns every HBM tensor's array by name, and each program's
    loop trip counts (for timing loops with run-time bounds)."""
    tensors = compiled.tensors
    buffers: dict[str, np.ndarray] = {}
    arrays: dict[str, np.ndarray] = {}
    copy_back: list[tuple[np.ndarray, np.ndarray]] = []
    bound = {**{compiled.params[i]: args[i] for i in compiled.params}, **{compiled.kw_params[k]: kwargs[k] for k in compiled.kw_params}}
    for name, decl in tensors.items():
        if name in bound:
            buf, back = _bind(bound[name], decl)
            if back is not None and decl.is_output:
                copy_back.append((back, buf))
            buffers[name] = buf
            arrays[name] = bound[name]
        else:  # outputs and scratch: fresh device memory, poisoned so unwritten data shows as NaN
            buf = np.full(decl.nbytes, POISON_BYTE, dtype=np.uint8)
            buffers[name] = buf
            arrays[name] = buf.view(dtypes.to_numpy(decl.dtype)).reshape(decl.shape)
    policy = uninitialized_policy()
    with _lock, warnings.catch_warnings(record=True) as caught:
        # Record the executor's warnings (uninitialized reads) and re-issue them below from the
        # kernel line they name, so filters and ``-W error`` see the user's file, not ours.
        warnings.simplefilter("always")
        executor = _executor(compiled.arch, policy)
        trip_counts = []
        for program in compiled.programs:
            executor.run(program, buffers)
            trip_counts.append(executor.trip_counts)
    for w in caught:
        _reissue(w)
    for target, buf in copy_back:
        target[...] = buf.view(target.dtype).reshape(target.shape)
    return arrays, trip_counts


_AT_LINE = re.compile(r" at (?P<path>[^()]+?):(?P<line>\d+)\)$")


def _reissue(w: warnings.WarningMessage) -> None:
    match = _AT_LINE.search(str(w.message))
    path, line = (match["path"], int(match["line"])) if match else (w.filename, w.lineno)
    warnings.warn_explicit(w.message, w.category, path, line)


def _structure(returned, arrays):
    if returned is None:
        return None
    if isinstance(returned, str):
        return arrays[returned]
    return type(returned)(_structure(r, arrays) for r in returned)


def run(kernel, args, kwargs):
    """Compile (once per signature) and execute ``kernel`` on numpy arrays."""
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            raise NkiError("float64 arrays have no NeuronCore dtype; convert to float32 (or bfloat16) first")
    compiled = kernel.compile(args, kwargs)
    arrays, trip_counts = execute(compiled, args, kwargs)
    kernel.record(last_timing=compiled.timing(trip_counts))
    return _structure(compiled.returned, arrays)
