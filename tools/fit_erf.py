"""Fit the coefficients of neuron-sim's float32 erf (neuron_sim/isa/erf.py) and print them.

Two pieces, each a least-squares fit of the relative error over Chebyshev-spaced nodes, done in
float64 and then rounded to float32 one coefficient at a time from the highest power, refitting
the lower ones after each rounding (so the float32 rounding of one is absorbed by the rest):

* ``|x| < SPLIT``: erf(x) = x + x * P(x*x); P's constant term is fixed to float32(2/sqrt(pi) - 1).
* ``SPLIT <= |x| < 4``: erfc(x) = exp(-x*x) * Q(1 / (1 + x)).

    python tools/fit_erf.py
"""

from __future__ import annotations

import math

import numpy as np

SPLIT = 0.875
NEAR_DEGREE = 5
FAR_DEGREE = 7


def _nodes(lo: float, hi: float, n: int = 8000) -> np.ndarray:
    k = np.arange(n)
    return 0.5 * (lo + hi) + 0.5 * (hi - lo) * np.cos(np.pi * (k + 0.5) / n)


def _fit_rounded(y: np.ndarray, v: np.ndarray, degree: int, weight: np.ndarray, fixed: dict) -> np.ndarray:
    """float32 coefficients c_0..c_degree of sum c_k v^k ~ y (weighted least squares), highest first."""
    fixed = dict(fixed)
    while len(fixed) <= degree:
        free = [k for k in range(degree + 1) if k not in fixed]
        rest = y - sum(c * v**k for k, c in fixed.items())
        basis = np.stack([v**k for k in free], axis=1) * weight[:, None]
        solution, *_ = np.linalg.lstsq(basis, rest * weight, rcond=None)
        fixed[free[-1]] = float(np.float32(solution[-1]))
    return np.float32([fixed[k] for k in range(degree, -1, -1)])


def fit() -> tuple[np.ndarray, np.ndarray]:
    erf, erfc = np.vectorize(math.erf), np.vectorize(math.erfc)
    x = _nodes(1e-6, SPLIT)
    near = _fit_rounded(erf(x) / x - 1, x * x, NEAR_DEGREE, x / erf(x),
                        {0: float(np.float32(2 / math.sqrt(math.pi) - 1))})
    x = _nodes(SPLIT, 4.0)
    scaled = erfc(x) * np.exp(x * x)
    far = _fit_rounded(scaled, 1 / (1 + x), FAR_DEGREE, 1 / scaled, {})
    return near, far


if __name__ == "__main__":
    near, far = fit()
    print("_NEAR =", [float(c) for c in near])
    print("_FAR =", [float(c) for c in far])
