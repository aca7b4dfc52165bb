"""Pooling and upsampling on the device (neuronx-cc's decompositions: strided slices, gathers,
elementwise max/add and scatter-adds): max/avg/adaptive pooling with indices and nearest/bilinear
upsampling, forward and backward, eager and compiled, against CPU - max-pooling indices exactly
(the first maximum wins, NaN wins, padding never), with padding, strides, dilation, ceil_mode,
odd shapes, size-1 dims, unbatched and non-contiguous inputs."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from tnx_helpers import assert_close_to_cpu, assert_equal

N = "neuron"


def _input(shape, kind="randn", dtype=torch.float32, layout="contiguous"):
    gen = torch.Generator().manual_seed(3)
    if kind == "ties":  # few distinct values: windows hold several maxima
        x = torch.randint(0, 3, shape, generator=gen).float()
    elif kind == "specials":  # NaN, -inf and +inf among the values
        x = torch.randn(shape, generator=gen)
        flat = x.view(-1)
        flat[::7] = float("nan")
        flat[3::11] = -float("inf")
        flat[5::13] = float("inf")
    elif kind == "minus-inf":  # whole windows of -inf: the index is the window's first element
        x = torch.full(shape, -float("inf"))
    else:
        x = torch.randn(shape, generator=gen)
    x = x.to(dtype)
    if layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    elif layout == "transposed":  # a view with its last two dims swapped
        x = x.transpose(-1, -2).contiguous().transpose(-1, -2)
    return x


def _check(fn, x, compiled=False, backward=True, exact_values=True, **tol):
    """``fn(x)`` (a tensor or (values, indices)) and the gradient of ``x`` on neuron vs CPU, with no
    CPU fallback on the device."""
    torch._dynamo.reset()
    x_cpu = x.detach().clone().requires_grad_(backward)
    x_dev = x.detach().to(N).requires_grad_(backward)
    run = torch.compile(fn, backend=N, dynamic=False) if compiled else fn
    torch_neuronx.clear_op_tracking()
    got = run(x_dev)
    got = got if isinstance(got, tuple) else (got,)
    expected = fn(x_cpu)
    expected = expected if isinstance(expected, tuple) else (expected,)
    if backward:
        grad = torch.randn(expected[0].shape, generator=torch.Generator().manual_seed(5)).to(x.dtype)
        got[0].backward(grad.to(N))
        expected[0].backward(grad)
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_reasons()
    if exact_values:  # max pooling: values are moved, not computed
        assert_equal(got[0].detach(), expected[0].detach())
    else:
        assert_close_to_cpu(got[0].detach(), expected[0].detach(), **tol)
    for g, e in zip(got[1:], expected[1:]):
        assert_equal(g, e)  # indices
    if backward:
        assert_close_to_cpu(x_dev.grad, x_cpu.grad, **tol)
    assert got[0].shape == expected[0].shape and got[0].stride() == expected[0].stride()


MAX_POOL = {
    "k2": dict(kernel_size=2),
    "k3-s2-p1": dict(kernel_size=3, stride=2, padding=1),
    "k3-s2-p1-ceil": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "k2x3-s1x2-ceil": dict(kernel_size=(2, 3), stride=(1, 2), ceil_mode=True),
    "k3-dilated2-p1": dict(kernel_size=3, dilation=2, padding=1, stride=1),
    "k2-dilated-ceil": dict(kernel_size=2, stride=2, dilation=(2, 1), padding=(1, 0), ceil_mode=True),
    "k1": dict(kernel_size=1, stride=2),
}


@pytest.mark.parametrize("name", list(MAX_POOL))
@pytest.mark.parametrize("kind", ["randn", "ties", "specials"])
def test_max_pool2d_with_indices(name, kind):
    x = _input((2, 3, 7, 5), kind)
    _check(lambda t: F.max_pool2d(t, return_indices=True, **MAX_POOL[name]), x, backward=kind != "specials")


@pytest.mark.parametrize("shape,layout", [((1, 1, 1, 6), "contiguous"), ((3, 5, 4), "contiguous"),
                                          ((2, 3, 6, 5), "channels_last"), ((2, 2, 5, 6), "transposed"),
                                          ((1, 130, 3, 3), "contiguous")])
def test_max_pool2d_shapes_and_layouts(shape, layout):
    kernel, padding = ((1, 3), (0, 1)) if shape[-2] == 1 else (3, 1)
    x = _input(shape, "ties", layout=layout)
    _check(lambda t: F.max_pool2d(t, kernel, stride=2, padding=padding, ceil_mode=True, return_indices=True), x)


@pytest.mark.parametrize("pool", ["max_pool2d", "adaptive_max_pool2d"])
def test_max_pooling_specials_channels_last(pool):
    """CPU's channels-last kernel keeps the same rule (NaN wins, the first maximum otherwise)."""
    x = _input((2, 3, 7, 5), "specials", layout="channels_last")
    fn = (lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True, return_indices=True)) if pool == "max_pool2d" else (
        lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True))
    _check(fn, x, backward=False)


