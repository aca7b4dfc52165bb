"""Binding caller buffers to a program's tensor table, checked at launch time.

Checks happen in the caller's thread when the launch is submitted, so a missing or undersized
buffer is reported where the mistake is made instead of at a later synchronization point.
Buffers are bound zero-copy as flat uint8 views: outputs are written straight into the caller's
memory, which is why non-contiguous or read-only output buffers are refused rather than copied.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ..errors import AccessPatternError, ValidationError
from ..memory import Hbm, HbmAllocation
from .timing_cache import tensor_table


def as_program(neff_or_program):
    """The Program inside a Neff (anything with ``.program``), or the Program itself."""
    program = getattr(neff_or_program, "program", neff_or_program)
    if not hasattr(program, "tensors") or not hasattr(program, "instructions"):
        raise TypeError(f"launch expects a Program or a Neff, got {type(neff_or_program).__name__}")
    return program


def bind_buffers(program, buffers: Mapping, hbm: Hbm, device_name: str) -> dict[str, np.ndarray]:
    """Flat uint8 views of the caller's buffers by tensor name (internal tensors excluded unless given)."""
    if not isinstance(buffers, Mapping):
        raise TypeError(f"launch buffers must be a mapping of tensor name -> array, got {type(buffers).__name__}")
    table = tensor_table(program)
    decls = table.decls
    unknown = [name for name in buffers if name not in decls]
    if unknown:
        raise ValidationError(
            "launch.unknown_buffer",
            f"program {program.name!r} has no tensor(s) {sorted(unknown)}; its tensors are {list(decls)}",
        )
    missing = [name for name in table.required if name not in buffers]
    if missing:
        raise ValidationError(
            "launch.missing_buffer",
            f"program {program.name!r} needs a buffer for tensor(s) {missing}; given {sorted(buffers)}",
        )
    bound = {}
    for name, value in buffers.items():
        kind, nbytes, shape, dtype = decls[name]
        if type(value) is np.ndarray and value.dtype == np.uint8 and value.ndim == 1 and value.flags.c_contiguous:
            flat = value  # already the form we bind (the frameworks' fast path)
        else:
            flat = _flat_bytes(value, name, program.name, hbm, device_name)
        if flat.nbytes < nbytes:
            raise ValidationError(
                "launch.buffer_too_small",
                f"program {program.name!r}: the buffer for {kind} tensor {name!r} holds {flat.nbytes} bytes; "
                f"the tensor needs {nbytes} ({list(shape)} {dtype})",
            )
        if kind != "input" and not flat.flags.writeable:
            raise ValidationError(
                "launch.read_only_buffer", f"program {program.name!r} writes {kind} tensor {name!r}, but its buffer is read-only"
            )
        bound[name] = flat
    return bound


def _flat_bytes(value, name: str, program_name: str, hbm: Hbm, device_name: str) -> np.ndarray:
    if isinstance(value, HbmAllocation):
        # A device buffer must live in this device's HBM: real hardware cannot read another core's.
        try:
            block, _ = hbm.resolve(value.address, max(value.nbytes, 1))
        except AccessPatternError:
            block = None
        if block is not value:
            raise ValidationError(
                "launch.wrong_device",
                f"program {program_name!r}: the buffer for {name!r} is not a live allocation in {device_name}'s HBM "
                f"(freed, or allocated on another device)",
            )
        return value.array
    if not isinstance(value, np.ndarray):
        raise ValidationError(
            "launch.buffer_type",
            f"program {program_name!r}: the buffer for {name!r} must be a numpy array or an HbmAllocation, "
            f"got {type(value).__name__}",
        )
    if not value.flags.c_contiguous:
        raise ValidationError(
            "launch.not_contiguous",
            f"program {program_name!r}: the buffer for {name!r} is not C-contiguous (strides {value.strides}); "
            f"launches bind buffers zero-copy, so pass a contiguous array (np.ascontiguousarray)",
        )
    return value.reshape(-1).view(np.uint8)
