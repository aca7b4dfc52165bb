"""The element types a NeuronCore stores, and the hardware's conversion rules between them.

Engines compute in fp32; a result is rounded to nearest even when written to a narrower float and
saturated (after rounding) when written to an integer type. NaN converts to 0 in integer types.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

from .errors import ValidationError

# name -> numpy dtype. Names follow nki.language.
_DTYPES: dict[str, np.dtype] = {
    "bool": np.dtype(np.bool_),
    "uint8": np.dtype(np.uint8),
    "int8": np.dtype(np.int8),
    "uint16": np.dtype(np.uint16),
    "int16": np.dtype(np.int16),
    "uint32": np.dtype(np.uint32),
    "int32": np.dtype(np.int32),
    "float16": np.dtype(np.float16),
    "bfloat16": np.dtype(ml_dtypes.bfloat16),
    "float32": np.dtype(np.float32),
    "tfloat32": np.dtype(np.float32),  # stored as fp32; TensorE reads 10 mantissa bits
    "float8_e4m3": np.dtype(ml_dtypes.float8_e4m3),
    "float8_e4m3fn": np.dtype(ml_dtypes.float8_e4m3fn),
    "float8_e5m2": np.dtype(ml_dtypes.float8_e5m2),
    "float8_e8m0fnu": np.dtype(ml_dtypes.float8_e8m0fnu),
    # HBM-only types: accepted in tensor tables and DMA (framework tensors live there),
    # never by a compute engine.
    "int64": np.dtype(np.int64),
    "float64": np.dtype(np.float64),
}
_BY_NUMPY = {v: k for k, v in reversed(list(_DTYPES.items()))}

HBM_ONLY = frozenset({"int64", "float64"})
FLOAT_TYPES = frozenset(
    {"float16", "bfloat16", "float32", "tfloat32", "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float64"}
)
FP8_TYPES = frozenset({"float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"})
INT_TYPES = frozenset({"uint8", "int8", "uint16", "int16", "uint32", "int32", "int64"})


def dtype_name(dtype) -> str:
    """Canonical name of a dtype given as a name, numpy dtype, or anything numpy understands."""
    if isinstance(dtype, str):
        if dtype in _DTYPES:
            return dtype
        aliases = {"bf16": "bfloat16", "fp32": "float32", "fp16": "float16", "bool_": "bool", "tf32": "tfloat32"}
        if dtype in aliases:
            return aliases[dtype]
    try:
        np_dtype = np.dtype(dtype)
    except TypeError:
        np_dtype = None
    if np_dtype is not None and np_dtype in _BY_NUMPY:
        return _BY_NUMPY[np_dtype]
    raise ValidationError("dtype.unsupported", f"unsupported dtype {dtype!r}; supported: {sorted(_DTYPES)}")


def to_numpy(dtype) -> np.dtype:
    return _DTYPES[dtype_name(dtype)]


def itemsize(dtype) -> int:
    return to_numpy(dtype).itemsize


def is_float(dtype) -> bool:
    return dtype_name(dtype) in FLOAT_TYPES


def is_int(dtype) -> bool:
    return dtype_name(dtype) in INT_TYPES


def _int_bounds(np_dtype: np.dtype) -> tuple[int, int]:
    info = np.iinfo(np_dtype)
    return int(info.min), int(info.max)


def convert(values: np.ndarray, dtype) -> np.ndarray:
    """Convert computed values to ``dtype`` the way an engine's write port does.

    Floats: round to nearest even (ml_dtypes and numpy casts are RNE), via fp32 for the narrow
    types; fp8 types saturate to their largest finite value instead of overflowing to inf/NaN,
    float16/bfloat16 overflow to inf. Integers: round half to even, then saturate; NaN becomes 0.
    bool: nonzero is True.
    """
    name = dtype_name(dtype)
    target = _DTYPES[name]
    if values.dtype == target:
        return values
    if name == "bool":
        return values != 0
    if name in INT_TYPES:
        if values.dtype.kind in "iub":
            lo, hi = _int_bounds(target)
            return np.clip(values, lo, hi).astype(target) if values.dtype.kind != "b" else values.astype(target)
        as_float = np.rint(values.astype(np.float64, copy=False))
        lo, hi = _int_bounds(target)
        as_float = np.nan_to_num(np.clip(as_float, lo, hi), nan=0.0)
        if target.itemsize == 8:  # float64(2**63 - 1) is 2**63, which astype would wrap to -2**63
            top = as_float >= float(hi)
            return np.where(top, hi, np.where(top, 0.0, as_float).astype(target)).astype(target)
        return as_float.astype(target)
    if name in FP8_TYPES and name != "float8_e8m0fnu":
        finite_max = float(ml_dtypes.finfo(target).max)
        src = values.astype(np.float32, copy=False)
        # Saturate: anything beyond the largest finite value (including inf, and values that would
        # round up past it) becomes +-max; clipping before the RNE cast is equivalent to rounding
        # first and saturating after, because max itself is representable. NaN stays NaN.
        clipped = np.clip(src, -finite_max, finite_max)
        return clipped.astype(target)
    if name in ("tfloat32", "float32"):
        with np.errstate(over="ignore"):
            return values.astype(np.float32)
    if name == "float64":
        return values.astype(target)
    # Narrow floats are written from the engines' fp32 results: round to fp32 first, so every
    # source dtype takes the same path (numpy rounds float64->float16 directly, ml_dtypes goes
    # through fp32 for bfloat16; without this the two would disagree on double-rounding cases).
    with np.errstate(over="ignore"):  # overflow to inf is the defined result for these types
        return values.astype(np.float32, copy=False).astype(target)


def compute_view(values: np.ndarray) -> np.ndarray:
    """Values as the engines see them: fp32 for floats and small ints (engines compute in fp32)."""
    if values.dtype == np.float32:
        return values
    return values.astype(np.float32)


def all_names() -> list[str]:
    return list(_DTYPES)
