"""Convolutions through the FX frontend as im2col matrix products (torch-mlir's
stablehlo.convolution has no graph form): forward and backward of direct and transposed
convolutions, 1d/2d/3d, on both executors against CPU."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler import compile_graph  # noqa: E402
from neuronxcc.compiler.testing import run_exact, run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import decompositions  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

# (input shape, out channels, kernel, stride, padding, dilation, groups, transposed, output_padding)
CASES = {
    "1d-strided-padded": ((2, 3, 9), 4, (3,), (2,), (1,), (1,), 1, False, (0,)),
    "2d-dilated-grouped": ((2, 4, 7, 8), 6, (3, 2), (2, 1), (1, 0), (1, 2), 2, False, (0, 0)),
    "2d-depthwise-batch-1": ((1, 4, 5, 5), 4, (3, 3), (1, 1), (1, 1), (1, 1), 4, False, (0, 0)),
    "2d-kernel-larger-than-input": ((1, 2, 2, 2), 3, (5, 5), (1, 1), (3, 3), (1, 1), 1, False, (0, 0)),
    "3d": ((2, 2, 3, 4, 5), 3, (2, 2, 3), (1, 2, 1), (0, 1, 1), (1, 1, 2), 1, False, (0, 0, 0)),
    "2d-transposed-grouped": ((2, 4, 5, 6), 6, (3, 3), (2, 2), (1, 0), (1, 1), 2, True, (1, 0)),
    "1d-transposed-cropping": ((1, 3, 4), 2, (5,), (3,), (5,), (2,), 1, True, (2,)),
}


def _run(fn, args):
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args)
    assert not any("convolution" in str(n.target) for n in gm.graph.nodes)
    graph = from_fx(gm, list(args))
    inputs = {v.name: a.numpy() for v, a in zip(graph.inputs, args)}
    expected = fn(*args)
    expected = expected if isinstance(expected, (tuple, list)) else [expected]
    for got in (run_exact(compile_graph(graph), inputs), run_fast(graph, inputs)):
        assert len(got) == len(expected)
        for out, want in zip(got.values(), expected):
            np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-5)


def _operands(case, seed=0):
    shape, out_channels, kernel, stride, padding, dilation, groups, transposed, output_padding = case
    g = torch.Generator().manual_seed(seed)
    channels = shape[1]
    w_shape = (channels, out_channels // groups) if transposed else (out_channels, channels // groups)
    x, w = torch.randn(shape, generator=g), torch.randn(w_shape + kernel, generator=g)
    b = torch.randn(out_channels, generator=g)
    return x, w, b, (stride, padding, dilation, transposed, output_padding, groups)


@pytest.mark.parametrize("name", list(CASES))
def test_convolution_forward(name):
    x, w, b, params = _operands(CASES[name])
    _run(lambda x, w, b: torch.ops.aten.convolution(x, w, b, *params), (x, w, b))


@pytest.mark.parametrize("name", list(CASES))
def test_convolution_backward(name):
    x, w, b, params = _operands(CASES[name])
    grad = torch.randn(torch.ops.aten.convolution(x, w, b, *params).shape, generator=torch.Generator().manual_seed(1))
    stride, padding, dilation, transposed, output_padding, groups = params

    def backward(grad, x, w):
        return torch.ops.aten.convolution_backward(grad, x, w, [b.shape[0]], stride, padding, dilation, transposed,
                                                   output_padding, groups, [True, True, True])

    _run(backward, (grad, x, w))


def test_backward_of_only_the_input_gives_no_weight_gradient():
    x, w, b, (stride, padding, dilation, transposed, output_padding, groups) = _operands(CASES["1d-strided-padded"])
    grad = torch.ones(2, 4, 5)
    gm = make_fx(lambda g, x, w: torch.ops.aten.convolution_backward(
        g, x, w, None, stride, padding, dilation, transposed, output_padding, groups, [True, False, False]),
        decomposition_table=decompositions(), tracing_mode="fake")(grad, x, w)
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    assert outputs[1] is None and outputs[2] is None and outputs[0] is not None
