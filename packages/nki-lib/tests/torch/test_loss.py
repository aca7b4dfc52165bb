"""nkilib.torch.cross_entropy on neuron tensors: eager and compiled, loss and gradient against
CPU autograd of F.cross_entropy (ignore_index and every reduction), and the fallback."""

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from nkilib.loss.cross_entropy import CHUNK
from nkilib.torch import NkilibFallbackWarning, cross_entropy
from nkilib_torch_helpers import DTYPES, assert_close, inputs

SHAPES = [pytest.param((1, 64), id="1x64"), pytest.param((130, 200), id="130x200"),
          pytest.param((257, CHUNK + 808), id=f"257x{CHUNK + 808}")]


def _labels(rows, classes, seed=0):
    labels = torch.randint(0, classes, (rows,), generator=torch.Generator().manual_seed(seed))
    labels[1::7] = -100  # ignored rows
    return labels


def _loss_and_grad(fn, logits, labels, device):
    x = logits.detach().to(device).requires_grad_()
    loss = fn(x, labels.to(device))
    loss.float().backward()
    return loss.detach().cpu(), x.grad.cpu()


@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_eager_loss_and_grad_match_cpu_autograd(shape, dtype, reduction):
    (logits,) = inputs(shape, dtype=dtype, scale=4.0)
    labels = _labels(*shape)
    loss, grad = _loss_and_grad(lambda x, y: cross_entropy(x, y, reduction=reduction), logits, labels, "neuron")
    ref, ref_grad = _loss_and_grad(lambda x, y: F.cross_entropy(x, y, reduction=reduction), logits.float(), labels, "cpu")
    assert_close(loss, ref, dtype)
    assert_close(grad, ref_grad, dtype)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::cross_entropy_kernel" in executed and "nki::cross_entropy_backward_kernel" in executed


def test_unreduced_losses_are_zero_on_ignored_rows():
    (logits,) = inputs((20, 33))
    labels = _labels(20, 33)
    loss = cross_entropy(logits.to("neuron"), labels.to("neuron"), reduction="none").cpu()
    torch.testing.assert_close(loss, F.cross_entropy(logits, labels, reduction="none"), rtol=1e-5, atol=1e-5)
    assert (loss[labels == -100] == 0).all()


def test_compiled_lm_head_and_loss(strict):
    h, w = inputs((130, 64), (300, 64), seed=1)
    labels = _labels(130, 300, seed=2)

    def step(h, w, labels):
        return cross_entropy(h @ w.t(), labels)

    hn, wn = h.to("neuron").requires_grad_(), w.to("neuron").requires_grad_()
    loss = torch.compile(step, backend="neuron")(hn, wn, labels.to("neuron"))
    loss.backward()
    hc, wc = h.clone().requires_grad_(), w.clone().requires_grad_()
    ref = F.cross_entropy(hc @ wc.t(), labels)
    ref.backward()
    assert_close(loss.detach().cpu(), ref.detach(), torch.float32)
    assert_close(hn.grad.cpu(), hc.grad, torch.float32)
    assert_close(wn.grad.cpu(), wc.grad, torch.float32)
    assert "nki::cross_entropy_backward_kernel" in torch_neuronx.get_executed_ops()


def test_per_position_logits_fall_back_to_torch():
    (logits,) = inputs((4, 10, 3))  # [N, C, d]: F.cross_entropy's K-dimensional form
    labels = torch.randint(0, 10, (4, 3))
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.shape\] logits has shape \[4, 10, 3\]"):
        loss = cross_entropy(logits.to("neuron"), labels.to("neuron"))
    assert_close(loss.cpu(), F.cross_entropy(logits, labels), torch.float32)
    assert "nki::cross_entropy_kernel" not in torch_neuronx.get_executed_ops()


def test_a_device_label_outside_the_classes_gives_an_infinite_loss_not_a_finite_one():
    """Device labels are not read back to check them; the kernel makes such a row's loss +inf."""
    loss = cross_entropy(torch.zeros(3, 5, device="neuron"), torch.tensor([0, 7, 4], device="neuron"), reduction="none")
    loss = loss.cpu()
    assert torch.isinf(loss[1]) and loss[1] > 0
    torch.testing.assert_close(loss[[0, 2]], torch.full((2,), 5.0).log())
