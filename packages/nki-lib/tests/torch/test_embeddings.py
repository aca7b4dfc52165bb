"""nkilib.torch.rope on neuron tensors: eager and compiled, forward and gradient against CPU
autograd of the plain rotation, and the fallback when the tables need a gradient."""

import numpy as np
import pytest
import torch
import torch_neuronx
from nkilib import NkilibError
from nkilib.embeddings.rotary_reference import rope_reference, rope_tables
from nkilib.torch import NkilibFallbackWarning, rope, rope_plain
from nkilib_torch_helpers import DTYPES, assert_close, inputs, run_with_grads

LAYOUTS = ["half", "interleaved"]
SHAPES = [pytest.param((1, 1, 64), id="1x1x64"), pytest.param((2, 130, 3, 64), id="2x130x3x64")]


def _tables(seq, dim, dtype):
    cos, sin = rope_tables(seq, dim)
    return torch.from_numpy(cos).to(dtype), torch.from_numpy(sin).to(dtype)


def test_plain_rotation_is_the_numpy_reference():
    x = inputs((5, 2, 8))[0]
    cos, sin = _tables(5, 8, torch.float32)
    for layout in LAYOUTS:
        np.testing.assert_allclose(rope_plain(x, cos, sin, layout).numpy(),
                                   rope_reference(x.numpy(), cos.numpy(), sin.numpy(), layout), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_eager_forward_and_grad_match_cpu_autograd(shape, dtype, layout):
    (x,) = inputs(shape, dtype=dtype)
    cos, sin = _tables(shape[-3], shape[-1], dtype)
    grads_out = inputs(shape, seed=5)
    (y,), (dx,) = run_with_grads(lambda x: rope(x, cos.to("neuron"), sin.to("neuron"), layout), [x], grads_out, "neuron")
    (ref,), (ref_dx,) = run_with_grads(lambda x: rope_plain(x, cos.float(), sin.float(), layout), [x.float()],
                                       grads_out, "cpu")
    assert_close(y, ref, dtype)
    assert_close(dx, ref_dx, dtype)
    assert "nki::rope_kernel" in torch_neuronx.get_executed_ops()


def test_compiled_attention_input_rotation(strict):
    """q and k rotated inside a compiled function (the kernel launched between the segments),
    with the gradient through both."""
    q, k = inputs((2, 130, 4, 64), (2, 130, 4, 64), seed=2)
    cos, sin = (t.to("neuron") for t in _tables(130, 64, torch.float32))

    def scores(q, k):
        return (rope(q * 0.125, cos, sin) * rope(k, cos, sin)).sum(-1)

    def scores_cpu(q, k):
        c, s = cos.cpu(), sin.cpu()
        return (rope_plain(q * 0.125, c, s) * rope_plain(k, c, s)).sum(-1)

    grads_out = inputs((2, 130, 4), seed=3)
    (y,), grads = run_with_grads(torch.compile(scores, backend="neuron"), [q, k], grads_out, "neuron")
    (ref,), ref_grads = run_with_grads(scores_cpu, [q, k], grads_out, "cpu")
    assert_close(y, ref, torch.float32)
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, torch.float32)
    assert "nki::rope_kernel" in torch_neuronx.get_executed_ops()


def test_tables_needing_a_gradient_run_the_plain_rotation():
    (x,) = inputs((6, 2, 8))
    cos, sin = _tables(6, 8, torch.float32)
    grads_out = inputs((6, 2, 8), seed=1)
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.rope.table_grad\]"):
        _, grads = run_with_grads(lambda x, c, s: rope(x, c, s), [x, cos, sin], grads_out, "neuron")
    _, ref_grads = run_with_grads(lambda x, c, s: rope_plain(x, c, s), [x, cos, sin], grads_out, "cpu")
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, torch.float32)
    assert "nki::rope_kernel" not in torch_neuronx.get_executed_ops()


def test_mismatched_tables_are_an_error_and_an_unknown_layout_is_refused():
    (x,) = inputs((4, 2, 6))
    cos, sin = _tables(4, 6, torch.float32)
    xn, cn, sn = x.to("neuron"), cos.to("neuron"), sin.to("neuron")
    # tables for 3 positions, x of 4: refused by the kernel (warned), then by the plain rotation
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.shape\] cos has shape \[3, 3\], expected \[4, 3\]"):
        with pytest.raises(RuntimeError):
            rope(xn, cn[:3], sn[:3])
    with pytest.raises(NkilibError, match=r"\[nkilib.rope.layout\] layout='neox'"):
        rope(xn, cn, sn, "neox")
