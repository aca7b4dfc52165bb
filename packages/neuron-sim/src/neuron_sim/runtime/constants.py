"""Constant tensors that travel inside a program, and so inside its NEFF.

A compiler may declare a large constant as an ``input`` tensor and keep its data in the program's
metadata::

    program.metadata["constants"] = {name: {"dtype": "float32", "shape": [300, 70],
                                            "data": <base64 of the raw little-endian bytes>}}

The NEFF stores program metadata, so the bytes go wherever the program goes. At launch the runtime
binds every such tensor the caller did not bind itself (a caller's buffer still wins): decoded
once per program object - like its timing - and bound read-only, zero-copy.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping

import numpy as np

from .. import dtypes
from ..errors import ValidationError
from .timing_cache import PerProgram

_cache = PerProgram()


def constant_buffers(program) -> dict[str, np.ndarray]:
    """The program's constant tensors as read-only flat uint8 arrays, by tensor name."""
    entries = (getattr(program, "metadata", None) or {}).get("constants") or {}
    if not entries:
        return {}
    return _cache.get(program, lambda: _decode(program, entries))


def _decode(program, entries) -> dict[str, np.ndarray]:
    decls = {t.name: t for t in program.tensors}
    out = {}
    for name, entry in entries.items():
        decl = decls.get(name)
        if decl is None or decl.kind != "input":
            raise ValidationError("launch.constant", f"program {program.name!r}: constant {name!r} is not an input tensor of it")
        try:
            raw = base64.b64decode(entry["data"], validate=True)
        except (KeyError, TypeError, binascii.Error) as err:
            raise ValidationError("launch.constant", f"program {program.name!r}: constant {name!r} has no valid base64 data "
                                  f"({type(err).__name__}: {err})") from None
        if len(raw) != decl.nbytes or dtypes.dtype_name(entry.get("dtype", decl.dtype)) != decl.dtype:
            raise ValidationError(
                "launch.constant",
                f"program {program.name!r}: constant {name!r} holds {len(raw)} bytes of {entry.get('dtype')}; the tensor is "
                f"{list(decl.shape)} {decl.dtype} ({decl.nbytes} bytes)")
        array = np.frombuffer(raw, dtype=np.uint8)  # bytes are immutable: the array is read-only
        out[name] = array
    return out


def with_constants(program, buffers: Mapping) -> Mapping:
    """``buffers`` plus the program's constants the caller did not bind (``buffers`` itself if none)."""
    constants = constant_buffers(program)
    if not constants or not isinstance(buffers, Mapping) or all(name in buffers for name in constants):
        return buffers
    merged = dict(buffers)
    for name, array in constants.items():
        merged.setdefault(name, array)
    return merged

