"""scatter_reduce / index_reduce through the FX frontend (torch-mlir cannot lower them: scatter-adds
for sum/mean, a mask of index == position reduced for amax/amin/prod), on both executors."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler import compile_graph  # noqa: E402
from neuronxcc.compiler.testing import run_exact, run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import decompositions  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

g = torch.Generator().manual_seed(0)
X, SRC = torch.randn(5, 7, generator=g), torch.randn(3, 5, generator=g)
INDEX = torch.randint(0, 7, (3, 5), generator=g)
SRC[1, 2] = float("nan")


@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
    fn = lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self)  # noqa: E731
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(X, INDEX, SRC)
    assert not any("scatter_reduce" in str(n.target) for n in gm.graph.nodes)
    graph = from_fx(gm, [X, INDEX, SRC])
    inputs = {v.name: a.numpy() for v, a in zip(graph.inputs, (X, INDEX, SRC))}
    expected = fn(X, INDEX, SRC).numpy()
    for got in (run_exact(compile_graph(graph), inputs), run_fast(graph, inputs)):
        (out,) = got.values()
        np.testing.assert_allclose(out, expected, rtol=1e-6, atol=1e-6, equal_nan=True)


def test_index_reduce_is_a_scatter_reduce_with_the_index_repeated():
    source, index = torch.randn(4, 7, generator=g), torch.tensor([1, 4, 1, 0])
    fn = lambda x, i, s: x.index_reduce(0, i, s, "amax", include_self=False)  # noqa: E731
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(X, index, source)
    graph = from_fx(gm, [X, index, source])
    inputs = {v.name: a.numpy() for v, a in zip(graph.inputs, (X, index, source))}
    (out,) = run_exact(compile_graph(graph), inputs).values()
    np.testing.assert_array_equal(out, fn(X, index, source).numpy())
