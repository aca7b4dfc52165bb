"""A splat constant (torch-mlir writes erf's polynomial coefficients as full-shape dense constants)
imports as one scalar broadcast to its shape: no tensor of that size in the graph, its NEFF or
its hash, and the same values."""

import numpy as np
import pytest

pytest.importorskip("torch_mlir")

from neuronxcc.frontend import import_text, run_graph  # noqa: E402

T = "tensor<64x128xf32>"
TEXT = f"""func.func @main(%a: {T}) -> ({T}) {{
  %c = stablehlo.constant dense<-2.5> : {T}
  %d = stablehlo.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %0 = stablehlo.multiply %a, %c : {T}
  return %0 : {T}
}}
"""


def test_splat_constant_is_a_broadcast_scalar():
    graph = import_text(TEXT, source="t.mlir")
    sizes = [np.asarray(n.attrs["value"]).size for n in graph.nodes if n.op == "constant"]
    assert sizes and max(sizes) == 1, sizes  # the [64, 128] splat is one number
    assert any(n.op == "broadcast_in_dim" for n in graph.nodes)
    a = np.random.default_rng(0).standard_normal((64, 128)).astype(np.float32)
    (y,) = run_graph(graph, a)
    np.testing.assert_array_equal(y, a * np.float32(-2.5))
