"""The fast executor's matmuls run on one BLAS thread, with the same results, and leave the
process's BLAS thread count as it was."""

import numpy as np
import pytest
from neuron_sim.graph.blas import _controller, one_blas_thread


def _blas_threads(controller):
    return [lib["num_threads"] for lib in controller.select(user_api="blas").info()]


def test_limit_applies_inside_and_is_restored():
    controller = _controller()
    if controller is None:
        pytest.skip("no BLAS library threadpoolctl can control")
    before = _blas_threads(controller)
    with one_blas_thread():
        assert set(_blas_threads(controller)) == {1}
    assert _blas_threads(controller) == before


@pytest.mark.parametrize("a,b", [((32, 128, 64), (32, 64, 128)), ((1024, 768), (768, 256)), ((8, 4096), (4096, 300))])
def test_results_do_not_depend_on_the_thread_count(a, b):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(a, dtype=np.float32), rng.standard_normal(b, dtype=np.float32)
    expected = np.matmul(x, y)
    with one_blas_thread():
        assert np.array_equal(np.matmul(x, y), expected)
