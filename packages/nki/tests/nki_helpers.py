"""Shared helpers of the nki tests: inputs, numpy references in fp32/bf16, and checks on
validation errors (rule id, offending value, kernel file:line)."""

from __future__ import annotations

import inspect

import ml_dtypes
import numpy as np
import pytest

BF16 = ml_dtypes.bfloat16

# The two dtypes every kernel test runs in.
DTYPES = [pytest.param(np.float32, id="fp32"), pytest.param(BF16, id="bf16")]


def rand(shape, dtype=np.float32, seed=0, low=-1.0, high=1.0) -> np.ndarray:
    """Uniform random input already rounded to ``dtype``."""
    rng = np.random.default_rng(seed)
    return rng.uniform(low, high, size=shape).astype(np.float32).astype(dtype)


def f32(x: np.ndarray) -> np.ndarray:
    """The fp32 values of a (possibly bf16) array: references compute from the rounded inputs."""
    return np.asarray(x).astype(np.float32)


# The hardware computes in fp32 and rounds on write. An fp32 result is compared tightly; a bf16
# result carries one rounding of at most 2^-8 relative (plus any bf16 intermediates the kernel
# stores, each another rounding), so compare at a few bf16 ulps.
TOLERANCES = {np.dtype(np.float32): (2e-5, 2e-5), np.dtype(BF16): (3e-2, 3e-2)}


def assert_close(actual, expected, dtype=None, rtol=None, atol=None) -> None:
    actual = np.asarray(actual)
    dtype = np.dtype(dtype if dtype is not None else actual.dtype)
    default_rtol, default_atol = TOLERANCES.get(dtype, (1e-5, 1e-5))
    assert actual.shape == np.shape(expected), f"shape {actual.shape} != {np.shape(expected)}"
    assert not np.isnan(f32(actual)).any(), "result has NaNs (unwritten or uninitialized data)"
    np.testing.assert_allclose(f32(actual), f32(expected), rtol=rtol if rtol is not None else default_rtol,
                               atol=atol if atol is not None else default_atol)


# --- numpy references ------------------------------------------------------------------------
def softmax_ref(x):
    x = f32(x)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def rmsnorm_ref(x, g, eps=1e-6):
    x, g = f32(x), f32(g)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * g


def layernorm_ref(x, gamma, beta, eps=1e-5):
    x = f32(x)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * f32(gamma) + f32(beta)


def causal_attention_ref(q, k, v, scale=None):
    q, k, v = f32(q), f32(k), f32(v)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = (q @ k.T) * scale
    s = np.where(np.tril(np.ones(s.shape, bool)), s, -np.inf)
    return softmax_ref(s) @ v


# --- validation errors -------------------------------------------------------------------------
def line_of(marker: str, path: str) -> int:
    """Line number of the statement tagged ``# marker`` in ``path`` (exactly one such line)."""
    with open(path) as f:
        tagged = [i + 1 for i, text in enumerate(f) if text.rstrip().endswith(f"# {marker}")]
    assert len(tagged) == 1, f"marker {marker!r} must tag exactly one line in {path}, found lines {tagged}"
    return tagged[0]


def check_error(err, rule: str, *values, marker: str | None = None, path: str | None = None, line: int | None = None):
    """``err`` names ``rule``, every value in ``values``, and the kernel's file:line."""
    assert getattr(err, "rule", None) == rule, f"rule {getattr(err, 'rule', None)!r} != {rule!r}: {err}"
    text = str(err)
    assert f"[{rule}]" in text, text
    for v in values:
        assert str(v) in text, f"{v!r} not in message: {text}"
    if marker is not None:
        path = path or inspect.stack()[1].filename
        line = line_of(marker, path)
    if path is not None:
        assert f"{path}:{line}" in text, f"{path}:{line} not in message: {text}"
