"""NKI's dtypes (by the names ``nki.language`` spells them), their limits, and compile-time casts."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from neuron_sim import dtypes as _sim_dtypes

DType = str  # nki.language's dtype values are their names (legacy code may pass numpy dtypes too)

bool_ = "bool"
int8, int16, int32 = "int8", "int16", "int32"
uint8, uint16, uint32 = "uint8", "uint16", "uint32"
float16, bfloat16, float32, tfloat32 = "float16", "bfloat16", "float32", "tfloat32"
float8_e4m3, float8_e4m3fn, float8_e5m2, float8_e8m0fnu = "float8_e4m3", "float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"


class _Limits:
    """``nl.fp32.min`` / ``nl.bfp16.min``: the most negative value a dtype holds, as a number a
    kernel passes as an immediate (legacy kernels fill masked-out elements with it)."""

    def __init__(self, name: str, min: float):  # noqa: A002 - NKI's name
        self.name, self.min = name, min

    def __repr__(self) -> str:
        return f"nl.{self.name}(min={self.min})"


fp32 = _Limits("fp32", float(np.finfo(np.float32).min))  # bit pattern 0xff7fffff
bfp16 = _Limits("bfp16", float("-inf"))  # bit pattern 0xff80, the most negative bfloat16


def finfo(dtype):
    """Machine limits of a floating-point dtype (``min``, ``max``, ``eps``, ``tiny``, ``bits``),
    as ``numpy.finfo`` gives them (``ml_dtypes.finfo`` for bfloat16 and the float8 types)."""
    np_dtype = _sim_dtypes.to_numpy(dtype)
    return ml_dtypes.finfo(np_dtype) if np_dtype.type.__module__ == "ml_dtypes" else np.finfo(np_dtype)


def static_cast(input_data, dtype):
    """A compile-time value (a scalar or a host array) cast to ``dtype``, rounding as the dtype does."""
    value = np.asarray(input_data).astype(_sim_dtypes.to_numpy(dtype))
    return value.item() if value.ndim == 0 else value
