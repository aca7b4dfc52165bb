"""Real torch-mlir StableHLO of whole models, imported and evaluated as graphs against torch."""

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from neuronxcc.frontend import import_module, import_text, run_graph  # noqa: E402
from torch_mlir import fx  # noqa: E402


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class GPTBlock(nn.Module):
    def __init__(self, d=32, heads=4, sdpa=False, approximate="none"):
        super().__init__()
        self.heads, self.sdpa, self.approximate = heads, sdpa, approximate
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = q @ k.transpose(-2, -1) / math.sqrt(C // self.heads)
            mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate=self.approximate))


class Embedder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok, self.pos = nn.Embedding(50, 16), nn.Embedding(8, 16)
        self.head = nn.Linear(16, 50, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        h = self.tok(idx) + self.pos(pos)
        logits = self.head(h)
        return logits, logits.argmax(-1), torch.index_select(self.tok.weight, 0, idx[0])


def _check(model, *inputs, atol=2e-5, rtol=2e-5, via_text=False):
    module = fx.export_and_import(model, *inputs, output_type="stablehlo")
    graph = import_text(str(module), source="model.mlir") if via_text else import_module(module)
    with torch.no_grad():
        expected = model(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = run_graph(graph, *(i.numpy() for i in inputs))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.shape == tuple(e.shape)
        np.testing.assert_allclose(g, e.numpy(), atol=atol, rtol=rtol)
    return graph


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.mark.parametrize("via_text", [False, True])
def test_mlp(via_text):
    graph = _check(MLP().eval(), torch.randn(4, 16), via_text=via_text)
    ops = [n.op for n in graph.nodes]
    assert ops.count("dot_general") == 2 and "maximum" in ops
    # the weights' transposes fold into constants, addmm's alpha/beta scaling by 1 disappears
    assert "transpose" not in ops and "multiply" not in ops


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gpt_block_explicit_attention(approximate):
    graph = _check(GPTBlock(approximate=approximate).eval(), torch.randn(2, 8, 32))
    ops = {n.op for n in graph.nodes}
    assert {"dot_general", "reduce", "exp", "rsqrt", "select"} <= ops


def test_gpt_block_sdpa():
    _check(GPTBlock(sdpa=True).eval(), torch.randn(2, 8, 32))


def test_gpt_block_sdpa_from_text():
    _check(GPTBlock(sdpa=True).eval(), torch.randn(1, 4, 32), via_text=True)


def test_embedding_lookup():
    graph = _check(Embedder().eval(), torch.randint(0, 50, (2, 8)))
    ops = [n.op for n in graph.nodes]
    # the position embedding of a constant arange folds into a constant; token lookups stay gathers
    assert ops.count("gather") == 2 and "argmax" in ops


def test_graph_survives_serialization():
    model = MLP().eval()
    x = torch.randn(4, 16)
    graph = import_module(fx.export_and_import(model, x, output_type="stablehlo"))
    from neuron_sim.graph import Graph

    again = Graph.from_dict(graph.to_dict())
    np.testing.assert_allclose(run_graph(again, x.numpy())[0], model(x).detach().numpy(), atol=2e-5)


def test_nodes_carry_model_source_lines():
    graph = import_module(fx.export_and_import(MLP().eval(), torch.randn(4, 16), output_type="stablehlo"))
    locations = {n.location for n in graph.nodes if n.op == "dot_general"}
    assert all(loc and ("test_cc_import_models.py" in loc or "linear.py" in loc) for loc in locations), locations


def test_text_locations_are_mlir_lines():
    module = fx.export_and_import(MLP().eval(), torch.randn(4, 16), output_type="stablehlo")
    text = str(module)  # printed without debug info: locations become positions in this text
    graph = import_text(text, source="mlp.mlir")
    dot = next(n for n in graph.nodes if n.op == "dot_general")
    file, line, _ = dot.location.rsplit(":", 2)
    assert file == "mlp.mlir" and "stablehlo.dot_general" in text.splitlines()[int(line) - 1]
