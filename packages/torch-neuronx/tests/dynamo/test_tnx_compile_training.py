"""torch.compile(backend="neuron") trains and infers like eager: a small GPT (dropout on) gives eager's
losses step for step, inference under no_grad gives eager's logits, compiled and eager parts mix."""

from __future__ import annotations

import torch
import torch_neuronx
from torch_neuronx.testing.gpt import GPT, GPTConfig, batches

CFG = GPTConfig(vocab=64, d_model=32, n_layers=2, n_heads=2, seq_len=8)


def _train(compiled: bool, steps: int = 4) -> list[float]:
    torch.manual_seed(0)
    model = GPT(CFG).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = torch.compile(model, backend="neuron") if compiled else model
    torch.manual_seed(1)
    losses = []
    for x, y in batches(CFG, 2, steps):
        loss = step(x.to("neuron"), y.to("neuron"))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def test_training_losses_match_eager_with_dropout():
    torch._dynamo.reset()
    torch_neuronx.reset_compile_metrics()
    compiled = _train(True)
    eager = _train(False)
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-5, atol=1e-5)
    assert compiled[0] != compiled[-1]  # it trained
    kinds = [g["kind"] for g in torch_neuronx.compile_metrics()["graphs"]]
    assert kinds.count("forward") == 1 and kinds.count("backward") == 1  # one graph each, no recompiles


def test_no_grad_inference_matches_eager():
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(CFG).to("neuron").eval()
    x, _ = next(batches(CFG, 2, 1))
    with torch.no_grad():
        expected = model(x.to("neuron")).cpu()
        got = torch.compile(model, backend="neuron")(x.to("neuron")).cpu()
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    assert torch_neuronx.compile_metrics()["graphs"][-1]["kind"] == "inference"


def test_compiled_block_inside_eager_model():
    """Only one block compiled: gradients flow through compiled and eager parts alike."""
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab=64, d_model=32, n_layers=2, n_heads=2, seq_len=8, dropout=0.0)).to("neuron")
    x, y = next(batches(CFG, 2, 1))
    loss = model(x.to("neuron"), y.to("neuron"))
    loss.backward()
    expected = {n: p.grad.cpu() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    model.blocks[1] = torch.compile(model.blocks[1], backend="neuron")
    loss2 = model(x.to("neuron"), y.to("neuron"))
    loss2.backward()
    torch.testing.assert_close(loss2.cpu(), loss.cpu(), rtol=1e-5, atol=1e-6)
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad.cpu(), expected[name.replace("._orig_mod", "")], rtol=1e-4, atol=1e-6)


def test_bf16_autocast_close_to_eager_autocast():
    torch._dynamo.reset()
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).to("neuron")
    x = torch.randn(4, 16).to("neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        expected = mlp(x)
        got = torch.compile(mlp, backend="neuron")(x)
    assert got.dtype == expected.dtype == torch.bfloat16
    torch.testing.assert_close(got.float().cpu(), expected.float().cpu(), rtol=2e-2, atol=2e-2)


def test_compiled_optimizer_step_matches_eager():
    """``torch.compile(opt.step)``: the foreach AdamW update as one NEFF, its step counters and bias
    corrections on the host (uploaded together), parameters as eager's."""

    def train(compiled: bool):
        torch._dynamo.reset()
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to("neuron")
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        step = torch.compile(opt.step, backend="neuron") if compiled else opt.step
        x = torch.randn(6, 8).to("neuron")
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            model(x).square().mean().backward()
            step()
        return [p.detach().cpu() for p in model.parameters()]

    torch_neuronx.reset_compile_metrics()
    compiled = train(True)
    assert torch_neuronx.compile_metrics()["graphs_compiled"] + torch_neuronx.compile_metrics()["cache_hits"] >= 1
    for got, expected in zip(compiled, train(False)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)
