"""Calls over empty tensors make their results without a kernel, exactly as CPU shapes them; a
call that computes values from empty inputs, or has no lowering, falls back and says why."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx

EMPTY = torch.randn(0, 3)

CASES = {
    "unary": lambda d: EMPTY.to(d).rsqrt(),
    "broadcast_add": lambda d: EMPTY.to(d) + torch.randn(3).to(d),
    "fill_": lambda d: EMPTY.to(d).fill_(2.0),
    "zero_": lambda d: EMPTY.to(d).zero_(),
    "new_zeros": lambda d: EMPTY.to(d).new_zeros((0, 5)),
    "zeros_factory": lambda d: torch.zeros(0, 4, device=d),
    "reduce_nonempty_dim": lambda d: EMPTY.to(d).sum(1),
    "out_resized": lambda d: torch.exp(EMPTY.to(d), out=torch.empty(5, device=d)),
    "transpose_contiguous": lambda d: EMPTY.to(d).t().contiguous(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_empty_results_without_kernel(name, neuron):
    expected = CASES[name]("cpu")
    torch_neuronx.clear_op_tracking()
    actual = CASES[name](neuron)
    assert not torch_neuronx.get_fallback_ops()
    assert actual.device.type == "neuron"
    assert (actual.shape, actual.stride(), actual.dtype) == (expected.shape, expected.stride(), expected.dtype)


def test_empty_operands_beside_others_run_on_the_device(neuron):
    """An empty operand beside non-empty ones is made inside the kernel (no buffer to bind)."""
    x = torch.randn(2, 3)
    torch_neuronx.clear_op_tracking()
    got = torch.cat([EMPTY.to(neuron), x.to(neuron), EMPTY.to(neuron)])
    assert torch_neuronx.get_fallback_ops() == []
    assert torch.equal(got.cpu(), x)


def test_empty_results_beside_values(neuron):
    """An op whose results are empty and not: the kernel computes the others, the empty ones are
    made without a buffer, with CPU's shapes, strides and dtypes."""
    x, w = torch.randn(2, 3, 4), torch.randn(3)
    mean, var = torch.randn(3), torch.rand(3) + 0.5
    op = torch.ops.aten._native_batch_norm_legit_no_training.default
    expected = op(x, w, None, mean, var, 0.1, 1e-5)
    torch_neuronx.clear_op_tracking()
    got = op(x.to(neuron), w.to(neuron), None, mean.to(neuron), var.to(neuron), 0.1, 1e-5)
    assert torch_neuronx.get_fallback_ops() == []
    torch.testing.assert_close(got[0].cpu(), expected[0])
    for g, e in zip(got[1:], expected[1:]):
        assert g.device.type == "neuron" and (g.shape, g.stride(), g.dtype) == (e.shape, e.stride(), e.dtype)


def test_values_from_empty_inputs_fall_back_with_cpu_results(neuron):
    torch_neuronx.clear_op_tracking()
    assert torch.equal(EMPTY.to(neuron).sum(0).cpu(), torch.zeros(3))
    assert torch_neuronx.get_fallback_ops() == ["aten::sum"]
    assert "empty" in torch_neuronx.get_fallback_reasons()["aten::sum"]


def test_invalid_call_over_empty_tensor_raises_cpus_error(neuron):
    with pytest.raises(IndexError, match="non-zero size"):
        EMPTY.to(neuron).amax(0)


def test_fallback_reasons_name_what_the_compiler_lacks(neuron):
    torch_neuronx.clear_op_tracking()
    x = torch.randn(1, 2, 4, 4, 4)
    got = torch.nn.functional.avg_pool3d(x.to(neuron), 2).cpu()
    torch.testing.assert_close(got, torch.nn.functional.avg_pool3d(x, 2))
    reasons = torch_neuronx.get_fallback_reasons()
    assert "reduce_window" in reasons["aten::avg_pool3d"]
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_reasons() == {}
