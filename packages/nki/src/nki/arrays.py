"""The array types a kernel accepts: numpy arrays (built in) and the ones frameworks register.

nki knows nothing about any framework: torch-neuronx registers torch tensors when it is imported
(torch imports it unless ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``)::

    nki.register_array_type(nki.ArrayType(
        name="torch",
        recognize=lambda x: isinstance(x, torch.Tensor),
        describe=lambda t: (tuple(t.shape), numpy_dtype(t.dtype)),   # what a trace needs
        launch=call_kernel,                                           # launch(kernel, args, kwargs)
    ))

A kernel called with a registered type's arrays is traced from their shapes and dtypes
(``describe``) and run by the type's ``launch``, which binds its memory and calls back into nki
(``Kernel.compile`` for the programs; ``nki.simulate`` for host arrays it can view as numpy).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .errors import NkiError
from .typing import TensorType


@dataclass(frozen=True)
class ArrayType:
    name: str
    recognize: Callable[[object], bool]  # is this argument one of ours?
    describe: Callable[[object], tuple]  # (shape, dtype) of an argument, for tracing (no data is read)
    launch: Callable  # launch(kernel, args, kwargs) -> the kernel's results, in this type's arrays


# Array types of frameworks whose integration registers itself, by their module's top-level
# package: what to import when such an argument arrives with nothing registered.
KNOWN_FRAMEWORKS = {
    "torch": "import torch_neuronx (pip install torch-neuronx) before calling the kernel: it registers torch "
             "tensors with nki, and torch imports it on its own unless TORCH_DEVICE_BACKEND_AUTOLOAD=0",
}

_lock = threading.Lock()
_registered: tuple[ArrayType, ...] = ()  # replaced, never mutated: lookups read it without the lock


def register_array_type(array_type: ArrayType) -> None:
    """Accept ``array_type``'s arrays as kernel arguments (replacing a type of the same name)."""
    global _registered
    if not isinstance(array_type, ArrayType):
        raise TypeError(f"register_array_type takes an nki.ArrayType, got {type(array_type).__name__}")
    with _lock:
        _registered = tuple(t for t in _registered if t.name != array_type.name) + (array_type,)


def unregister_array_type(name: str) -> None:
    global _registered
    with _lock:
        if not any(t.name == name for t in _registered):
            raise KeyError(f"no NKI array type named {name!r}; registered: {[t.name for t in _registered]}")
        _registered = tuple(t for t in _registered if t.name != name)


def registered_array_types() -> tuple[str, ...]:
    return tuple(t.name for t in _registered)


def foreign_type(value) -> ArrayType | None:
    """The registered type of ``value`` (None for numpy arrays and compile-time values). An array
    of a known framework with nothing registered for it is an error naming what to import."""
    if isinstance(value, (np.ndarray, TensorType)):
        return None
    for t in _registered:
        if t.recognize(value):
            return t
    package = type(value).__module__.partition(".")[0]
    if package in KNOWN_FRAMEWORKS:
        raise NkiError(f"an NKI kernel got a {type(value).__module__}.{type(value).__qualname__} argument, and no "
                       f"{package} integration is registered with nki: {KNOWN_FRAMEWORKS[package]}")
    return None


def describe(value) -> tuple[tuple[int, ...], object] | None:
    """(shape, dtype) of an array argument of any accepted type; None for compile-time values.
    An ``nt.tensor[shape, dtype]`` stands for an array of that shape (float32 if no dtype) whose
    values do not matter (legacy ``nki.benchmark`` / ``nki.profile`` calls pass them)."""
    if isinstance(value, np.ndarray):
        return tuple(value.shape), value.dtype
    if isinstance(value, TensorType) and value.shape is not None:
        return tuple(int(s) for s in value.shape), value.dtype if value.dtype is not None else "float32"
    t = foreign_type(value)
    if t is None:
        return None
    shape, dtype = t.describe(value)
    return tuple(int(s) for s in shape), dtype


def launcher(args, kwargs) -> ArrayType | None:
    """The one registered type among a call's arguments that runs it (None: numpy and values only)."""
    types = {t.name: t for t in map(foreign_type, list(args) + list(kwargs.values())) if t is not None}
    if len(types) > 1:
        raise NkiError(f"a kernel call mixes arrays of several frameworks ({sorted(types)}); pass one kind")
    return next(iter(types.values()), None)


__all__ = ["ArrayType", "register_array_type", "unregister_array_type", "registered_array_types", "describe",
           "launcher", "foreign_type", "KNOWN_FRAMEWORKS"]