def test_max_pool2d_all_minus_inf_keeps_the_first_index():
    x = _input((1, 2, 5, 5), "minus-inf")
    _check(lambda t: F.max_pool2d(t, 3, stride=2, padding=1, return_indices=True), x, backward=False)


def test_max_pool2d_bf16_and_compiled():
    _check(lambda t: F.max_pool2d(t, 3, 2, 1, return_indices=True), _input((2, 3, 6, 7), dtype=torch.bfloat16))
    _check(lambda t: F.max_pool2d(t, 3, 2, 1, ceil_mode=True).relu(), _input((2, 3, 6, 7)), compiled=True)


AVG_POOL = {
    "k2": dict(kernel_size=2),
    "k3-s2-p1": dict(kernel_size=3, stride=2, padding=1),
    "k3-s2-p1-ceil-exclude-pad": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, count_include_pad=False),
    "k3-s2-p1-ceil-include-pad": dict(kernel_size=3, stride=2, padding=1, ceil_mode=True),
    "k2x3-s1x2-p1x0": dict(kernel_size=(2, 3), stride=(1, 2), padding=(1, 0)),
    "divisor-override": dict(kernel_size=3, stride=2, padding=1, divisor_override=5),
}


@pytest.mark.parametrize("name", list(AVG_POOL))
def test_avg_pool2d(name):
    _check(lambda t: F.avg_pool2d(t, **AVG_POOL[name]), _input((2, 3, 7, 5)), exact_values=False)


@pytest.mark.parametrize("shape,layout", [((1, 1, 1, 6), "contiguous"), ((3, 5, 4), "contiguous"),
                                          ((2, 3, 6, 5), "channels_last"), ((2, 2, 5, 6), "transposed")])
def test_avg_pool2d_shapes_and_layouts(shape, layout):
    kernel, padding = ((1, 3), (0, 1)) if shape[-2] == 1 else (3, 1)
    _check(lambda t: F.avg_pool2d(t, kernel, stride=2, padding=padding, ceil_mode=True, count_include_pad=False),
           _input(shape, layout=layout), exact_values=False)


def test_avg_pool2d_bf16_and_compiled():
    _check(lambda t: F.avg_pool2d(t, 3, 2, 1), _input((2, 3, 6, 7), dtype=torch.bfloat16), exact_values=False)
    _check(lambda t: F.avg_pool2d(t, 3, 2, 1, ceil_mode=True) * 2, _input((2, 3, 6, 7)), compiled=True,
           exact_values=False)


@pytest.mark.parametrize("out", [(3, 2), (4, 4), (1, 1), (7, 1), (5, None), (2, 3)])
@pytest.mark.parametrize("kind", ["randn", "ties", "specials"])
def test_adaptive_max_pool2d(out, kind):
    x = _input((2, 3, 7, 5) if out != (4, 4) else (2, 3, 3, 4), kind)
    _check(lambda t: F.adaptive_max_pool2d(t, out, return_indices=True), x, backward=kind != "specials")


