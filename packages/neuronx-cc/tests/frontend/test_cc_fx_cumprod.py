"""cumprod through the FX frontend (torch-mlir cannot lower it: decomposed into log-step
products), compiled and on both executors, against torch."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler import compile_graph  # noqa: E402
from neuronxcc.compiler.testing import run_exact, run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import decompositions  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402


@pytest.mark.parametrize("shape,dim,dtype", [((5, 37), 1, torch.float32), ((37, 5), 0, torch.float32),
                                             ((3, 17), 1, torch.bfloat16), ((4, 9), 1, torch.int32), ((6,), 0, torch.bool)],
                         ids=str)
def test_cumprod(shape, dim, dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.rand(shape, generator=g) * 0.4 + 0.8) if dtype.is_floating_point else torch.randint(-3, 4, shape, generator=g)
    x = x.to(dtype)
    fn = (lambda t: torch.cumprod(t, dim, dtype=torch.int32)) if dtype == torch.int32 else (lambda t: torch.cumprod(t, dim))
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(x)
    graph = from_fx(gm, [x])
    inputs = {graph.inputs[0].name: (x.float() if dtype == torch.bfloat16 else x).numpy()}
    if dtype == torch.bfloat16:
        from neuron_sim import dtypes
        inputs = {k: dtypes.convert(v, "bfloat16") for k, v in inputs.items()}
    expected = fn(x).float().numpy()
    for got in (run_exact(compile_graph(graph), inputs), run_fast(graph, inputs)):
        (out,) = got.values()
        np.testing.assert_allclose(out.astype(np.float32), expected, rtol=1e-2 if dtype == torch.bfloat16 else 1e-6)


_INF, _NAN = float("inf"), float("nan")
_SPECIALS = [
    [0.0, 1e30, 1e30, 2.0],            # fuzz-40: the scan made 1e30 * 1e30 = inf before meeting the 0
    [1e30, 1e30, 0.0, 5.0],            # past fp32's range then 0: CPU's double product is 0, bfloat16's NaN
    [1e30, 1e30, 1e-30, 1e-30],        # back into range: finite for float32, inf then NaN... as CPU
    [_INF, 0.0, 2.0], [0.0, -_INF, 3.0], [_NAN, 1.0, 0.0], [-_INF, -2.0, 0.5],
    [-0.0, 2.0, -3.0, 0.0],            # signs of zeros
    [1e-30, 1e-30, 1e30, 1e30], [1e-45, 1e-45, 1e30, 0.0],
    [1e20] * 12 + [0.0] + [1e-20] * 5,
    [0.9] * 200 + [1.1] * 57,
]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("values", _SPECIALS, ids=lambda v: f"{v[:3]}...{len(v)}")
def test_cumprod_has_cpus_specials(values, dtype):
    """CPU multiplies left to right (float32 in double, 16-bit floats in float32): zeros stay zero,
    inf and NaN appear where its partial products make them."""
    x = torch.tensor(values, dtype=dtype).reshape(1, -1).expand(2, -1).contiguous()
    fn = lambda t: torch.cumprod(t, 1)  # noqa: E731
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(x)
    graph = from_fx(gm, [x])
    from neuron_sim import dtypes
    inputs = {graph.inputs[0].name: dtypes.convert(x.float().numpy(), "bfloat16") if dtype == torch.bfloat16 else x.numpy()}
    expected = fn(x).float().numpy()
    for got in (run_exact(compile_graph(graph), inputs), run_fast(graph, inputs)):
        (out,) = got.values()
        out = out.astype(np.float32)
        np.testing.assert_allclose(out, expected, rtol=1e-2 if dtype == torch.bfloat16 else 1e-5, atol=0)
        assert (np.signbit(out) == np.signbit(expected))[~np.isnan(expected)].all(), (out, expected)
