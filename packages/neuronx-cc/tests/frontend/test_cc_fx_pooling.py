"""Pooling and upsampling through the FX frontend as slices, gathers, elementwise max/add and
scatter-adds (torch-mlir's stablehlo.reduce_window has no graph form; the backwards have no
StableHLO lowering): each op's decomposition leaves no pooling op in the graph, and both executors
give CPU's results - max-pooling indices exactly."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler import compile_graph  # noqa: E402
from neuronxcc.compiler.testing import run_exact, run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import decompositions  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

aten = torch.ops.aten
X = torch.randint(0, 4, (2, 3, 7, 5), generator=torch.Generator().manual_seed(0)).float()  # ties
G = torch.randn(2, 3, 4, 3, generator=torch.Generator().manual_seed(1))
CASES = {
    "max_pool2d_with_indices": (lambda x: aten.max_pool2d_with_indices(x, [3, 2], [2, 2], [1, 1], [1, 1], True), (X,)),
    "max_pool2d_dilated": (lambda x: aten.max_pool2d_with_indices(x, [2, 2], [1, 2], [1, 0], [2, 1], False), (X,)),
    "adaptive_max_pool2d": (lambda x: aten.adaptive_max_pool2d(x, [4, 3]), (X,)),
    "avg_pool2d": (lambda x: aten.avg_pool2d(x, [3, 3], [2, 2], [1, 1], True, False, None), (X,)),
    "avg_pool2d_backward": (lambda g, x: aten.avg_pool2d_backward(g, x, [3, 3], [2, 2], [1, 1], True, True, None), (G, X)),
    "adaptive_avg_pool2d_backward": (lambda g, x: aten._adaptive_avg_pool2d_backward(g, x), (G, X)),
    "upsample_nearest2d_backward": (lambda g: aten.upsample_nearest2d_backward(g, [4, 3], [2, 3, 3, 2]), (G,)),
    "upsample_nearest1d_backward": (lambda g: aten.upsample_nearest1d_backward(g, [3], [2, 12, 2]), (G.flatten(1, 2),)),
    "upsample_bilinear2d_backward": (
        lambda g: aten.upsample_bilinear2d_backward(g, [4, 3], [2, 3, 3, 2], False, None, None), (G,)),
    "upsample_bilinear2d": (lambda x: aten.upsample_bilinear2d(x, [9, 4], True), (X,)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_decomposed_pooling_matches_cpu(name):
    fn, args = CASES[name]
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args)
    assert not any("pool" in str(n.target) or "upsample" in str(n.target) for n in gm.graph.nodes)
    graph = from_fx(gm, list(args))
    inputs = {v.name: a.numpy() for v, a in zip(graph.inputs, args)}
    expected = fn(*args)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for got in (run_exact(compile_graph(graph), inputs), run_fast(graph, inputs)):
        assert len(got) == len(expected)
        for out, want in zip(got.values(), expected):
            if want.dtype == torch.int64:
                np.testing.assert_array_equal(out, want.numpy())
            else:
                np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)
