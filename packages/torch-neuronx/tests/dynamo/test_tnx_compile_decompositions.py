"""The backend's decomposition table keeps graphs functional: ``F.pad`` (``constant_pad_nd``,
which Transformers' causal-LM loss applies to the labels) compiles, forward and backward, for any
pad widths, values and dims. PyTorch's own decomposition of it writes in place (``prims.copy_to``),
which AOTAutograd refuses."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from tnx_helpers import assert_equal


def test_pad_as_the_issue_wrote_it():
    torch._dynamo.reset()
    x = torch.randn(3, 5)
    got = torch.compile(lambda x: F.pad(x, (0, 1), value=-100.), backend="neuron")(x.to("neuron"))
    assert_equal(got, F.pad(x, (0, 1), value=-100.))


def test_labels_padded_as_a_causal_lm_loss_pads_them():
    torch._dynamo.reset()
    labels = torch.randint(0, 50, (2, 7))

    def shift_labels(labels):
        return F.pad(labels, (0, 1), value=-100)[..., 1:].contiguous()

    assert_equal(torch.compile(shift_labels, backend="neuron")(labels.to("neuron")), shift_labels(labels))


@pytest.mark.parametrize("shape, pad, value", [
    ((5,), (2, 3), 0.0),
    ((3, 5), (1, 2), 3.5),
    ((3, 5), (-1, 2), -1.0),                 # negative widths crop
    ((3, 5), (2, -1), float("-inf")),
    ((2, 3, 4), (1, 1, 2, 0), 7.0),
    ((2, 3, 4), (0, 0, 0, 0, 1, 1), -2.0),   # the leading dim
    ((1, 1, 1, 1), (1, 0, 0, 1), 1.0),
    ((2, 1, 130, 3), (0, 129, 0, 0), 0.25),
])
def test_pad_widths_values_and_dims_forward_and_backward(shape, pad, value):
    torch._dynamo.reset()
    x = torch.randn(shape)

    def f(x):
        y = F.pad(x, pad, value=value)
        return y, (y.clamp(-10, 10) * y.clamp(-10, 10)).sum()

    xn = x.to("neuron").requires_grad_()
    got, loss = torch.compile(f, backend="neuron")(xn)
    loss.backward()
    xr = x.clone().requires_grad_()
    expected, expected_loss = f(xr)
    expected_loss.backward()
    assert_equal(got.detach(), expected.detach())
    torch.testing.assert_close(xn.grad.cpu(), xr.grad, rtol=1e-5, atol=1e-5)


def test_pad_of_a_non_contiguous_input():
    torch._dynamo.reset()
    x = torch.randn(6, 4)
    got = torch.compile(lambda x: F.pad(x, (1, 1, 0, 2), value=9.0), backend="neuron")(x.to("neuron").t())
    assert_equal(got, F.pad(x.t(), (1, 1, 0, 2), value=9.0))
