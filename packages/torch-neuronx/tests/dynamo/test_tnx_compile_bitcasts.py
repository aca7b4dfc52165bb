"""Compiled functions that read a float's bits: ``torch.copysign`` (torch-mlir lowers it through
``stablehlo.bitcast_convert``) and ``Tensor.view(dtype)`` give CPU's bits, -0.0, NaN signs and
infinities included."""

from __future__ import annotations

import pytest
import torch

NAN = float("nan")
MAGNITUDES = torch.tensor([0.0, -4.0, 1.5, 2.0, -0.0, float("inf"), NAN, -NAN, 3.0, 1e-45, -float("inf"), 7.0])
SIGNS = torch.tensor([-0.5, 2.0, -0.0, NAN, 1.0, -1.0, -2.0, 5.0, -NAN, -float("inf"), 0.0, float("inf")])


def _same_bits(got: torch.Tensor, expected: torch.Tensor) -> None:
    """The same bits, except a NaN's payload: CPU's bfloat16 kernels write NaN as 0x7fff (c10's
    rounding), the device as 0x7fc0 - both NaN; the sign of a NaN must agree."""
    got = got.cpu()
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if got.dtype.is_floating_point:
        nan = torch.isnan(expected)
        assert torch.equal(torch.isnan(got), nan) and torch.equal(torch.signbit(got), torch.signbit(expected)), (got, expected)
        got, expected = got[~nan], expected[~nan]
    bits = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[got.element_size()]
    assert torch.equal(got.view(bits), expected.view(bits)), (got, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_copysign_of_two_tensors(dtype):
    torch._dynamo.reset()
    a, b = MAGNITUDES.to(dtype), SIGNS.to(dtype)
    f = torch.compile(torch.copysign, backend="neuron")
    _same_bits(f(a.to("neuron"), b.to("neuron")), torch.copysign(a, b))


def test_copysign_broadcast_and_inside_a_computation():
    torch._dynamo.reset()
    a, b = MAGNITUDES.reshape(3, 4), SIGNS[:4]

    def f(a, b):
        return torch.copysign(a * 2, b).sum(0) + torch.copysign(torch.ones_like(a), -a).amax(1).sum()

    _same_bits(torch.compile(f, backend="neuron")(a.to("neuron"), b.to("neuron")), f(a, b))


@pytest.mark.parametrize("sign", [-1.0, 2.0, -0.0, 0.0, NAN, -NAN, -3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_copysign_by_a_number(sign, dtype):
    torch._dynamo.reset()  # Dynamo guards a closed-over float by ==, which does not tell -0.0 from 0.0
    x = MAGNITUDES.to(dtype) if dtype.is_floating_point else torch.tensor([3, -2, 0, 2**30], dtype=dtype)
    f = torch.compile(lambda x: torch.copysign(x, sign), backend="neuron")
    _same_bits(f(x.to("neuron")), torch.copysign(x, sign))


def test_a_float_viewed_as_int32_is_its_bits():
    torch._dynamo.reset()

    def f(x):
        bits = x.view(torch.int32)
        return bits, (bits < 0), bits.view(torch.float32) * 1

    got = torch.compile(f, backend="neuron")(MAGNITUDES.to("neuron"))
    for g, e in zip(got, f(MAGNITUDES)):
        _same_bits(g, e)