@pytest.mark.parametrize("shape,layout", [((3, 5, 4), "contiguous"), ((2, 3, 6, 5), "channels_last"),
                                          ((2, 2, 5, 6), "transposed")])
def test_adaptive_pooling_layouts(shape, layout):
    x = _input(shape, "ties", layout=layout)
    _check(lambda t: F.adaptive_max_pool2d(t, (4, 3), return_indices=True), x)
    _check(lambda t: F.adaptive_avg_pool2d(t, (4, 3)), x, exact_values=False)


@pytest.mark.parametrize("out", [(3, 2), (4, 4), (1, 1), (7, 5), (2, 3)])
def test_adaptive_avg_pool2d(out):
    _check(lambda t: F.adaptive_avg_pool2d(t, out), _input((2, 3, 7, 5) if out != (4, 4) else (2, 3, 3, 4)),
           exact_values=False)


def test_adaptive_pooling_bf16_and_compiled():
    x = _input((2, 3, 7, 5), dtype=torch.bfloat16)
    _check(lambda t: F.adaptive_max_pool2d(t, (3, 2), return_indices=True), x)
    _check(lambda t: F.adaptive_avg_pool2d(t, (3, 2)), x, exact_values=False)
    _check(lambda t: F.adaptive_max_pool2d(t, (3, 2)) + F.adaptive_avg_pool2d(t, (3, 2)), _input((2, 3, 7, 5)),
           compiled=True, exact_values=False)


UPSAMPLE = {
    "nearest-x2": dict(scale_factor=2, mode="nearest"),
    "nearest-size": dict(size=(5, 11), mode="nearest"),
    "nearest-down": dict(size=(2, 3), mode="nearest"),
    "nearest-scale-1.7": dict(scale_factor=(1.7, 2.3), mode="nearest"),
    "bilinear-x2": dict(scale_factor=2, mode="bilinear"),
    "bilinear-size": dict(size=(9, 11), mode="bilinear"),
    "bilinear-align-corners": dict(size=(9, 11), mode="bilinear", align_corners=True),
    "bilinear-down": dict(size=(2, 4), mode="bilinear"),
    "bilinear-down-align-corners": dict(size=(1, 4), mode="bilinear", align_corners=True),
    "bilinear-scale-1.7": dict(scale_factor=(1.7, 0.6), mode="bilinear"),
    "bilinear-same-size": dict(size=(3, 5), mode="bilinear"),
}


@pytest.mark.parametrize("name", list(UPSAMPLE))
def test_upsample(name):
    _check(lambda t: F.interpolate(t, **UPSAMPLE[name]), _input((2, 3, 3, 5)),
           exact_values=UPSAMPLE[name]["mode"] == "nearest", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "bilinear"])
@pytest.mark.parametrize("shape,layout", [((1, 1, 1, 4), "contiguous"), ((2, 3, 4, 5), "channels_last"),
                                          ((2, 2, 5, 3), "transposed")])
def test_upsample_shapes_and_layouts(mode, shape, layout):
    _check(lambda t: F.interpolate(t, size=(3, 7), mode=mode), _input(shape, layout=layout),
           exact_values=mode == "nearest", rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,size", [((2, 3, 5), (12,)), ((1, 2, 3, 2, 4), (5, 4, 7))])
def test_upsample_nearest_1d_and_3d(shape, size):
    _check(lambda t: F.interpolate(t, size=size, mode="nearest"), _input(shape))


def test_upsample_bf16_and_compiled():
    x = _input((2, 3, 4, 5), dtype=torch.bfloat16)
    _check(lambda t: F.interpolate(t, scale_factor=2, mode="nearest"), x, exact_values=False)
    _check(lambda t: F.interpolate(t, size=(7, 9), mode="bilinear"), x, exact_values=False)
    _check(lambda t: F.interpolate(t, size=(7, 9), mode="bilinear", align_corners=True) * 3, _input((2, 3, 4, 5)),
           compiled=True, exact_values=False)
