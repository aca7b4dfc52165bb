"""Autograd and nn.Module on neuron: gradients equal CPU's; Module.to keeps Parameter identity."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from tnx_helpers import assert_close_to_cpu, assert_equal


def test_gradients_match_cpu():
    torch.manual_seed(0)
    a_cpu = torch.randn(6, 5, requires_grad=True)
    b_cpu = torch.randn(5, 4, requires_grad=True)
    a = a_cpu.detach().to("neuron").requires_grad_()
    b = b_cpu.detach().to("neuron").requires_grad_()

    def f(x, y):
        z = (x @ y).tanh() * x[:, :4].sigmoid()
        return (z.logsumexp(dim=1) + z.pow(2).mean()).sum()

    f(a, b).backward()
    f(a_cpu, b_cpu).backward()
    assert a.grad.device.type == "neuron"
    assert_close_to_cpu(a.grad, a_cpu.grad)
    assert_close_to_cpu(b.grad, b_cpu.grad)


def test_autograd_grad_and_double_backward():
    x_cpu = torch.linspace(-2, 2, 7, requires_grad=True)
    x = x_cpu.detach().to("neuron").requires_grad_()
    for t in (x, x_cpu):
        (g,) = torch.autograd.grad((t.sin() * t).sum(), t, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), t)
        t.result = (g.detach(), gg)
    assert_close_to_cpu(x.result[0], x_cpu.result[0])
    assert_close_to_cpu(x.result[1], x_cpu.result[1])


def test_module_to_keeps_parameter_identity():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    params = list(model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)  # built before .to(): must still train the model
    model.to("neuron")
    assert all(p is q for p, q in zip(model.parameters(), params))
    assert all(p.device.type == "neuron" for p in model.parameters())
    before = model[0].weight.detach().cpu()
    model(torch.randn(3, 4, device="neuron")).sum().backward()
    opt.step()
    assert not torch.equal(model[0].weight.detach().cpu(), before)
    model.to("cpu")
    assert all(p is q for p, q in zip(model.parameters(), params))
    assert model[0].weight.device.type == "cpu"


def test_layers_forward_and_backward_match_cpu():
    torch.manual_seed(1)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 4, 3, stride=2), torch.nn.GroupNorm(2, 4), torch.nn.GELU(), torch.nn.Flatten(),
        torch.nn.Dropout(0.0), torch.nn.Linear(4, 5),
    )
    ref = copy.deepcopy(model)
    model.to("neuron")
    x = torch.randn(2, 3, 8, 8)
    y = torch.randint(0, 5, (2,))
    loss = F.cross_entropy(model(x.to("neuron")), y.to("neuron"))
    ref_loss = F.cross_entropy(ref(x), y)
    loss.backward()
    ref_loss.backward()
    assert_close_to_cpu(loss, ref_loss.detach())
    for (name, p), q in zip(model.named_parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6, msg=name)
    assert_close_to_cpu(model[1].running_mean, ref[1].running_mean)


def test_no_grad_detach_and_requires_grad():
    x = torch.ones(3, device="neuron", requires_grad=True)
    with torch.no_grad():
        y = x * 2
    assert not y.requires_grad
    z = (x * 3).detach()
    assert not z.requires_grad and z.device.type == "neuron"
    w = x.clone()
    w.retain_grad()
    (w * w).sum().backward()
    assert_equal(w.grad, torch.full((3,), 2.0))
    assert_equal(x.grad, torch.full((3,), 2.0))


def test_hooks_and_checkpoint():
    from torch.utils.checkpoint import checkpoint

    lin = torch.nn.Linear(4, 4).to("neuron")
    seen = []
    lin.weight.register_hook(lambda g: seen.append(g.device.type))
    x = torch.randn(2, 4, device="neuron", requires_grad=True)
    checkpoint(lambda t: lin(t).relu(), x, use_reentrant=False).sum().backward()
    assert seen == ["neuron"] and x.grad.device.type == "neuron"


def test_recurrent_layers_match_cpu():
    torch.manual_seed(2)
    for cls in (torch.nn.LSTM, torch.nn.GRU):
        ref = cls(4, 8, num_layers=2)
        model = copy.deepcopy(ref).to("neuron")
        x = torch.randn(5, 3, 4)
        y_ref, _ = ref(x)
        y, _ = model(x.to("neuron"))
        y_ref.sum().backward()
        y.sum().backward()
        # Fused-cell gate sums are ordered differently from CPU's unfused cell: equal to rounding.
        torch.testing.assert_close(y.detach().cpu(), y_ref.detach(), rtol=1e-5, atol=1e-6)
        for p, q in zip(model.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5)


def test_inference_mode():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU()).to("neuron")
    x = torch.randn(2, 4)
    with torch.inference_mode():
        y = model(x.to("neuron"))
        y.add_(1)
        back = y.to("cpu", non_blocking=True)
        torch.neuron.synchronize()
    assert y.is_inference()
    torch.testing.assert_close(back, model.cpu()(x).detach() + 1, rtol=0, atol=0)


def test_batch_norm_eval_mode_matches_cpu():
    torch.manual_seed(3)
    ref = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    ref(torch.randn(4, 3, 8, 8))  # non-trivial running statistics
    ref.eval()
    model = copy.deepcopy(ref).to("neuron")
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    xn = x.detach().to("neuron").requires_grad_()
    y, yn = ref(x), model(xn)
    y.sum().backward()
    yn.sum().backward()
    assert_close_to_cpu(yn.detach(), y.detach())
    assert_close_to_cpu(xn.grad, x.grad)
    assert_close_to_cpu(model[1].weight.grad, ref[1].weight.grad)
