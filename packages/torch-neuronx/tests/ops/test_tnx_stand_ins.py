"""CPU's argument checks and out= layouts on the device: what CPU's kernel says of a call over
stand-ins of its operands, in every eager mode (compiled ops, adaptive eager, CPU fallback only).

Meta kernels accept arguments CPU refuses, raise other errors, resize what CPU does not, and give
a resized out= tensor other strides; each case here differed from CPU before."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx

MODES = ("compiled", "adaptive", "fallback")


@pytest.fixture(params=MODES)
def mode(request, monkeypatch):
    from torch_neuronx.compiled.dispatch import BACKEND_ENV

    if request.param == "fallback":
        monkeypatch.setenv(BACKEND_ENV, "fallback")
    if request.param == "adaptive":
        torch_neuronx.set_adaptive_eager(True)
    yield request.param
    if request.param == "adaptive":
        torch_neuronx.set_adaptive_eager(None)


def _cpu_error(fn, *tensors):
    with pytest.raises(Exception) as caught:  # noqa: PT011 - whatever CPU raises is the answer
        fn(*tensors)
    return caught.value


def _raises_like_cpu_at_the_call(fn, *tensors, neuron):
    """``fn`` raises on the device what it raises on CPU, at the call; nothing is left queued."""
    want = _cpu_error(fn, *[t.clone() for t in tensors])
    on_device = [t.to(neuron) for t in tensors]
    torch.neuron.synchronize()
    with pytest.raises(type(want)) as caught:
        fn(*on_device)
    assert str(caught.value).splitlines()[0] == str(want).splitlines()[0]
    torch.neuron.synchronize()  # the error was the call's: nothing fails later
    return on_device


IN_PLACE = {
    "floor_divide_": lambda x, y: x.floor_divide_(y),
    "logical_and_": lambda x, y: x.logical_and_(y),
    "logical_or_": lambda x, y: x.logical_or_(y),
    "add_": lambda x, y: x.add_(y),
    "mul_": lambda x, y: x.mul_(y),
    "remainder_": lambda x, y: x.remainder_(y),
    "pow_": lambda x, y: x.pow_(y),
    "lerp_": lambda x, y: x.lerp_(y, 0.5),
    "bitwise_and_": lambda x, y: x.bitwise_and_(y),
}


_SHAPES = [
    ((4,), (4, 2, 1), torch.uint8),  # the fuzz's floor_divide_ case
    ((4,), (4, 2, 1), torch.float32),
    ((), (3,), torch.float32),  # 0-d self
    ((1,), (3,), torch.int32),  # size-1 self
    ((3, 2), (2, 3, 2), torch.float32),  # a transposed (non-contiguous) self, below
]
_FLOAT_ONLY, _INT_ONLY = {"lerp_", "pow_", "remainder_"}, {"bitwise_and_"}


@pytest.mark.parametrize(("op", "self_shape", "other_shape", "dtype"), [
    (op, *shapes) for op in sorted(IN_PLACE) for shapes in _SHAPES  # the kernels CPU has
    if not (op in _FLOAT_ONLY and not shapes[2].is_floating_point or op in _INT_ONLY and shapes[2].is_floating_point)])
def test_an_in_place_op_never_resizes_its_self(op, self_shape, other_shape, dtype, mode, neuron):
    x = torch.ones(self_shape, dtype=dtype)
    if len(self_shape) == 2:
        x = torch.ones(self_shape[::-1], dtype=dtype).t()
    y = torch.ones(other_shape, dtype=dtype)
    on_device = _raises_like_cpu_at_the_call(IN_PLACE[op], x, y, neuron=neuron)
    assert on_device[0].shape == x.shape and on_device[0].stride() == x.stride()
    assert torch.equal(on_device[0].cpu(), x)


@pytest.mark.parametrize(("call", "shape"), [
    (lambda x: x.softmax(1), (3,)),  # the fuzz's hang: lowered for minutes
    (lambda x: x.softmax(1), ()),
    (lambda x: x.softmax(1, dtype=torch.float32), ()),
    (lambda x: x.log_softmax(-3), (2, 3)),
    (lambda x: x.t().softmax(2), (2, 3)),
    (lambda x: torch.cat([x, x], 1), ()),
    (lambda x: torch.cat([x, x], 1, out=torch.empty(0, device=x.device)), ()),  # CPU: RuntimeError, meta: IndexError
])
def test_argument_errors_are_cpus_raised_at_the_call(call, shape, mode, neuron):
    if mode != "fallback":
        _raises_like_cpu_at_the_call(call, torch.ones(shape), neuron=neuron)
        return
    # Every op through CPU kernels checks arguments with the meta kernels only (no per-call
    # probe): what they miss is CPU's error at the next synchronization.
    want = _cpu_error(call, torch.ones(shape))
    x = torch.ones(shape, device=neuron)
    with pytest.raises(Exception) as caught:  # noqa: PT011
        call(x)
        torch.neuron.synchronize()
    got = getattr(caught.value, "original", None) or caught.value
    assert isinstance(got, type(want)) and str(want).splitlines()[0] in str(got)


@pytest.mark.parametrize(("call", "make"), [
    (lambda x, out: torch.exp(x, out=out), lambda: torch.rand(3, 2).t()),
    (lambda x, out: torch.add(x, 1, out=out), lambda: torch.rand(3, 2).t()),
    (lambda x, out: torch.exp(x, out=out), lambda: torch.rand(2, 3, 4).permute(2, 0, 1)),
    (lambda x, out: torch.neg(x, out=out), lambda: torch.arange(6, dtype=torch.int64).reshape(3, 2).t()),
    (lambda x, out: torch.exp(x, out=out), lambda: torch.rand(1, 5).t()),  # size-1 dims
])
def test_an_empty_out_tensor_takes_the_layout_cpu_gives_it(call, make, mode, neuron):
    x = make()
    want = torch.empty(0, dtype=x.dtype)
    call(x, want)
    got = torch.empty(0, dtype=x.dtype, device=neuron)
    call(x.to(neuron), got)
    assert got.shape == want.shape and got.stride() == want.stride()
    torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("call", [
    lambda x0, x1: torch.where(x1 > 0, x1, x0, out=x0),  # the fuzz's case
    lambda x0, x1: torch.add(x0, x1, out=x0),
    lambda x0, x1: torch.maximum(x1, x0, out=x0),
])
def test_an_empty_out_tensor_that_is_an_input_is_not_resized(call, mode, neuron):
    x0, x1 = torch.empty(2, 0, 1, dtype=torch.uint8), torch.empty(2, 1, 0, dtype=torch.uint8)
    on_device = _raises_like_cpu_at_the_call(call, x0, x1, neuron=neuron)
    assert on_device[0].shape == (2, 0, 1)


def test_an_empty_out_tensor_that_is_not_an_input_is_resized(mode, neuron):
    x1 = torch.empty(2, 1, 0, device=neuron)
    out = torch.empty(2, 0, 1, device=neuron)
    torch.mul(x1, x1.clone(), out=out)
    assert out.shape == (2, 1, 0)


def test_an_integer_division_by_the_zeros_of_a_stand_in_still_computes(mode, neuron):
    # CPU refuses zeros as divisors of integers, not these arguments: the call computes
    x, y = torch.tensor([7, -9, 5], dtype=torch.int32), torch.tensor([2, 4, -3], dtype=torch.int32)
    assert torch.equal((x.to(neuron) // y.to(neuron)).cpu(), x // y)
    x_dev = x.to(neuron)
    x_dev.floor_divide_(y.to(neuron))
    assert torch.equal(x_dev.cpu(), x // y)


def test_an_empty_result_out_into_a_view_of_its_input_raises_cpus_overlap_error(mode, neuron):
    # fuzz-38: the stand-ins of a view and of its base share one CPU storage, so CPU sees the overlap
    def call(t):
        x0 = t.narrow(0, 2, 4)
        torch.index_select(x0.view(-1), 0, torch.tensor([], dtype=torch.long, device=t.device), out=x0)

    _raises_like_cpu_at_the_call(call, torch.full((6, 4, 4), 1.0, dtype=torch.float16), neuron=neuron)


@pytest.mark.parametrize("call", [
    lambda x: (v := x[:1] == 0).unsqueeze(0).__setitem__((), v),  # fuzz-41 (one element: not the same strides)
    lambda x: x[1:].copy_(x[:-1]),  # partial overlap
    lambda x: x[:1].expand(3).copy_(x),  # a target whose elements share memory
], ids=["setitem_of_an_unsqueezed_view", "shifted_views", "expanded_target"])
def test_a_copy_between_overlapping_views_raises_cpus_error(call, mode, neuron):
    _raises_like_cpu_at_the_call(call, torch.tensor([2, 5, 7]), neuron=neuron)


def test_copies_between_views_that_do_not_overlap_or_are_the_same_elements_work(mode, neuron):
    x = torch.arange(6.0, device=neuron)
    x[:3].copy_(x[3:])
    x.copy_(x)
    assert torch.equal(x.cpu(), torch.tensor([3.0, 4.0, 5.0, 3.0, 4.0, 5.0]))
