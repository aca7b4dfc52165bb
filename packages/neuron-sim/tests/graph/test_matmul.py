"""dot_general's product: one BLAS thread (restored after each call), and large products as two
halves chosen from the shapes alone, so the bits do not depend on the host."""

import numpy as np
import pytest
from neuron_sim.graph.matmul import SPLIT_MIN_MACS, blas_controllable, blas_thread_counts, matmul_into, one_blas_thread


def test_limit_applies_inside_and_is_restored():
    if not blas_controllable():
        pytest.skip("no BLAS library threadpoolctl can control")
    before = blas_thread_counts()
    with one_blas_thread():
        assert set(blas_thread_counts()) == {1}
    assert blas_thread_counts() == before


def _broadcast_ones(nb, m, k, n):
    """All-ones operands of the given shape without the memory (stride 0 along k)."""
    L = np.lib.stride_tricks.as_strided(np.ones((nb, m, 1), np.float32), (nb, m, k), (4 * m, 4, 0))
    R = np.lib.stride_tricks.as_strided(np.ones((nb, 1, n), np.float32), (nb, k, n), (4 * n, 0, 4))
    return L, R


@pytest.mark.parametrize("nb,m,k,n,pieces", [
    (1, 64, 64, 64, None),  # too small to be worth a hand-off: one product
    (32, 128, 64, 128, [((0, 16), (0, 128), (0, 128)), ((16, 32), (0, 128), (0, 128))]),  # by batch
    (1, 1000, 300, 77, [((0, 1), (0, 496), (0, 77)), ((0, 1), (496, 1000), (0, 77))]),  # by rows, at a multiple of 16
    (1, 8, SPLIT_MIN_MACS, 130, [((0, 1), (0, 8), (0, 64)), ((0, 1), (0, 8), (64, 130))]),  # few rows: by columns
    (1, 8, SPLIT_MIN_MACS, 8, None),  # nothing to split
])
def test_which_products_are_two_halves(nb, m, k, n, pieces):
    L, R = _broadcast_ones(nb, m, k, n)
    out = np.zeros((nb, m, n), np.float32)
    written = []

    def run_halves(first, second):
        for half in (first, second):
            before = out.copy()
            half()
            changed = np.argwhere(out != before)
            written.append(tuple((int(lo), int(hi) + 1) for lo, hi in zip(changed.min(0), changed.max(0))))

    matmul_into(L, R, out, run_halves)
    assert (written or None) == (None if pieces is None else [tuple(p) for p in pieces])
    np.testing.assert_array_equal(out, np.full((nb, m, n), float(k), np.float32))

