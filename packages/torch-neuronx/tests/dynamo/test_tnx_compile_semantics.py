"""PyTorch semantics through the neuron backend: SDPA trains (traced as matmul/softmax), strided
inputs are read through their layout, BatchNorm updates its running statistics, in-place updates
of inputs land in the caller's tensor, view outputs have eager's values."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F


def test_sdpa_forward_and_backward():
    torch._dynamo.reset()
    torch.manual_seed(0)
    q = torch.randn(2, 2, 8, 16, requires_grad=True)

    def f(q):
        return F.scaled_dot_product_attention(q, q * 0.5, q, is_causal=True).sum()

    qn = q.detach().to("neuron").requires_grad_()
    loss = torch.compile(f, backend="neuron")(qn)
    loss.backward()
    expected = f(q)
    expected.backward()
    torch.testing.assert_close(loss.cpu(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(qn.grad.cpu(), q.grad, rtol=1e-5, atol=1e-5)


def test_transposed_input_and_its_result_layout():
    torch._dynamo.reset()
    a = torch.randn(16, 8)

    def g(x):
        return (x * 2).exp()

    got = torch.compile(g, backend="neuron")(a.to("neuron").t())
    expected = g(a.t())
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert got.stride() == expected.stride()


def test_batchnorm_training_updates_running_stats():
    torch._dynamo.reset()
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    dev = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8))
    dev.load_state_dict(cpu.state_dict())
    dev = dev.to("neuron")
    x = torch.randn(16, 8)
    out = torch.compile(dev, backend="neuron")(x.to("neuron"))
    out.sum().backward()
    expected = cpu(x)
    expected.sum().backward()
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dev[1].running_mean.cpu(), cpu[1].running_mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dev[1].running_var.cpu(), cpu[1].running_var, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dev[0].weight.grad.cpu(), cpu[0].weight.grad, rtol=1e-4, atol=1e-5)


def test_input_mutation_and_view_output():
    torch._dynamo.reset()

    def h(x):
        x.add_(1)
        return (x * 2).view(2, 2)[0]

    x = torch.arange(4.0).to("neuron")
    out = torch.compile(h, backend="neuron")(x)
    assert x.cpu().tolist() == [1.0, 2.0, 3.0, 4.0]
    assert out.cpu().tolist() == [2.0, 4.0]


def test_host_scalar_arguments_and_host_only_graphs():
    torch._dynamo.reset()
    x, s = torch.arange(6.0).reshape(2, 3).to("neuron"), torch.tensor(3.0)

    def scaled(x, s):
        return x * s, s * 2 + 1

    got, host = torch.compile(scaled, backend="neuron")(x, s)
    assert got.cpu().tolist() == [[0.0, 3.0, 6.0], [9.0, 12.0, 15.0]]
    assert host.device.type == "cpu" and host.item() == 7.0

    def host_only(s):
        return s * 2 + 1

    assert torch.compile(host_only, backend="neuron")(s).item() == 7.0


# Empty tensors and out= tensors the op resizes, inside compiled functions (dynamo runs out= ops
# of another shape eagerly, between graphs: those eager ops must not be traced by dynamo).
OUT_AND_EMPTY = {
    "abs_of_an_empty_tensor": (lambda x: x.abs(), lambda d: torch.empty(0, device=d)),
    "abs_into_an_empty_out": (lambda x: torch.abs(x, out=torch.empty(0, device=x.device)),
                              lambda d: torch.tensor([-1.0, 2.0, -3.0], device=d)),
    "mul_into_an_empty_out": (lambda x: torch.mul(x, x, out=torch.empty(0, device=x.device)),
                              lambda d: torch.tensor([0.25, -4.0], device=d)),
    "sum_into_an_out_of_another_shape": (lambda x: torch.sum(x, 0, out=torch.empty(3, dtype=torch.int64, device=x.device)),
                                         lambda d: torch.tensor([1, 2, 3, 4], dtype=torch.int32, device=d)),
    "remainder_of_empty_into_an_out_of_another_shape": (
        lambda x: torch.remainder(x, x, out=torch.empty(3, dtype=torch.int64, device=x.device)),
        lambda d: torch.empty(1, 0, 1, dtype=torch.int64, device=d)),
}


@pytest.mark.parametrize("name", sorted(OUT_AND_EMPTY))
def test_empty_and_resized_out_tensors_match_eager(name):
    fn, make = OUT_AND_EMPTY[name]
    torch._dynamo.reset()
    got = torch.compile(fn, backend="neuron")(make("neuron"))
    expected = fn(make("cpu"))
    assert (got.shape, got.stride(), got.dtype) == (expected.shape, expected.stride(), expected.dtype)
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)


BROADCAST_OUTPUTS = {
    "expand": lambda x: (x * 2).expand(2, 3),
    "expand_column": lambda x: (x * 2)[:, None].expand(3, 4),
    "expanded_and_its_base": lambda x: (lambda y: (y.expand(2, 3), y))(x * 2),
    "expand_then_transpose": lambda x: (x + 1).unsqueeze(0).expand(5, 3).t(),
    "every_other": lambda x: (x * 3)[::2],
    "expand_of_a_transposed_result": lambda x: (x[:, None] * x).t()[None].expand(2, 3, 3),
}


@pytest.mark.parametrize("name", sorted(BROADCAST_OUTPUTS))
def test_broadcast_and_gapped_views_of_computed_values_keep_eager_strides(name):
    """fuzz-30: ``(x * 2).expand(2, 3)`` came back contiguous (3, 1); eager and inductor give the
    view (0, 1) - its elements share memory, as eager's do."""
    fn = BROADCAST_OUTPUTS[name]
    torch._dynamo.reset()
    x = torch.tensor([1.0, -2.0, 3.5])
    got, expected = torch.compile(fn, backend="neuron")(x.to("neuron")), fn(x)
    got, expected = (got if isinstance(got, tuple) else (got,)), (expected if isinstance(expected, tuple) else (expected,))
    for g, e in zip(got, expected):
        assert (g.shape, g.stride(), g.storage_offset()) == (e.shape, e.stride(), e.storage_offset())
        torch.testing.assert_close(g.cpu(), e, rtol=0, atol=0)
    if name == "expanded_and_its_base":
        assert got[0].untyped_storage().data_ptr() == got[1].untyped_storage().data_ptr()
