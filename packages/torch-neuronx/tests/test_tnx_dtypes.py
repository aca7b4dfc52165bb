"""Dtypes fp32/bf16/fp16/int8/int16/int32/int64/uint8/bool: creation, arithmetic, comparison,
reductions and casts give CPU's results bit for bit."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import ALL_DTYPES, FLOAT_DTYPES, INT_DTYPES, assert_close_to_cpu, assert_equal


def _sample(dtype, shape=(6, 7)):
    g = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 4).to(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -100), min(info.max, 100)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


def _same(fn, *cpu_args):
    expected = fn(*cpu_args)
    actual = fn(*[a.to("neuron") if isinstance(a, torch.Tensor) else a for a in cpu_args])
    if isinstance(expected, torch.Tensor):
        assert actual.device.type == "neuron"
        assert_close_to_cpu(actual, expected)
    else:
        assert actual == expected


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_factories(dtype):
    for make in (torch.zeros, torch.ones, torch.empty):
        t = make(3, 4, dtype=dtype, device="neuron")
        assert t.dtype == dtype and t.shape == (3, 4)
    assert_equal(torch.full((2, 2), 1, dtype=dtype, device="neuron"), torch.full((2, 2), 1, dtype=dtype))
    if dtype != torch.bool:
        assert_equal(torch.arange(5, dtype=dtype, device="neuron"), torch.arange(5, dtype=dtype))
    assert_equal(torch.zeros_like(_sample(dtype).to("neuron")), torch.zeros(6, 7, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOAT_DTYPES + INT_DTYPES, ids=str)
def test_arithmetic(dtype):
    a, b = _sample(dtype), _sample(dtype).flip(0)
    _same(lambda x, y: x + y, a, b)
    _same(lambda x, y: x - y * 2, a, b)
    _same(lambda x, y: x * y, a, b)
    _same(lambda x: x.abs(), a)
    _same(lambda x: -x if dtype != torch.uint8 else x, a)
    _same(lambda x, y: torch.maximum(x, y), a, b)
    _same(lambda x: x.clamp(-3, 3) if dtype != torch.uint8 else x.clamp(0, 3), a)
    if dtype.is_floating_point:
        _same(lambda x, y: x / y, a, b)
        _same(lambda x: x.exp().sqrt().log(), a)
        _same(lambda x: torch.tanh(x) + torch.sigmoid(x), a)
        _same(lambda x: x @ x.t(), a)
    else:
        _same(lambda x, y: torch.div(x, y.clamp(min=1), rounding_mode="floor"), a, b)
        _same(lambda x, y: x & y, a, b)
        _same(lambda x: x << 1, a)


@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=str)
def test_comparisons_and_reductions(dtype):
    a, b = _sample(dtype), _sample(dtype).flip(1)
    _same(lambda x, y: x == y, a, b)
    _same(lambda x, y: x < y, a, b)
    _same(lambda x: x.sum(), a)
    _same(lambda x: x.sum(dim=1), a)
    _same(lambda x: x.amax(dim=0), a)
    _same(lambda x: x.any(), a)
    _same(lambda x: x.all(dim=1), a)
    _same(lambda x: torch.where(x > 0, x, torch.zeros_like(x)) if dtype != torch.bool else x, a)
    if dtype != torch.bool:
        _same(lambda x: x.argmax(dim=1), a)
        _same(lambda x: x.sort(dim=1, stable=True).values, a)
        _same(lambda x: x.cumsum(dim=0), a)
        _same(lambda x: x.max().item(), a)
    if dtype.is_floating_point:
        _same(lambda x: x.mean(dim=1), a)
        _same(lambda x: x.float().var(dim=0), a)
        _same(lambda x: x.softmax(dim=-1), a)


@pytest.mark.parametrize("src", ALL_DTYPES, ids=str)
def test_casts(src):
    a = _sample(src)
    for dst in ALL_DTYPES:
        _same(lambda x, d=dst: x.to(d), a)


def test_type_promotion():
    _same(lambda x, y: x + y, _sample(torch.int8), _sample(torch.float16))
    _same(lambda x, y: x * y, _sample(torch.uint8), _sample(torch.int16))
    _same(lambda x, y: x + y, _sample(torch.bfloat16), _sample(torch.float32))
    _same(lambda x: x + 1.5, _sample(torch.int32))
    _same(lambda x: x / 2, _sample(torch.int64))
    _same(lambda x, y: x + y, _sample(torch.bool), _sample(torch.int8))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_reduced_precision_normalization(dtype):
    import copy

    for make, shape in ((lambda: torch.nn.LayerNorm(6), (3, 6)), (lambda: torch.nn.GroupNorm(2, 4), (3, 4, 5)),
                        (lambda: torch.nn.BatchNorm1d(4), (3, 4, 5))):
        ref = make().to(dtype)
        model = copy.deepcopy(ref).to("neuron")
        x = torch.randn(*shape).to(dtype).requires_grad_()
        xn = x.detach().to("neuron").requires_grad_()
        y, yn = ref(x), model(xn)
        y.float().sum().backward()
        yn.float().sum().backward()
        assert_close_to_cpu(yn.detach(), y.detach())
        assert_close_to_cpu(xn.grad, x.grad)
        assert_close_to_cpu(model.weight.grad, ref.weight.grad)
    # The saved statistics have CPU's dtypes (input dtype, or float32 with float32 parameters).
    x = torch.randn(4, 6).to(dtype)
    for w in (None, torch.ones(6), torch.ones(6, dtype=dtype)):
        expected = torch.ops.aten.native_layer_norm(x, [6], w, w, 1e-5)
        wn = None if w is None else w.to("neuron")
        actual = torch.ops.aten.native_layer_norm(x.to("neuron"), [6], wn, wn, 1e-5)
        assert [t.dtype for t in actual] == [t.dtype for t in expected]
