"""scatter_reduce and index_reduce on the device (neuronx-cc's decompositions: scatter-adds for
sum/mean, a mask of index == position reduced for amax/amin/prod), every reduction with and
without include_self, eager and compiled, against CPU."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import check_against_cpu

N = "neuron"
REDUCTIONS = ["sum", "prod", "mean", "amax", "amin"]


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def _inputs(dtype, seed=0):
    g = _g(seed)
    if dtype.is_floating_point:
        x, src = torch.randn(5, 7, generator=g).to(dtype), torch.randn(4, 6, generator=g).to(dtype)
        src[0, 1] = float("nan")  # propagates through amax/amin/prod/sum/mean as on CPU
    else:
        x, src = torch.randint(-9, 9, (5, 7), generator=g).to(dtype), torch.randint(-9, 9, (4, 6), generator=g).to(dtype)
    index = torch.randint(0, 7, (3, 5), generator=g)  # smaller than src and self in the other dim
    return x, index, src


@pytest.mark.parametrize("reduce", REDUCTIONS)
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int16, torch.int32], ids=str)
def test_scatter_reduce(reduce, include_self, dtype):
    """Integers are exact: what may wrap or exceed 2**24 (int16 sums and products, any int32 but
    min/max... of inputs of any value) is refused by the integer check and runs on CPU."""
    fn = lambda x, i, s: x.scatter_reduce(1, i, s, reduce, include_self=include_self)  # noqa: E731
    on_device = dtype.is_floating_point or (dtype == torch.int16 and reduce in ("amax", "amin"))
    check_against_cpu(fn, *_inputs(dtype), fallback=() if on_device else {"aten::scatter_reduce"}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduce", ["prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce(reduce, include_self):
    g = _g(3)
    x, source = torch.randn(6, 5, generator=g), torch.randn(4, 5, generator=g)
    index = torch.tensor([1, 4, 1, 0])  # a repeated index
    fn = lambda x, i, s: x.index_reduce(0, i, s, reduce, include_self=include_self)  # noqa: E731
    check_against_cpu(fn, x, index, source, rtol=1e-5, atol=1e-5)


def test_bfloat16_and_dim_0():
    x, index, src = _inputs(torch.bfloat16, seed=1)
    index = index % 5
    check_against_cpu(lambda x, i, s: x.scatter_reduce(0, i, s, "amax"), x, index, src)
    check_against_cpu(lambda x, i, s: x.scatter_reduce(0, i, s, "sum", include_self=False), x, index, src, rtol=2e-2, atol=2e-2)


def test_compiled_forward_and_backward():
    x, index, src = _inputs(torch.float32, seed=2)
    src = src.nan_to_num()[:3, :5].contiguous()  # CPU's backward needs src of the index's shape

    def fn(x, i, s):
        return (x.scatter_reduce(1, i, s, "amax", include_self=False) * 2 + x.scatter_reduce(1, i, s, "mean")).sum()

    rx, rs = x.clone().requires_grad_(), src.clone().requires_grad_()
    fn(rx, index, rs).backward()
    nx, ns = x.to(N).requires_grad_(), src.to(N).requires_grad_()
    got = torch.compile(fn, backend="neuron")(nx, index.to(N), ns)
    got.backward()
    torch.testing.assert_close(got.cpu(), fn(x, index, src), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(nx.grad.cpu(), rx.grad, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(ns.grad.cpu(), rs.grad, rtol=1e-5, atol=1e-5)


def test_bad_reduce_raises_what_cpu_raises_at_the_call():
    x, index, src = _inputs(torch.float32)
    with pytest.raises(RuntimeError) as cpu:
        x.scatter_reduce(1, index, src, "median")
    with pytest.raises(RuntimeError) as got:
        x.to(N).scatter_reduce(1, index.to(N), src.to(N), "median")
    assert str(got.value) == str(cpu.value)


IN_PLACE_SCATTERS = {
    "scatter_value": lambda m, i, s: m.scatter_(1, i, 1.0),
    "scatter_int_value": lambda m, i, s: m.scatter_(1, i, 1),  # DeepSeek's group mask
    "scatter_src": lambda m, i, s: m.scatter_(1, i, s),
    "scatter_add": lambda m, i, s: m.scatter_add_(1, i, s),
    "index_add": lambda m, i, s: m.index_add_(1, i[0], s),
}


@pytest.mark.parametrize("name", sorted(IN_PLACE_SCATTERS))
def test_in_place_scatters_run_on_the_device(name):
    """``x.scatter_(...)`` reaches the device as ``scatter.value_out(x, ..., out=x)``: ``out`` being
    ``self`` is the op's in-place form, not an overlap for CPU to judge (it ran through fallback)."""
    fn = IN_PLACE_SCATTERS[name]
    m = torch.rand(3, 5, generator=torch.Generator().manual_seed(0))
    i = torch.tensor([[1, 0], [4, 2], [0, 3]])
    s = torch.arange(6.0).view(3, 2)
    expected = fn(m.clone(), i, s)
    torch_neuronx.clear_op_tracking()
    got = fn(m.to("neuron"), i.to("neuron"), s.to("neuron")).cpu()
    assert torch_neuronx.get_fallback_ops() == [], torch_neuronx.get_fallback_reasons()
    assert torch.equal(got, expected)
