"""torch.autocast(device_type="neuron") with bf16 (and fp16), and GradScaler on neuron."""

from __future__ import annotations

import copy

import torch
from tnx_helpers import assert_close_to_cpu


def test_autocast_casts_like_cpu_autocast_lists():
    a = torch.randn(8, 8, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("neuron")
        mm = a @ a
        lin = torch.nn.functional.linear(a, a)
        soft = mm.softmax(dim=-1)  # fp32 list
        add = a + a  # not listed: runs in its input dtype
    assert mm.dtype == lin.dtype == torch.bfloat16
    assert soft.dtype == torch.float32
    assert add.dtype == torch.float32
    assert_close_to_cpu(mm, a.cpu().bfloat16() @ a.cpu().bfloat16())


def test_autocast_default_dtype_and_fp16():
    assert torch.get_autocast_dtype("neuron") in (torch.bfloat16, torch.float16)
    a = torch.randn(4, 4, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.float16):
        assert (a @ a).dtype == torch.float16
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16, enabled=False):
        assert (a @ a).dtype == torch.float32


def test_autocast_training_matches_cpu_autocast():
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    model = copy.deepcopy(ref).to("neuron")
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    results = []
    for m, dev in ((model, "neuron"), (ref, "cpu")):
        with torch.autocast(device_type=dev, dtype=torch.bfloat16):
            out = m(x.to(dev))
            loss = torch.nn.functional.cross_entropy(out, y.to(dev))
        loss.backward()
        results.append((out.dtype, loss.detach().cpu(), m[0].weight.grad.cpu()))
    (dt_n, loss_n, g_n), (dt_c, loss_c, g_c) = results
    assert dt_n == dt_c == torch.bfloat16
    # fp32 results of bf16 computations: bf16's tolerance
    assert_close_to_cpu(loss_n, loss_c, rtol=2e-2, atol=2e-2)
    assert_close_to_cpu(g_n, g_c, rtol=2e-2, atol=2e-2)


def test_grad_scaler():
    model = torch.nn.Linear(4, 2).to("neuron")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("neuron", init_scale=1024.0)
    w0 = model.weight.detach().cpu()
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(torch.randn(3, 4, device="neuron")).float().sum()
    scaler.scale(loss).backward()
    assert model.weight.grad.abs().max().item() > 1.0  # scaled
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 1024.0
    assert not torch.equal(model.weight.detach().cpu(), w0)
    # An inf gradient skips the step and halves the scale.
    opt.zero_grad()
    w1 = model.weight.detach().cpu()
    (model(torch.full((1, 4), float("inf"), device="neuron")).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert scaler.get_scale() == 512.0
    assert_close_to_cpu(model.weight.detach(), w1)
