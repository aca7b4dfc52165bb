"""nkilib.torch's norms on neuron tensors: eager and compiled, forward and gradients against
CPU autograd of torch's own ops, and the fallback to those ops for arguments no kernel takes."""

import warnings

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from nkilib.norm.rmsnorm import max_hidden
from nkilib.torch import NkilibFallbackWarning, layer_norm, residual_rms_norm, rms_norm
from nkilib_torch_helpers import DTYPES, assert_close, inputs, run_with_grads

SHAPES = [pytest.param((1, 64), id="1x64"), pytest.param((130, 200), id="130x200"),
          pytest.param((2, 129, 512), id="2x129x512")]


def _rms_cpu(x, w):
    return F.rms_norm(x.float(), (x.shape[-1],), w.float(), 1e-6)


def _ln_cpu(x, w, b):
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5)


def _res_cpu(x, r, w):
    h = x.float() + r.float()
    return F.rms_norm(h, (h.shape[-1],), w.float(), 1e-6), h


def _compare(fn, cpu_fn, args, dtype, n_out=1):
    rows = args[0].numel() // args[0].shape[-1]
    grads_out = inputs(*[args[0].shape] * n_out, seed=9)
    outs, grads = run_with_grads(fn, args, grads_out, "neuron")
    ref_outs, ref_grads = run_with_grads(cpu_fn, [a.float() for a in args], grads_out, "cpu")
    for o, r in zip(outs, ref_outs):
        assert_close(o, r, dtype)
    assert_close(grads[0], ref_grads[0], dtype)  # d input
    for g, r in zip(grads[1:], ref_grads[1:]):  # weight / bias / residual: sums over rows
        assert_close(g, r, dtype, scale=rows ** 0.5 if g.dim() == 1 else 1.0)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_rms_norm_eager_forward_and_grads_match_cpu_autograd(shape, dtype):
    x, w = inputs(shape, shape[-1:], dtype=dtype)
    _compare(lambda x, w: rms_norm(x, w), _rms_cpu, [x, w], dtype)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::rms_norm_kernel" in executed and "nki::rms_norm_backward_kernel" in executed


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_layer_norm_eager_forward_and_grads_match_cpu_autograd(shape, dtype):
    x, w, b = inputs(shape, shape[-1:], shape[-1:], dtype=dtype)
    _compare(lambda x, w, b: layer_norm(x + 2.0, w, b), lambda x, w, b: _ln_cpu(x + 2.0, w, b), [x, w, b], dtype)
    executed = torch_neuronx.get_executed_ops()
    assert "nki::layer_norm_kernel" in executed and "nki::layer_norm_backward_kernel" in executed


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
@pytest.mark.parametrize("shape", SHAPES)
def test_residual_rms_norm_eager_forward_and_grads_match_cpu_autograd(shape, dtype):
    x, r, w = inputs(shape, shape, shape[-1:], dtype=dtype)
    # both outputs carry gradient: the normalized y and the sum h (the next residual)
    _compare(lambda x, r, w: residual_rms_norm(x, r, w), _res_cpu, [x, r, w], dtype, n_out=2)
    assert "nki::residual_rms_norm_kernel" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_compiled_block_launches_the_kernels_forward_and_backward(strict, dtype):
    def block(x, r, w, g, b):
        y, h = residual_rms_norm(x * 0.5, r, w)
        return layer_norm(h, g, b) + y

    def block_cpu(x, r, w, g, b):
        y, h = _res_cpu(x * 0.5, r, w)
        return _ln_cpu(h, g, b) + y

    args = inputs((130, 256), (130, 256), (256,), (256,), (256,), dtype=dtype, seed=3)
    grads_out = inputs((130, 256), seed=4)
    outs, grads = run_with_grads(torch.compile(block, backend="neuron"), args, grads_out, "neuron")
    ref_outs, ref_grads = run_with_grads(block_cpu, [a.float() for a in args], grads_out, "cpu")
    assert_close(outs[0], ref_outs[0], dtype)
    for g, r in zip(grads, ref_grads):
        assert_close(g, r, dtype, scale=130 ** 0.5 if g.dim() == 1 else 1.0)
    executed = torch_neuronx.get_executed_ops()
    for kernel in ("residual_rms_norm_kernel", "layer_norm_kernel", "layer_norm_backward_kernel", "rms_norm_backward_kernel"):
        assert f"nki::{kernel}" in executed, (kernel, executed)


def test_unsupported_dtype_falls_back_with_one_warning_per_shape():

    x, w = inputs((4, 32), (32,), dtype=torch.float64)
    xn, wn = x.to("neuron"), w.to("neuron")
    with pytest.warns(NkilibFallbackWarning, match=r"nkilib.torch.rms_norm: .*\[nkilib.dtype\] x has dtype float64"):
        y = rms_norm(xn, wn)
    torch.testing.assert_close(y.cpu(), F.rms_norm(x, (32,), w, 1e-6))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkilibFallbackWarning)
        rms_norm(xn, wn)  # the same shape again: no second warning
    with pytest.warns(NkilibFallbackWarning, match=r"x has dtype float64"):
        rms_norm(xn[:2], wn)  # a new shape: warned again
    assert "nki::rms_norm_kernel" not in torch_neuronx.get_executed_ops()


def test_rows_wider_than_sbuf_fall_back_to_the_plain_op():
    h = max_hidden("bfloat16") + 1
    x, w = inputs((2, h), (h,), dtype=torch.bfloat16)
    with pytest.warns(NkilibFallbackWarning, match=rf"\[nkilib.sbuf\] rms_norm: hidden size of {h}"):
        y = rms_norm(x.to("neuron"), w.to("neuron"))
    assert_close(y.cpu(), _rms_cpu(x, w), torch.bfloat16)


def test_a_width_only_the_forward_takes_falls_back_when_a_gradient_is_needed():
    """Backward kernels keep more rows on chip than forward ones: with requires_grad the wrapper
    checks both, so a training step never reaches a backward kernel that refuses the shape."""
    h = max_hidden("float32", backward=True) + 1
    assert h <= max_hidden("float32")
    x, w = inputs((2, h), (h,))
    y = rms_norm(x.to("neuron"), w.to("neuron"))  # no gradient: the forward kernel
    assert "nki::rms_norm_kernel" in torch_neuronx.get_executed_ops()
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.sbuf\] rms_norm_backward"):
        _compare(lambda x, w: rms_norm(x, w), _rms_cpu, [x, w], torch.float32)
    assert_close(y.cpu(), _rms_cpu(x, w), torch.float32)


def test_missing_weight_and_cpu_tensors_run_torch_ops_without_a_warning():

    x, w, b = inputs((8, 16), (16,), (16,))
    with warnings.catch_warnings():
        warnings.simplefilter("error", NkilibFallbackWarning)
        torch.testing.assert_close(rms_norm(x, w), _rms_cpu(x, w))
        torch.testing.assert_close(layer_norm(x, w, b), _ln_cpu(x, w, b))
        torch.testing.assert_close(rms_norm(x.to("neuron"), None).cpu(), F.rms_norm(x, (16,), None, 1e-6))
    assert not [op for op in torch_neuronx.get_executed_ops() if op.startswith("nki::")]


def test_mismatched_weight_is_refused_by_torchs_op_too():
    """No kernel takes it, and the plain op refuses it: an error, never a result."""
    with pytest.warns(NkilibFallbackWarning, match=r"weight has shape \[31\], expected \[32\]"):
        with pytest.raises(RuntimeError):
            rms_norm(torch.randn(4, 32, device="neuron"), torch.randn(31, device="neuron"))
