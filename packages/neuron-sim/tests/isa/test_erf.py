"""The float32 erf behind ScalarE's erf/gelu activations and the graph-level erf: within 1.5 ulp
of the exact value everywhere, exact at the special values."""

import math

import numpy as np
from neuron_sim.isa.erf import erf


def _ulp_errors(x: np.ndarray) -> np.ndarray:
    exact = np.vectorize(math.erf)(x.astype(np.float64))
    ulp = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    ulp = np.maximum(ulp, float(np.spacing(np.float32(0))))
    return np.abs(erf(x).astype(np.float64) - exact) / ulp


def test_within_one_and_a_half_ulp_on_a_dense_grid():
    x = np.linspace(-4.5, 4.5, 900_001, dtype=np.float32)
    errors = _ulp_errors(x)
    assert errors.max() <= 1.5, x[errors.argmax()]
    assert np.mean(errors > 1.0) < 1e-3  # almost every value within 1 ulp


def test_tiny_and_subnormal_inputs_keep_their_accuracy():
    x = np.float32([1e-3, 3.9e-4, 1e-8, 1e-20, 1.2e-38, 1e-40, 1e-45])
    assert _ulp_errors(np.concatenate([x, -x])).max() <= 1.0


def test_special_values():
    got = erf(np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 10.0, -10.0, 3.95]))
    np.testing.assert_array_equal(got[:4], [0.0, -0.0, 1.0, -1.0])
    assert np.signbit(got[1]) and np.isnan(got[4])
    np.testing.assert_array_equal(got[5:], [1.0, -1.0, 1.0])
    assert got.dtype == np.float32


def test_odd_and_scalar_input():
    x = np.linspace(0, 5, 1001, dtype=np.float32)
    np.testing.assert_array_equal(erf(-x), -erf(x))
    assert erf(np.float32(0.5)) == erf(np.float32([0.5]))[0]
