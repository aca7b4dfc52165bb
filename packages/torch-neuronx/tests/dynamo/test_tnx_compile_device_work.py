"""What a compiled graph puts on the device besides its NEFF: dropout masks are computed in the
NEFF from keys (seed, offset) reserved from the device generator as eager reserves them, the keys
uploaded in one copy per call, nothing through the CPU fallback; an argument a graph mutates (an optimizer step) is written by the NEFF
in place when that is safe, else copied in after the launch - with eager's values either way."""

from __future__ import annotations

import contextlib

import torch
import torch_neuronx
from tnx_helpers import op_records
from torch_neuronx.testing.gpt import GPT, GPTConfig, batches


def _train(compiled: bool, steps: int = 3):
    cfg = GPTConfig(vocab=64, d_model=32, n_layers=2, n_heads=2, seq_len=8)
    torch._dynamo.reset()
    torch.manual_seed(0)
    model = GPT(cfg).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    step = torch.compile(model, backend="neuron") if compiled else model
    opt_step = torch.compile(opt.step, backend="neuron") if compiled else opt.step
    torch.manual_seed(1)
    losses, records = [], []
    for k, (x, y) in enumerate(batches(cfg, 2, steps)):
        x, y = x.to("neuron"), y.to("neuron")
        with op_records() if k == steps - 1 else contextlib.nullcontext([]) as recs:
            loss = step(x, y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt_step()
        records += recs
        losses.append(loss.item())
    return losses, records, [p.detach().cpu() for p in model.parameters()], model


def test_compiled_train_step_computes_masks_in_the_neff_and_updates_params_in_place():
    compiled, records, params, model = _train(True)
    eager, _, eager_params, _ = _train(False)
    torch.testing.assert_close(torch.tensor(compiled), torch.tensor(eager), rtol=1e-5, atol=1e-5)
    for got, expected in zip(params, eager_params):
        torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)  # compiled fwd/bwd rounding
    kinds = [(r.name, r.task_kind) for r in records]
    assert not [k for k in kinds if k[1] == "cpu_fallback"], kinds  # no bernoulli_ through the fallback
    assert not [k for k in kinds if k[0] == "copy_d2d"], kinds  # no parameter/state copied back
    # One packed key upload for the forward graph (the model's dropouts), one for the step's
    # host values: nothing per mask, no mask drawn outside the NEFF.
    assert not [k for k in kinds if k[0].startswith("neuron_rng::")], kinds
    assert kinds.count(("copy_h2d", "copy")) == 2, kinds


def _mutate(fn, *tensors):
    """(fn's result, its arguments afterwards, launch records) compiled, and the same eagerly."""
    out = []
    for compiled in (True, False):
        torch._dynamo.reset()
        args = [t.clone().to("neuron") for t in tensors]
        f = torch.compile(fn, backend="neuron") if compiled else fn
        with torch.no_grad():
            f(*[a.clone() for a in args])  # compiles
            with op_records() as records:
                result = f(*args)
        out.append((result.cpu() if isinstance(result, torch.Tensor) else result, [a.cpu() for a in args], records))
    return out


def test_mutation_written_in_place_when_only_its_update_reads_the_old_value():
    def fn(x, y):
        x.mul_(0.5).add_(y)

    (_, got, records), (_, expected, _) = _mutate(fn, torch.randn(4, 8), torch.randn(4, 8))
    torch.testing.assert_close(got, expected)
    assert [r.name for r in records if r.task_kind == "copy"] == []


def test_mutation_copied_in_when_another_output_reads_the_old_value():
    def fn(x, y):
        old = x * 3.0
        x.add_(y)
        return old

    (got_out, got, records), (expected_out, expected, _) = _mutate(fn, torch.randn(4, 8), torch.randn(4, 8))
    torch.testing.assert_close(got_out, expected_out)
    torch.testing.assert_close(got, expected)
    assert [r.name for r in records if r.task_kind == "copy"] == ["copy_d2d"]


def test_mutation_copied_in_when_the_update_is_not_elementwise():
    def fn(x):
        x.copy_(x.flip(0) + 1.0)

    (_, got, records), (_, expected, _) = _mutate(fn, torch.randn(4, 8))
    torch.testing.assert_close(got, expected)
    assert [r.name for r in records if r.task_kind == "copy"] == ["copy_d2d"]


def test_mutation_of_a_host_scalar_runs_on_the_host():
    def fn(x, step):
        step.add_(1)
        x.mul_(step.to(x.dtype))

    torch._dynamo.reset()
    x, step = torch.ones(4).to("neuron"), torch.tensor(1.0)
    f = torch.compile(fn, backend="neuron")
    with torch.no_grad():
        f(x, step)
        f(x, step)
    assert step.item() == 3.0
    torch.testing.assert_close(x.cpu(), torch.full((4,), 6.0))
    assert torch_neuronx.compile_metrics()["graphs"]


def test_batchnorm_running_stats_updated_by_compiled_training_graph():
    """A training forward's buffer mutations (running statistics, under no_grad) are in the graph
    too: written by the NEFF, eager's values."""

    def run(compiled: bool):
        torch._dynamo.reset()
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 2)).to("neuron")
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        f = torch.compile(m, backend="neuron") if compiled else m
        x = torch.randn(6, 8).to("neuron")
        for _ in range(3):
            opt.zero_grad()
            f(x).square().mean().backward()
            opt.step()
        return [t.detach().cpu() for t in (*m.parameters(), *m.buffers())]

    for got, expected in zip(run(True), run(False)):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


def test_compiled_dropout_reproduces_under_the_seed_and_equals_eager():
    import torch.nn.functional as F

    def f(x):
        return F.dropout(x * 2.0, 0.4, training=True) + 1.0

    torch._dynamo.reset()
    x = torch.randn(16, 33).to("neuron")
    compiled = torch.compile(f, backend="neuron")
    torch.manual_seed(5)
    a = compiled(x).cpu()
    torch.manual_seed(5)
    with op_records() as records:
        b = compiled(x).cpu()
    torch.manual_seed(5)
    eager = f(x).cpu()
    assert torch.equal(a, b) and torch.equal(a, eager)
    assert abs((a == 1.0).float().mean().item() - 0.4) < 0.1
    assert not [r.name for r in records if r.task_kind == "cpu_fallback"]
