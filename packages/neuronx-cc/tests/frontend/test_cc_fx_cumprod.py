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
