"""Convolutions on the device (neuronx-cc's im2col decomposition: strided windows and one batched
matrix product on TensorE): conv1d/2d/3d and transposed, strides, padding ('same' too), dilation,
groups (depthwise), odd shapes and layouts, forward and backward, eager and compiled, against CPU;
shapes CPU refuses raise CPU's error at the call."""

from __future__ import annotations

import copy
import re

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_close_to_cpu

N = "neuron"
nn = torch.nn

MODULES = {
    "conv1d-strided": lambda: nn.Conv1d(3, 5, 3, stride=2, padding=1),
    "conv2d-same-dilated": lambda: nn.Conv2d(3, 4, (3, 2), padding="same", dilation=(2, 1)),
    "conv2d-grouped-no-bias": lambda: nn.Conv2d(4, 6, (3, 1), stride=(2, 1), groups=2, bias=False),
    "conv2d-depthwise": lambda: nn.Conv2d(4, 8, 3, padding=1, groups=4),
    "conv2d-1x1-130-channels": lambda: nn.Conv2d(130, 3, 1),
    "conv2d-kernel-larger-than-input": lambda: nn.Conv2d(2, 3, 5, padding=2),
    "conv3d": lambda: nn.Conv3d(2, 3, (2, 3, 2), stride=(1, 2, 1), padding=(1, 0, 1)),
    "conv-transpose1d": lambda: nn.ConvTranspose1d(3, 2, 4, stride=3, padding=1, output_padding=2),
    "conv-transpose2d-grouped": lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2),
    "conv-transpose3d-dilated": lambda: nn.ConvTranspose3d(2, 2, 2, stride=(2, 1, 1), dilation=(1, 2, 1)),
}
INPUTS = {  # batch 1 and size-1 dims among them
    "conv1d-strided": (2, 3, 9), "conv2d-same-dilated": (1, 3, 6, 5), "conv2d-grouped-no-bias": (2, 4, 7, 1),
    "conv2d-depthwise": (2, 4, 5, 6), "conv2d-1x1-130-channels": (1, 130, 3, 2),
    "conv2d-kernel-larger-than-input": (1, 2, 2, 3), "conv3d": (2, 2, 3, 5, 4), "conv-transpose1d": (2, 3, 4),
    "conv-transpose2d-grouped": (1, 4, 3, 5), "conv-transpose3d-dilated": (1, 2, 2, 3, 2),
}


def _forward_backward(module, x, compiled=False, fallback=()):
    """``module(x)``, and the gradients of x and every parameter, on neuron and on CPU."""
    ref = copy.deepcopy(module)
    dev = copy.deepcopy(module).to(N)
    fn = torch.compile(dev, backend=N, dynamic=False) if compiled else dev
    x_cpu = x.detach().requires_grad_()
    x_dev = x.detach().to(N).requires_grad_()
    grad = torch.randn(ref(x_cpu).shape, generator=torch.Generator().manual_seed(7)).to(x.dtype)
    torch_neuronx.clear_op_tracking()
    got = fn(x_dev)
    got.backward(grad.to(N))
    assert set(torch_neuronx.get_fallback_ops()) <= set(fallback), torch_neuronx.get_fallback_reasons()
    expected = ref(x_cpu)
    expected.backward(grad)
    return [(got, expected), (x_dev.grad, x_cpu.grad)] + [
        (p.grad, q.grad) for p, q in zip(dev.parameters(), ref.parameters())]


def _check(pairs, **tol):
    for got, expected in pairs:
        assert_close_to_cpu(got, expected, **tol)


@pytest.mark.parametrize("name", list(MODULES))
def test_eager_forward_and_backward_fp32(name):
    torch.manual_seed(0)
    _check(_forward_backward(MODULES[name](), torch.randn(INPUTS[name])), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["conv2d-same-dilated", "conv2d-depthwise", "conv-transpose2d-grouped", "conv3d"])
def test_eager_forward_and_backward_bf16(name):
    """TensorE multiplies bf16 and accumulates in fp32 (CPU's bf16 convolution does too); the bias
    is added after the product is rounded, so the tolerance is bf16's."""
    torch.manual_seed(0)
    _check(_forward_backward(MODULES[name]().to(torch.bfloat16), torch.randn(INPUTS[name]).to(torch.bfloat16)))


@pytest.mark.parametrize("layout", ["channels_last", "transposed-view", "sliced-view"])
def test_eager_non_contiguous_inputs(layout):
    torch.manual_seed(0)
    base = torch.randn(2, 3, 6, 10)
    x = {"channels_last": base.to(memory_format=torch.channels_last), "transposed-view": base.transpose(2, 3),
         "sliced-view": base[:, :, 1:, ::2]}[layout]
    module = nn.Conv2d(3, 4, 3, padding=1)
    if layout == "channels_last":
        module = module.to(memory_format=torch.channels_last)
    pairs = _forward_backward(module, x)
    assert [got.stride() for got, _ in pairs] == [want.stride() for _, want in pairs]  # CPU's layouts (channels_last too)
    _check(pairs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", ["conv1d-strided", "conv2d-grouped-no-bias", "conv-transpose2d-grouped", "conv3d"])
def test_compiled_forward_and_backward(name):
    torch.manual_seed(0)
    _check(_forward_backward(MODULES[name](), torch.randn(INPUTS[name]), compiled=True), rtol=1e-5, atol=1e-5)


class BasicBlock(nn.Module):
    """ResNet's basic block (two 3x3 convolutions, batch norm, a strided 1x1 shortcut): all on the device."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.shortcut(x))


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_resnet_basic_block(compiled):
    torch.manual_seed(0)
    block = BasicBlock(6, 10, 2)
    x = torch.randn(2, 6, 9, 9)
    _check(_forward_backward(block, x, compiled=compiled), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", ["channel-mismatch", "kernel-larger-than-input", "bad-groups"])
def test_shapes_that_do_not_fit_raise_cpus_error_at_the_call(case):
    x, w = {"channel-mismatch": (torch.randn(1, 3, 5, 5), torch.randn(4, 2, 3, 3)),
            "kernel-larger-than-input": (torch.randn(1, 2, 2, 2), torch.randn(3, 2, 3, 3)),
            "bad-groups": (torch.randn(1, 4, 5, 5), torch.randn(6, 2, 3, 3))}[case]
    groups = 3 if case == "bad-groups" else 1
    with pytest.raises(RuntimeError) as on_cpu:
        torch.nn.functional.conv2d(x, w, groups=groups)
    with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value).splitlines()[0])):
        torch.nn.functional.conv2d(x.to(N), w.to(N), groups=groups)
