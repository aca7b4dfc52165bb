"""FX graphs from torch.compile (dynamo, AOTAutograd forward and backward) -> graph, with the
reference note's fixes (None outputs, decompositions, SDPA math path). The graphs run as a real
torch.compile backend (evaluated with neuron_sim.executor.fast.evaluate) and must match eager: outputs and
every gradient."""

import contextlib
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from neuronxcc.frontend import UnsupportedOp, decompositions, from_fx, insert_none_outputs, run_graph, sdpa_math  # noqa: E402
from torch._dynamo.backends.common import aot_autograd  # noqa: E402


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(16, 32), nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


class GPTBlock(nn.Module):
    def __init__(self, d=32, heads=4, sdpa=False):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
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
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class EmbeddingLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(20, 16)
        self.head = nn.Linear(16, 20)

    def forward(self, idx):
        return self.head(torch.tanh(self.tok(idx)))


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch._dynamo.reset()
    torch.manual_seed(0)
    yield
    torch._dynamo.reset()


def graph_backend(graphs: list, decompose=True):
    """A torch.compile backend that imports each AOT graph and runs it with neuron_sim.graph."""

    def compiler(kind):
        def compile_fn(gm, example_inputs):
            graph = from_fx(gm, example_inputs)
            graphs.append((kind, graph))

            def run(args):
                outs = run_graph(graph, *(a.detach() if isinstance(a, torch.Tensor) else a for a in args))
                return insert_none_outputs([torch.from_numpy(np.array(o)) for o in outs], graph.none_outputs)

            run._boxed_call = True
            return run

        return compile_fn

    return aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw"),
                        decompositions=decompositions() if decompose else None)


def _train_step_matches(model, x, decompose=True, math_sdpa=False, atol=2e-5):
    reference = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is None for g in reference.values())
    eager_out = model(x)
    eager_out.sum().backward()
    eager_grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)

    graphs = []
    compiled = torch.compile(model, backend=graph_backend(graphs, decompose))
    with sdpa_math() if math_sdpa else contextlib.nullcontext():
        out = compiled(x)
    out.sum().backward()
    torch.testing.assert_close(out, eager_out, atol=atol, rtol=atol)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, eager_grads[name], atol=atol, rtol=atol, msg=lambda m, n=name: f"grad of {n}: {m}")
    assert [k for k, _ in graphs] == ["fw", "bw"]
    return dict(graphs)


def test_mlp_forward_backward():
    graphs = _train_step_matches(MLP(), torch.randn(4, 16))
    # the input needs no gradient: the backward graph's None output for it was dropped and reported
    assert graphs["bw"].none_outputs and graphs["fw"].none_outputs == []
    assert [v.name for v in graphs["bw"].inputs][-1].startswith("tangents")


def test_mlp_backward_without_decompositions_is_retraced():
    # without torch-mlir's decomposition table aten.threshold_backward keeps an int scalar that does
    # not lower; from_fx re-traces with the table under the example inputs' fake mode
    _train_step_matches(MLP(), torch.randn(4, 16), decompose=False)


def test_gpt_block_forward_backward():
    graphs = _train_step_matches(GPTBlock(), torch.randn(2, 8, 32), atol=5e-5)
    assert sum(n.op == "dot_general" for n in graphs["bw"].nodes) >= 8
    # LayerNorm's decomposition computes the variance in float64: the graph computes it in float32
    assert all(v.type.dtype != "float64" for g in graphs.values() for n in g.nodes for v in n.outputs)


def test_gpt_block_sdpa_math_forward_backward():
    _train_step_matches(GPTBlock(sdpa=True), torch.randn(2, 8, 32), math_sdpa=True, atol=5e-5)


def test_embedding_forward_backward():
    graphs = _train_step_matches(EmbeddingLM(), torch.randint(0, 20, (2, 6)))
    # embedding backward: the rows' gradients accumulate into the table
    assert any(n.op == "index_add" for n in graphs["bw"].nodes)


def _capture(model, *inputs, math_sdpa=False):
    captured = {}

    def compiler(kind):
        def compile_fn(gm, example_inputs):
            captured[kind] = (gm, example_inputs)
            return gm

        return compile_fn

    compiled = torch.compile(model, backend=aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw"),
                                                         decompositions=decompositions()))
    with sdpa_math() if math_sdpa else contextlib.nullcontext():
        compiled(*inputs).sum().backward()
    return captured


def test_none_outputs_are_restored_on_the_callers_graph_module():
    gm, example = _capture(MLP(), torch.randn(4, 16))["bw"]
    before = gm.code
    graph = from_fx(gm, example)
    assert gm.code == before  # the caller's module still returns its Nones
    outputs = next(n for n in gm.graph.nodes if n.op == "output").args[0]
    assert [i for i, v in enumerate(outputs) if v is None] == graph.none_outputs
    assert len(graph.outputs) == len(outputs) - len(graph.none_outputs)


def test_fused_sdpa_backward_names_the_fix():
    captured = _capture(GPTBlock(sdpa=True), torch.randn(1, 4, 32))  # traced without sdpa_math()
    gm, example = captured["bw"]
    with pytest.raises(UnsupportedOp) as err:
        from_fx(gm, example)
    assert "_scaled_dot_product" in err.value.op and "backward" in err.value.op
    assert "sdpa_math" in str(err.value) and "SDPBackend.MATH" in str(err.value)


def test_dynamo_graph_is_retraced_to_aten():
    captured = {}

    def backend(gm, example_inputs):
        captured["gm"], captured["inputs"] = gm, example_inputs
        return gm

    model = GPTBlock().eval()
    x = torch.randn(1, 4, 32)
    torch.compile(model, backend=backend)(x)
    graph = from_fx(captured["gm"], captured["inputs"])
    with torch.no_grad():
        expected = model(x)
    args = [a.detach() for a in captured["inputs"]]
    (got,) = run_graph(graph, *args)
    np.testing.assert_allclose(got, expected.numpy(), atol=5e-5, rtol=5e-5)


def test_dynamo_graph_without_example_inputs():
    captured = {}

    def backend(gm, example_inputs):
        captured["gm"] = gm
        return gm

    torch.compile(MLP(), backend=backend)(torch.randn(2, 16))
    with pytest.raises(UnsupportedOp, match="example_inputs"):
        from_fx(captured["gm"])


def test_lowering_failure_names_the_torch_op():
    # a backward graph without decompositions and without example inputs cannot be re-traced:
    # the torch-mlir diagnostic surfaces as UnsupportedOp naming the op it could not legalize
    # (threshold_backward keeps an int scalar torch-mlir's contract check fails on first)
    captured = {}

    def compiler(kind):
        def compile_fn(gm, example_inputs):
            captured[kind] = gm
            return gm

        return compile_fn

    compiled = torch.compile(MLP(), backend=aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw")))
    compiled(torch.randn(4, 16)).sum().backward()
    with pytest.raises(UnsupportedOp) as err:
        from_fx(captured["bw"])
    assert err.value.op == "torch.aten.threshold_backward" and "torch-mlir cannot lower it" in str(err.value)
