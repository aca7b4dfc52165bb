"""Argument checks shared by the kernels' entry points: they run before tracing, so a bad call
fails with the argument's name and the limit instead of a simulator rule deep inside a kernel.
Works on anything with ``.shape`` and ``.dtype`` (numpy arrays, torch tensors)."""

from __future__ import annotations

import nki.language as nl
import numpy as np

# I/O dtypes every kernel takes; the math inside is fp32 whatever the I/O dtype.
FLOAT_DTYPES = ("float32", "bfloat16", "float16")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}


class NkilibError(ValueError):
    """A kernel argument the kernel cannot take; the message starts with ``[nkilib.<rule>]``."""

    def __init__(self, rule: str, message: str):
        super().__init__(f"[nkilib.{rule}] {message}")
        self.rule = rule


def dtype_name(dtype) -> str:
    """``float32`` for np.float32, ml_dtypes.bfloat16 and torch.float32 alike."""
    return str(dtype).removeprefix("torch.")


def check_float(name: str, array) -> str:
    dt = dtype_name(array.dtype)
    if dt not in FLOAT_DTYPES:
        raise NkilibError("dtype", f"{name} has dtype {dt}; the kernel takes {', '.join(FLOAT_DTYPES)}")
    return dt


def check_same_dtype(name: str, array, expected: str) -> None:
    dt = dtype_name(array.dtype)
    if dt != expected:
        raise NkilibError("dtype", f"{name} has dtype {dt}, expected {expected} (the dtype of the input)")


def check_shape(name: str, array, expected: tuple) -> None:
    if tuple(array.shape) != tuple(expected):
        raise NkilibError("shape", f"{name} has shape {list(array.shape)}, expected {list(expected)}")


def check_rows(name: str, array) -> tuple[int, int]:
    """(rows, last dim) of an input the kernel flattens to 2-D; empty inputs are refused."""
    if len(array.shape) < 1:
        raise NkilibError("shape", f"{name} is a scalar; the kernel needs at least one dimension")
    last = int(array.shape[-1])
    rows = 1
    for d in array.shape[:-1]:
        rows *= int(d)
    if rows == 0 or last == 0:
        raise NkilibError("shape", f"{name} has shape {list(array.shape)} with no elements")
    return rows, last


# Per partition, kept back from the row-sized tiles: the kernels' [P, 1] statistics and the
# padding of each tile to whole 64-byte blocks (a few dozen blocks at most).
RESERVED_BYTES = 4096


def sbuf_budget() -> int:
    """SBUF bytes per partition the row-sized tiles may use on the current target (trn2:
    212984 usable, less RESERVED_BYTES)."""
    return nl.tile_size.sbuf_fmax_bytes - RESERVED_BYTES


def check_sbuf(name: str, width: int, bytes_per_element: float, kernel: str) -> None:
    """A kernel keeping rows of ``width`` elements on chip needs ``bytes_per_element * width`` bytes
    per partition (all its live tiles); refuse widths beyond the target's SBUF."""
    need = int(bytes_per_element * width)
    budget = sbuf_budget()
    if need > budget:
        limit = int(budget // bytes_per_element)
        raise NkilibError("sbuf", f"{kernel}: {name} of {width} elements per row needs {need} bytes per SBUF partition, "
                                  f"over the {budget} the target's SBUF leaves for them; this kernel takes at most {limit} elements per row")


def host_values(array):
    """The values of a host array (numpy, a CPU torch tensor), or None for device memory: the
    entry points check index values they can read without a device round trip."""
    if isinstance(array, np.ndarray):
        return array
    device = getattr(array, "device", None)
    if getattr(device, "type", None) == "cpu" and hasattr(array, "numpy"):
        return array.numpy()
    return None


def max_width(bytes_per_element: float) -> int:
    return int(sbuf_budget() // bytes_per_element)


def check_row_norm(x, weight, kernel: str, bytes_per_element) -> tuple[int, int, str]:
    """(rows, hidden, dtype) of a norm over x's last dim with a ``(hidden,)`` weight of x's dtype,
    whose SBUF need per element of a row is ``bytes_per_element(itemsize)``."""
    dt = check_float("x", x)
    rows, hidden = check_rows("x", x)
    check_shape("weight", weight, (hidden,))
    check_same_dtype("weight", weight, dt)
    check_sbuf("hidden size", hidden, bytes_per_element(DTYPE_BYTES[dt]), kernel)
    return rows, hidden, dt
