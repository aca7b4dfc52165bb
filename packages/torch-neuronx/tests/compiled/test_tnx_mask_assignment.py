"""``x[mask] = v`` compiled: a bool mask over leading dims with values that broadcast to the rest.

The masked fill of attention masks and padding, ``x.index_put((mask,), v, accumulate=True)``,
``x.index_put_``: each compiles to a select (no data-dependent shape) and gives CPU's values -
also for masks that change between calls, odd shapes, non-contiguous operands and in backward.
Values with one row per selected position depend on the mask's count: those compile as the general
path does (CPU's values or a NeuronCompileError), never a silently wrong answer."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx  # noqa: F401 - the neuron device
from tnx_helpers import execution_mode
from torch_neuronx.dynamo import NeuronCompileError

N = "neuron"


def _assign(x, mask, value):
    x = x.clone()
    x[mask] = value
    return x


def _accumulate(x, mask, value):
    return x.index_put((mask,), value, accumulate=True)


def _index_put_(x, mask, value):
    x = x.clone()
    x.index_put_((mask,), value)
    return x * 2


def _fill_number(x, mask, value):
    x = x.clone()
    x[mask] = float("-inf")  # an attention mask's fill
    return x


# (name, fn, x, mask, value): CPU tensors; the mask covers x's leading dims.
CASES = [
    ("fill_number_2d_mask", _fill_number, torch.randn(3, 130), torch.rand(3, 130) > 0.3, torch.tensor(0.)),
    ("assign_scalar_tensor", _assign, torch.randn(4, 5), torch.rand(4, 5) > 0.5, torch.tensor(7.)),
    ("assign_rows_broadcast", _assign, torch.randn(4, 130), torch.tensor([True, False, True, True]), torch.randn(130)),
    ("assign_size_1_dims", _assign, torch.randn(1, 3, 1), torch.tensor([[True, False, True]]), torch.tensor([2.])),
    ("assign_0_dim", _assign, torch.tensor(1.5), torch.tensor(True), torch.tensor(-3.)),
    ("assign_non_contiguous", _assign, torch.randn(5, 4).t(), torch.tensor([False, True, True, False]), torch.randn(5)),
    ("assign_int64", _assign, torch.arange(12).view(3, 4) + 2**40, torch.tensor([True, False, True]), torch.tensor(2**41 + 1)),
    ("accumulate_rows", _accumulate, torch.zeros(4, 130), torch.tensor([True, False, True, False]), torch.ones(130)),
    ("accumulate_keeps_negative_zero", _accumulate, torch.full((2, 3), -0.0), torch.tensor([[True, False, False], [False, False, True]]),
     torch.tensor(0.)),
    ("index_put_in_place_3d", _index_put_, torch.randn(2, 3, 4), torch.rand(2, 3) > 0.5, torch.randn(1, 4)),
    ("bool_tensor_values", _assign, torch.zeros(3, 2, dtype=torch.bool), torch.tensor([True, False, True]), torch.tensor(True)),
]
IDS = [name for name, *_ in CASES]


def _same(got, expected):
    assert got.shape == expected.shape and got.dtype == expected.dtype
    assert torch.equal(got, expected), (got, expected)
    if got.is_floating_point():
        assert torch.equal(torch.signbit(got), torch.signbit(expected))  # -0.0 stays -0.0


@pytest.mark.parametrize("name, fn, x, mask, value", CASES, ids=IDS)
def test_masked_assignment_compiles_to_cpus_values(name, fn, x, mask, value):
    with execution_mode("compile"):
        compiled = torch.compile(fn, backend="neuron")
        _same(compiled(x.to(N), mask.to(N), value.to(N)).cpu(), fn(x, mask, value))
        # the same graph for another mask (another count of selected positions): no shape depends on it
        other = ~mask
        _same(compiled(x.to(N), other.to(N), value.to(N)).cpu(), fn(x, other, value))


def test_uint8_mask_is_read_as_a_mask():
    x, mask, value = torch.randn(4, 6), torch.tensor([1, 0, 0, 1], dtype=torch.uint8), torch.randn(6)
    with execution_mode("compile"):
        got = torch.compile(_assign, backend="neuron")(x.to(N), mask.to(N), value.to(N)).cpu()
    _same(got, _assign(x, mask.bool(), value))


def test_masked_fill_in_a_model_trains_as_on_cpu():
    """Backward of ``x[mask] = v``: the gradient of the filled positions is zero (of ``v``, their sum)."""

    def step(w, v, mask):
        h = w * 3
        h[mask] = v
        return (h * torch.arange(1., h.numel() + 1, device=h.device).view(h.shape)).sum()

    mask = torch.tensor([[True, False, True], [False, False, True]])
    grads = {}
    for device in ("cpu", N):
        w = torch.randn(2, 3, generator=torch.Generator().manual_seed(0)).to(device).requires_grad_()
        v = torch.tensor(0.5, device=device, requires_grad=True)
        with execution_mode("compile" if device == N else "eager"):
            fn = torch.compile(step, backend="neuron") if device == N else step
            fn(w, v, mask.to(device)).backward()
        grads[device] = (w.grad.cpu(), v.grad.cpu())
    for got, expected in zip(grads[N], grads["cpu"], strict=True):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_values_with_one_row_per_selected_position_are_never_silently_wrong():
    x, mask = torch.randn(4, 5), torch.tensor([True, False, True, True])
    value = torch.randn(3, 5)
    with execution_mode("compile"):
        try:
            got = torch.compile(_assign, backend="neuron")(x.to(N), mask.to(N), value.to(N)).cpu()
        except Exception as err:  # noqa: BLE001 - dynamo wraps the backend's error
            assert isinstance(getattr(err, "inner_exception", err), NeuronCompileError), err
            return
    _same(got, _assign(x, mask, value))
