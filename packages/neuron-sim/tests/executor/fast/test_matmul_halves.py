"""The fast executor computes the two halves of a large product (``graph/matmul.py``) at once
while a core is free: the definition's bits whether they run at once or one after the other."""

import numpy as np
import pytest
from neuron_sim.executor.fast import ops as fast_ops
from neuron_sim.executor.fast import spare_core
from neuron_sim.graph.matmul import matmul

SHAPES = [  # (nb, m, k, n): a transformer step's products, and odd ones
    (1, 1024, 256, 768), (1, 1024, 1024, 256), (1, 256, 1024, 1024), (32, 128, 64, 128),
    (32, 128, 128, 64), (1, 24, 4096, 300), (1, 8, 8192, 130), (1, 130, 33, 257), (3, 100, 300, 50),
]


def _operands(nb, m, k, n, transposed):
    rng = np.random.default_rng(nb * m + k * n)
    L = rng.standard_normal((nb, k, m) if transposed else (nb, m, k), dtype=np.float32)
    R = rng.standard_normal((nb, k, n), dtype=np.float32)
    return (L.transpose(0, 2, 1) if transposed else L), R


@pytest.mark.parametrize("nb,m,k,n", SHAPES)
@pytest.mark.parametrize("transposed", [False, True])
def test_halves_at_once_or_in_turn_give_the_definitions_bits(nb, m, k, n, transposed, monkeypatch):
    L, R = _operands(nb, m, k, n, transposed)
    expected = matmul(L, R)
    for free_core in (False, True):
        monkeypatch.setattr(spare_core, "available", lambda free_core=free_core: free_core)
        out = np.full((nb, m, n), np.nan, dtype=np.float32)
        fast_ops.matmul_into(L, R, out)
        assert np.array_equal(out.view(np.uint32), expected.view(np.uint32)), free_core
    np.testing.assert_allclose(expected, np.matmul(L.astype(np.float64), R.astype(np.float64)), rtol=1e-4, atol=1e-3)
