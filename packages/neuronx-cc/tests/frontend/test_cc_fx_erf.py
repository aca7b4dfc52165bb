"""erf stays one graph op through the FX import (the NeuronCore computes it as one ScalarE
activation) instead of the ~40-op polynomial torch-mlir's CHLO legalization expands it into."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
import torch.nn.functional as F  # noqa: E402
from neuronxcc.frontend import run_graph  # noqa: E402
from neuronxcc.frontend.fx import from_fx  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402


@pytest.mark.parametrize("fn", [torch.erf, F.gelu, lambda x: torch.erf(x * 0.5) * 2 + torch.tanh(x)],
                         ids=["erf", "gelu", "erf_in_a_chain"])
def test_erf_is_one_node_and_matches_torch(fn):
    x = torch.randn(6, 33) * 3
    graph = from_fx(make_fx(fn)(x))
    ops = [n.op for n in graph.nodes]
    assert ops.count("erf") == 1
    assert len(ops) <= 16, ops  # the polynomial alone was ~40 ops
    (out,) = run_graph(graph, x.numpy())
    np.testing.assert_allclose(out, fn(x).numpy(), rtol=1e-6, atol=1e-6)
