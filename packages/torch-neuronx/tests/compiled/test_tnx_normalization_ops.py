"""Normalization on the device: batch norm in training (normalized output, saved statistics, the
running mean and variance updated in place, momentum None too) and without running statistics,
instance norm (batch norm underneath, running statistics too) and group norm run as compiled ops,
forward and backward, against CPU; batch norm in eval mode runs on the device too and gives CPU's
values."""

from __future__ import annotations

import copy

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_close_to_cpu

N = "neuron"


def _step(module, x, train=True):
    """Output, input gradient, parameter gradients and running statistics after one step, neuron and CPU."""
    dev = copy.deepcopy(module).to(N)
    module.train(train)
    dev.train(train)
    x_cpu, x_dev = x.clone().requires_grad_(), x.to(N).requires_grad_()
    torch_neuronx.clear_op_tracking()
    got = dev(x_dev)
    got.square().sum().backward()
    fallbacks = torch_neuronx.get_fallback_ops()
    expected = module(x_cpu)
    expected.square().sum().backward()
    pairs = [(got, expected), (x_dev.grad, x_cpu.grad)]
    pairs += [(p.grad, q.grad) for p, q in zip(dev.parameters(), module.parameters())]
    pairs += list(zip(dev.buffers(), module.buffers()))  # running_mean, running_var, num_batches_tracked
    return pairs, fallbacks


def _module(cls, channels, dtype=torch.float32, **kwargs):
    torch.manual_seed(0)
    m = cls(channels, **kwargs).to(dtype)
    with torch.no_grad():
        if m.affine:
            m.weight.uniform_(0.5, 1.5)
            m.bias.uniform_(-1, 1)
        if m.track_running_stats:
            m.running_mean.uniform_(-1, 1)
    return m


@pytest.mark.parametrize("case", ["2d", "1d-flat", "3d", "no-affine", "momentum-none", "no-running-stats", "batch-1"])
def test_training_step_runs_on_the_device(case):
    cls, channels, shape, kwargs = {
        "2d": (torch.nn.BatchNorm2d, 3, (4, 3, 5, 5), {}),
        "1d-flat": (torch.nn.BatchNorm1d, 130, (6, 130), {}),
        "3d": (torch.nn.BatchNorm3d, 2, (2, 2, 3, 4, 1), {}),
        "no-affine": (torch.nn.BatchNorm2d, 3, (2, 3, 4, 4), {"affine": False}),
        "momentum-none": (torch.nn.BatchNorm2d, 3, (2, 3, 4, 4), {"momentum": None}),
        "no-running-stats": (torch.nn.BatchNorm2d, 3, (2, 3, 4, 4), {"track_running_stats": False}),
        "batch-1": (torch.nn.BatchNorm2d, 3, (1, 3, 4, 5), {}),
    }[case]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 2 + 0.5
    pairs, fallbacks = _step(_module(cls, channels, **kwargs), x)
    assert fallbacks == []
    for got, expected in pairs:
        assert_close_to_cpu(got, expected, rtol=1e-4, atol=1e-4)


def test_bf16_training_step():
    x = torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    pairs, fallbacks = _step(_module(torch.nn.BatchNorm2d, 3, torch.bfloat16), x)
    assert fallbacks == []
    for got, expected in pairs[:2] + pairs[4:]:  # output, input gradient, running statistics
        assert_close_to_cpu(got, expected, rtol=3e-2, atol=3e-2)
    for got, expected in pairs[2:4]:  # parameter gradients: sums over 100 bf16 products each
        assert_close_to_cpu(got, expected, rtol=3e-2, atol=0.5)


@pytest.mark.parametrize("case", ["2d", "1d-flat", "1d-length-1", "3d", "no-affine", "batch-1", "channels-last",
                                  "transposed-view"])
def test_eval_uses_the_running_statistics_on_the_device(case):
    """In eval the saved mean and invstd are empty ([0]) results, and inputs of the backward: they
    are made without a buffer while the kernels compute the rest (issue 14)."""
    cls, channels, shape, kwargs = {
        "2d": (torch.nn.BatchNorm2d, 3, (4, 3, 5, 5), {}),
        "1d-flat": (torch.nn.BatchNorm1d, 130, (6, 130), {}),
        "1d-length-1": (torch.nn.BatchNorm1d, 5, (3, 5, 1), {}),
        "3d": (torch.nn.BatchNorm3d, 2, (2, 2, 3, 1, 4), {}),
        "no-affine": (torch.nn.BatchNorm2d, 3, (2, 3, 4, 7), {"affine": False}),
        "batch-1": (torch.nn.BatchNorm2d, 3, (1, 3, 1, 5), {}),
        "channels-last": (torch.nn.BatchNorm2d, 3, (2, 3, 4, 5), {}),
        "transposed-view": (torch.nn.BatchNorm2d, 3, (2, 3, 6, 5), {}),
    }[case]
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 2 + 0.5
    if case == "channels-last":
        x = x.to(memory_format=torch.channels_last)
    module = _module(cls, channels, **kwargs)
    with torch.no_grad():
        module.running_var.uniform_(0.5, 2)
    if case == "transposed-view":
        pairs, fallbacks = _step_of_view(module, x)
    else:
        pairs, fallbacks = _step(module, x, train=False)
    assert fallbacks == [], torch_neuronx.get_fallback_reasons()
    for got, expected in pairs:
        assert_close_to_cpu(got, expected, rtol=1e-5, atol=1e-5)


