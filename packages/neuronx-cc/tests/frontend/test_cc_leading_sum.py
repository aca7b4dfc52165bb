"""A float32 sum over a few leading dims imports as a chain of row adds: CPU's order, so CPU's
exact result, and no reduction with its reduced axis along the free dim."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.frontend import run_graph  # noqa: E402
from neuronxcc.frontend.fx import from_fx  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402


@pytest.mark.parametrize("shape,dims,rows", [((8, 128, 256), (0,), 8), ((4, 3, 512), (0, 1), 12)])
def test_leading_sum_is_row_adds_equal_to_cpu(shape, dims, rows):
    x = torch.randn(*shape) * 100
    graph = from_fx(make_fx(lambda t: t.sum(dims))(x))
    ops = [n.op for n in graph.nodes]
    assert "reduce" not in ops and ops.count("add") == rows - 1
    (out,) = run_graph(graph, x.numpy())
    np.testing.assert_array_equal(out, x.sum(dims).numpy())


@pytest.mark.parametrize("shape,dims", [((64, 256), (0,)), ((8, 16), (0,)), ((8, 128, 256), (2,))],
                         ids=["many_rows", "small_rows", "trailing_dim"])
def test_other_sums_stay_reductions(shape, dims):
    graph = from_fx(make_fx(lambda t: t.sum(dims))(torch.randn(*shape)))
    assert "reduce" in [n.op for n in graph.nodes]
