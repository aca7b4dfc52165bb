"""nkilib.torch.softmax on neuron tensors: eager and compiled, forward and gradient against CPU
autograd of torch.softmax, and the fallback for other dims and dtypes."""

import pytest
import torch
import torch_neuronx
from nkilib.torch import NkilibFallbackWarning, softmax
from nkilib_torch_helpers import DTYPES, assert_close, inputs, run_with_grads

SHAPES = [pytest.param((1, 64), id="1x64"), pytest.param((130, 200), id="130x200"),
          pytest.param((3, 50, 300), id="3x50x300")]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_eager_forward_and_grad_match_cpu_autograd(shape, dtype):
    (x,) = inputs(shape, dtype=dtype, scale=3.0)
    grads_out = inputs(shape, seed=4)
    (y,), (dx,) = run_with_grads(softmax, [x], grads_out, "neuron")
    (ref,), (ref_dx,) = run_with_grads(lambda t: torch.softmax(t, -1), [x.float()], grads_out, "cpu")
    assert_close(y, ref, dtype)
    assert_close(dx, ref_dx, dtype)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::softmax_kernel" in executed and "nki::softmax_backward_kernel" in executed


def test_compiled_attention_probabilities(strict):
    q, k = inputs((130, 64), (200, 64), seed=1)
    grads_out = inputs((130, 200), seed=2)

    def probs(q, k):
        return softmax(q @ k.t() * 0.125)

    (y,), grads = run_with_grads(torch.compile(probs, backend="neuron"), [q, k], grads_out, "neuron")
    (ref,), ref_grads = run_with_grads(lambda q, k: torch.softmax(q @ k.t() * 0.125, -1), [q, k], grads_out, "cpu")
    assert_close(y, ref, torch.float32)
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, torch.float32)
    assert "nki::softmax_backward_kernel" in torch_neuronx.get_executed_ops()


def test_other_dims_fall_back_to_torch_softmax():
    (x,) = inputs((8, 16))
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.softmax.dim\] dim=0"):
        y = softmax(x.to("neuron"), dim=0)
    assert_close(y.cpu(), torch.softmax(x, 0), torch.float32)
    assert "nki::softmax_kernel" not in torch_neuronx.get_executed_ops()
