"""Optimizers on neuron parameters give CPU's parameters: SGD, Adam, AdamW (foreach and fused)."""

from __future__ import annotations

import copy

import pytest
import torch
from tnx_helpers import assert_close_to_cpu

OPTIMIZERS = [
    ("sgd", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-2, foreach=False)),
    ("sgd-foreach", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, foreach=True)),
    ("sgd-fused", lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, fused=True)),
    ("adam", lambda p: torch.optim.Adam(p, lr=1e-2, foreach=False)),
    ("adam-foreach", lambda p: torch.optim.Adam(p, lr=1e-2, foreach=True)),
    ("adam-fused", lambda p: torch.optim.Adam(p, lr=1e-2, fused=True)),
    ("adam-amsgrad", lambda p: torch.optim.Adam(p, lr=1e-2, amsgrad=True, foreach=True)),
    ("adamw-foreach", lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, foreach=True)),
    ("adamw-fused", lambda p: torch.optim.AdamW(p, lr=1e-2, weight_decay=0.1, fused=True)),
    ("adamw-capturable", lambda p: torch.optim.AdamW(p, lr=1e-2, capturable=p[0].device.type == "neuron", foreach=True)),
]


@pytest.mark.parametrize("make", [m for _, m in OPTIMIZERS], ids=[n for n, _ in OPTIMIZERS])
def test_optimizer_matches_cpu(make):
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))
    model = copy.deepcopy(ref).to("neuron")
    opt, ref_opt = make(list(model.parameters())), make(list(ref.parameters()))
    data = [(torch.randn(8, 6), torch.randn(8, 3)) for _ in range(4)]
    for x, y in data:
        for m, o, dev in ((model, opt, "neuron"), (ref, ref_opt, "cpu")):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(x.to(dev)), y.to(dev)).backward()
            o.step()
    for p, q in zip(model.parameters(), ref.parameters()):
        if opt.defaults.get("capturable"):  # tensor-valued bias corrections: not CPU's algorithm, so not bit-equal
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)
        else:
            assert_close_to_cpu(p.detach(), q.detach())
    state = opt.state_dict()["state"][0]
    assert any(isinstance(v, torch.Tensor) and v.device.type == "neuron" for v in state.values()) or "momentum_buffer" in state


def test_lr_scheduler_and_grad_clipping():
    model = torch.nn.Linear(4, 4).to("neuron")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=3)
    for _ in range(3):
        opt.zero_grad()
        (model(torch.randn(2, 4, device="neuron")) * 100).sum().backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        assert norm.device.type == "neuron"
        total = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()))
        assert total.item() <= 1.0 + 1e-5
        opt.step()
        sched.step()