def _step_of_view(module, x):
    """``_step`` in eval of a non-contiguous view of a device tensor (its last two dims swapped)."""
    dev = copy.deepcopy(module).to(N).eval()
    module.eval()
    base_cpu, base_dev = x.clone().requires_grad_(), x.to(N).requires_grad_()
    torch_neuronx.clear_op_tracking()
    got = dev(base_dev.transpose(2, 3))
    got.square().sum().backward()
    fallbacks = torch_neuronx.get_fallback_ops()
    expected = module(base_cpu.transpose(2, 3))
    expected.square().sum().backward()
    pairs = [(got, expected), (base_dev.grad, base_cpu.grad)]
    pairs += [(p.grad, q.grad) for p, q in zip(dev.parameters(), module.parameters())]
    return pairs, fallbacks


def test_eval_bf16_on_the_device():
    x = torch.randn(2, 3, 5, 3, generator=torch.Generator().manual_seed(1)).to(torch.bfloat16)
    pairs, fallbacks = _step(_module(torch.nn.BatchNorm2d, 3, torch.bfloat16), x, train=False)
    assert fallbacks == [], torch_neuronx.get_fallback_reasons()
    for got, expected in pairs[:2]:
        assert_close_to_cpu(got, expected, rtol=3e-2, atol=3e-2)
    for got, expected in pairs[2:4]:  # parameter gradients: sums over 30 bf16 products each
        assert_close_to_cpu(got, expected, rtol=3e-2, atol=0.5)


@pytest.mark.parametrize("training", [False, True])
def test_native_batch_norm_legit_with_running_statistics(training):
    """``_native_batch_norm_legit`` (what ``_native_batch_norm_legit_no_training`` calls) with
    running statistics: on the device, the statistics updated in place in training."""
    x = torch.randn(2, 3, 4, 5, generator=torch.Generator().manual_seed(1))
    mean, var, w, b = torch.randn(3), torch.rand(3) + 0.5, torch.randn(3), torch.randn(3)
    op = torch.ops.aten._native_batch_norm_legit.default
    mean_dev, var_dev = mean.to(N), var.to(N)
    torch_neuronx.clear_op_tracking()
    got = op(x.to(N), w.to(N), b.to(N), mean_dev, var_dev, training, 0.1, 1e-5)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_reasons()
    expected = op(x, w, b, mean, var, training, 0.1, 1e-5)
    for g, e in [*zip(got, expected), (mean_dev, mean), (var_dev, var)]:
        assert_close_to_cpu(g, e, rtol=1e-5, atol=1e-5)


def test_compiled_training_step_updates_the_running_statistics():
    module = _module(torch.nn.BatchNorm2d, 3)
    dev = copy.deepcopy(module).to(N)
    fn = torch.compile(dev, backend=N, dynamic=False)
    x = torch.randn(4, 3, 5, 5, generator=torch.Generator().manual_seed(1))
    for _ in range(2):
        fn(x.to(N)).sum().backward()
        module(x).sum().backward()
    for got, expected in zip(dev.buffers(), module.buffers()):
        assert_close_to_cpu(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("case", ["instance2d-running-stats", "instance1d", "instance3d-affine", "group-130-channels",
                                  "group-one-group"])
def test_instance_and_group_norm_run_on_the_device(case):
    make, shape = {
        "instance2d-running-stats": (lambda: torch.nn.InstanceNorm2d(3, affine=True, track_running_stats=True), (2, 3, 5, 5)),
        "instance1d": (lambda: torch.nn.InstanceNorm1d(4), (2, 4, 7)),
        "instance3d-affine": (lambda: torch.nn.InstanceNorm3d(2, affine=True), (1, 2, 3, 2, 4)),
        "group-130-channels": (lambda: torch.nn.GroupNorm(13, 130), (2, 130, 3)),
        "group-one-group": (lambda: torch.nn.GroupNorm(1, 6), (3, 6, 1, 4)),
    }[case]
    torch.manual_seed(0)
    x = torch.randn(shape, generator=torch.Generator().manual_seed(1)) * 3 - 1
    pairs, fallbacks = _step(make(), x)
    assert fallbacks == []
    for got, expected in pairs:
        assert_close_to_cpu(got, expected, rtol=1e-4, atol=1e-4)
