"""Shared helpers of the nki-lib tests: inputs rounded to the I/O dtype, and a comparison at the
tolerance of that dtype (fp32 tight; bf16 a few ulps, the output being rounded once to bf16)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16
DTYPES = [pytest.param(np.float32, id="fp32"), pytest.param(BF16, id="bf16")]
# Row counts around the 128-partition tiles: one row, a partial tile, more than two tiles.
SHAPES = [pytest.param((1, 64), id="1x64"), pytest.param((130, 200), id="130x200"),
          pytest.param((257, 4096), id="257x4096")]
TOLERANCES = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(BF16): (2e-2, 2e-2)}


def randn(shape, dtype=np.float32, seed=0, scale=1.0, shift=0.0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32).astype(dtype)


def f32(x) -> np.ndarray:
    return np.asarray(x).astype(np.float32)


def assert_close(actual, expected, dtype, rtol=None, atol=None, scale=1.0) -> None:
    """``actual`` (any dtype) against an fp32 reference; ``scale`` widens atol for outputs whose
    magnitude grows with the problem (sums over many rows)."""
    actual = np.asarray(actual)
    assert actual.shape == np.shape(expected), f"shape {actual.shape} != {np.shape(expected)}"
    got = f32(actual)
    assert np.isfinite(got).all(), "non-finite values in the result (unwritten memory reads as NaN)"
    d_rtol, d_atol = TOLERANCES[np.dtype(dtype)]
    np.testing.assert_allclose(got, f32(expected), rtol=rtol or d_rtol, atol=(atol or d_atol) * scale)
