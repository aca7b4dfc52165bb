"""Values of fuzz programs: dtypes, element strategies and their source literals.

Every value a program uses is written into the program as a literal, so a printed program is
the whole reproducer. Element strategies mix small values (ties, exact arithmetic) with the
edges where devices go wrong: integers past 2**24 (float32's exact range) and 2**53 (float64's),
each dtype's extremes, NaN, +-inf, -0.0 and subnormals.
"""

from __future__ import annotations

import math

import torch
from hypothesis import strategies as st

DTYPES = {
    "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "int64": torch.int64, "int32": torch.int32, "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {dtype: name for name, dtype in DTYPES.items()}


def dtype_source(dtype: torch.dtype) -> str:
    return f"torch.{DTYPE_NAMES[dtype]}"


def is_float(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point


def is_int(dtype: torch.dtype) -> bool:
    return not dtype.is_floating_point and dtype != torch.bool


def int_range(dtype: torch.dtype) -> tuple[int, int]:
    info = torch.iinfo(dtype)
    return info.min, info.max


# --- elements --------------------------------------------------------------------------------------

_SMALL_FLOATS = st.sampled_from([0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -4.0, 1.5, 0.25, -0.75])


def _float_elements(dtype: torch.dtype, regime: str):
    info = torch.finfo(dtype)
    special = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0, info.max, -info.max, info.tiny,
                               info.smallest_normal / 4, 2.0 ** 24, 2.0 ** 24 + 2, -(2.0 ** 25)])
    normal = st.floats(-10, 10, width=32)
    if regime == "small":
        return _SMALL_FLOATS
    if regime == "normal":
        return st.one_of(normal, _SMALL_FLOATS)
    if regime == "wide":
        return st.one_of(st.floats(-info.max, info.max, width=32), normal)
    return st.one_of(special, normal, _SMALL_FLOATS)  # "special"


def _int_elements(dtype: torch.dtype, regime: str):
    lo, hi = int_range(dtype)
    small = st.integers(max(lo, -8), min(hi, 8))
    if regime == "small":
        return small
    edges = [lo, hi, lo + 1, hi - 1, 0, -1 if lo < 0 else 1]
    for base in (2 ** 24, 2 ** 31, 2 ** 53, 2 ** 40):
        for k in (-3, -1, 0, 1, 3):
            edges += [base + k, -(base + k)]
    edges = sorted({v for v in edges if lo <= v <= hi})
    if regime == "edge":
        return st.one_of(st.sampled_from(edges), small)
    return st.one_of(st.integers(lo, hi), st.sampled_from(edges), small)  # "full"


REGIMES = {"float": ("small", "normal", "wide", "special"), "int": ("small", "edge", "full"), "bool": ("any",)}


def regime_kind(dtype: torch.dtype) -> str:
    return "float" if is_float(dtype) else "int" if is_int(dtype) else "bool"


def elements(dtype: torch.dtype, regime: str):
    """Elements of ``dtype`` drawn as Python numbers exactly representable in it."""
    if dtype == torch.bool:
        return st.booleans()
    if is_int(dtype):
        return _int_elements(dtype, regime)
    return _float_elements(dtype, regime).map(lambda v: round_to(v, dtype))


def round_to(value: float, dtype: torch.dtype) -> float:
    """``value`` rounded to ``dtype`` (round to nearest even, overflow to inf), as a Python float."""
    return torch.tensor(value, dtype=torch.float64).to(dtype).item()


@st.composite
def scalars(draw, dtype: torch.dtype):
    """A Python scalar of ``dtype``'s kind, from any of its regimes."""
    regime = draw(st.sampled_from(REGIMES[regime_kind(dtype)]))
    return draw(elements(dtype, regime))


# --- literals --------------------------------------------------------------------------------------


def literal(value) -> str:
    """Source text of a Python scalar, list or tuple (floats exact, NaN and inf spelled out)."""
    if isinstance(value, bool) or value is None:
        return repr(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, (int, str)):
        return repr(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(literal(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise TypeError(f"no literal for {value!r}")


def make_tensor(values: list, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    """A CPU tensor of ``values`` (flat, row-major): what ``torch.tensor(values, dtype=dtype)``
    of the printed program makes (floats go through float64, which holds each value exactly)."""
    if is_float(dtype):
        return torch.tensor(values, dtype=torch.float64).to(dtype).reshape(shape)
    return torch.tensor(values, dtype=dtype).reshape(shape)
