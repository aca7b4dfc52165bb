"""Unsigned integer constants through torch-mlir's pipelines: the backend pipeline folds a
uint8 constant back into a ``torch.vtensor.literal`` it cannot legalize, so a compiled uint8
``zero_`` / ``fill_`` / ``full`` failed ("failed to legalize operation 'torch.vtensor.literal'")."""

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.frontend import decompositions, from_fx, run_graph  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402


def lowered(fn, *inputs):
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*inputs)
    return [torch.from_numpy(r.copy()) if hasattr(r, "copy") else r for r in run_graph(from_fx(gm), *inputs)]


@pytest.mark.parametrize("dtype", [torch.uint8, torch.int8, torch.bool, torch.float32])
@pytest.mark.parametrize("shape", [(0,), (3,), (2, 1, 5)])
@pytest.mark.parametrize("fn", [
    lambda x: torch.ops.aten.zero(x),  # zero_ after functionalization
    lambda x: torch.ops.aten.fill.Scalar(x, 1),
    lambda x: torch.full_like(x, 1),
    lambda x: (torch.zeros_like(x), x),
], ids=["zero", "fill", "full_like", "zeros_and_input"])
def test_constant_results_of_unsigned_dtypes(fn, shape, dtype):
    x = torch.ones(shape, dtype=dtype)
    got = lowered(fn, x)
    expected = fn(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    assert [(g.shape, g.dtype) for g in got] == [(e.shape, e.dtype) for e in expected]
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


def test_the_largest_uint8_constant_keeps_its_bits():
    (got,) = lowered(lambda x: torch.full_like(x, 255), torch.zeros(4, dtype=torch.uint8))
    assert got.tolist() == [255] * 4
