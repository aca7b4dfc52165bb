"""Profiling a real model: a GPT training step (forward, backward, AdamW) in eager mode and under
torch.compile. Every device launch of the step is attributed to an op, and the step's device time
in key_averages() is what events on the stream measure."""

from __future__ import annotations

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile
from torch_neuronx.testing import GPT, GPTConfig
from torch_neuronx.testing.gpt import batches

CFG = GPTConfig(vocab=64, d_model=32, n_layers=2, n_heads=2, seq_len=8)


@pytest.fixture(autouse=True)
def _optimizer_steps_op_by_op(monkeypatch):
    """Inside torch.profiler an optimizer step runs op by op (compiled.optimizer_step); the step
    timed with events outside the window must run the same way to be compared with it."""
    monkeypatch.setenv("TORCH_NEURONX_FUSE_OPTIMIZER_STEP", "0")


def _profiled_step(compile_backend=None):
    torch.manual_seed(0)
    model = GPT(CFG).to("neuron")
    step_model = torch.compile(model, backend=compile_backend) if compile_backend else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    data = [(x.to("neuron"), y.to("neuron")) for x, y in batches(CFG, 4, 3, 0)]

    def step(x, y):
        loss = step_model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    step(*data[0])  # compiled and warm
    start, end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    start.record()
    step(*data[1])
    end.record()
    end.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        step(*data[2])
        torch.neuron.synchronize()
    return prof, start.elapsed_time(end) * 1e3


def test_eager_gpt_step_device_time_per_op():
    prof, elapsed_us = _profiled_step()
    averages = prof.key_averages()
    device = {e.key: e.self_device_time_total for e in averages if e.self_device_time_total > 0 and e.device_type == DeviceType.CPU}
    assert sum(device.values()) == pytest.approx(elapsed_us, rel=1e-3)
    assert {"aten::mm", "aten::bmm"} <= set(device), sorted(device)  # attention and the linear layers
    assert any("backward" in k for k in device), sorted(device)  # backward ops, on autograd's thread
    assert "aten::_foreach_mul_" in device or "aten::mul" in device  # AdamW
    top = max(device, key=device.get)
    assert top in averages.table(sort_by="self_privateuse1_time_total", row_limit=5)


def test_compiled_gpt_step_device_time_goes_to_the_compiled_regions():
    prof, elapsed_us = _profiled_step(compile_backend="neuron")
    device = {e.key: e.self_device_time_total for e in prof.key_averages() if e.self_device_time_total > 0 and e.device_type == DeviceType.CPU}
    assert sum(device.values()) == pytest.approx(elapsed_us, rel=1e-3)
    # The forward and backward graphs are one launch each, under autograd's CompiledFunction nodes.
    assert device["CompiledFunction"] > 0 and device["CompiledFunctionBackward"] > 0, device
    assert "aten::mm" not in device and "aten::bmm" not in device  # no matmul runs op by op
