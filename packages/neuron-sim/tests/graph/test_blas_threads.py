"""The fast executor's matmuls run on one BLAS thread (restored after each call), and a large
product is computed as two halves: the same bits whether the halves run at once (a core is
free) or one after the other."""

import numpy as np
import pytest
from neuron_sim import spare_core
from neuron_sim.graph.blas import _CONTROLLER, SPLIT_MIN_MACS, _halves, matmul_into, one_blas_thread

SHAPES = [  # (nb, m, k, n): a transformer step's products, and odd ones
    (1, 1024, 256, 768), (1, 1024, 1024, 256), (1, 256, 1024, 1024), (32, 128, 64, 128),
    (32, 128, 128, 64), (1, 24, 4096, 300), (1, 8, 8192, 130), (1, 130, 33, 257), (3, 100, 300, 50),
]


def _blas_threads(controller):
    return [lib["num_threads"] for lib in controller.select(user_api="blas").info()]


def test_limit_applies_inside_and_is_restored():
    if _CONTROLLER is None:
        pytest.skip("no BLAS library threadpoolctl can control")
    before = _blas_threads(_CONTROLLER)
    with one_blas_thread():
        assert set(_blas_threads(_CONTROLLER)) == {1}
    assert _blas_threads(_CONTROLLER) == before


def _operands(nb, m, k, n, transposed):
    rng = np.random.default_rng(nb * m + k * n)
    L = rng.standard_normal((nb, k, m) if transposed else (nb, m, k), dtype=np.float32)
    R = rng.standard_normal((nb, k, n), dtype=np.float32)
    return (L.transpose(0, 2, 1) if transposed else L), R


@pytest.mark.parametrize("nb,m,k,n", SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_halves_at_once_or_in_turn_give_the_same_bits(nb, m, k, n, transposed, monkeypatch):
    L, R = _operands(nb, m, k, n, transposed)
    results = []
    for free_core in (False, True):
        monkeypatch.setattr(spare_core, "available", lambda free_core=free_core: free_core)
        out = np.full((nb, m, n), np.nan, dtype=np.float32)
        matmul_into(L, R, out)
        results.append(out)
    assert np.array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], np.matmul(L.astype(np.float64), R.astype(np.float64)), rtol=1e-4, atol=1e-3)


def test_which_products_are_split():
    assert _halves(1, 64, 64, 64) is None  # too small to be worth a hand-off
    assert _halves(32, 128, 64, 128)[0][0] == (slice(None, 16),)  # by batch
    (l1, _, o1), (l2, _, o2) = _halves(1, 1000, 300, 77)  # by rows, at a multiple of 16
    assert l1[1] == slice(None, 496) and l2[1] == slice(496, None) and o1 == l1
    (_, r1, o1), _ = _halves(1, 8, SPLIT_MIN_MACS, 130)  # few rows: by columns
    assert r1[2] == slice(None, 64) and o1 == r1
    assert _halves(1, 8, SPLIT_MIN_MACS, 8) is None
