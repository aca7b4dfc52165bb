"""Every kernel's fast form against its own instructions (check_fast_form: the same inputs run
under the exact and the fast executor, everything written compared, one device time)."""

import pytest
import torch
from nkilib.embeddings.rotary import rope_kernel
from nkilib.embeddings.rotary_reference import rope_tables
from nkilib.loss.cross_entropy import CHUNK, cross_entropy_backward_kernel, cross_entropy_kernel
from nkilib.misc.lastdim_softmax import softmax_backward_kernel, softmax_kernel
from nkilib.norm.layernorm import layer_norm_backward_kernel, layer_norm_kernel
from nkilib.norm.residual_rmsnorm import residual_rms_norm_kernel
from nkilib.norm.rmsnorm import rms_norm_backward_kernel, rms_norm_kernel
from nkilib_torch_helpers import DTYPES, inputs
from torch_neuronx.testing import check_fast_form

# fp32: the executors' transcendental and summation order differ in the last bits; bf16: that
# can move a result across a rounding boundary (one bf16 ulp)
TOLERANCE = {torch.float32: {"rtol": 2e-5, "atol": 2e-5}, torch.bfloat16: {"rtol": 8e-3, "atol": 8e-3}}


def _on_device(*tensors):
    return [t.to("neuron") for t in tensors]


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_norm_kernels(dtype):
    x, r, dy, w, b = _on_device(*inputs((130, 200), (130, 200), (130, 200), (200,), (200,), dtype=dtype))
    tol = TOLERANCE[dtype]
    check_fast_form(rms_norm_kernel, x, w, 1e-6, **tol)
    check_fast_form(rms_norm_backward_kernel, dy, x, w, 1e-6, **tol)
    check_fast_form(residual_rms_norm_kernel, x, r, w, 1e-6, **tol)
    check_fast_form(layer_norm_kernel, x + 1.0, w, b, 1e-5, **tol)
    check_fast_form(layer_norm_backward_kernel, dy, x + 1.0, w, 1e-5, **tol)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_rope_kernel_both_ways(dtype, layout):
    (x,) = _on_device(*inputs((2, 130, 3, 64), dtype=dtype))
    cos, sin = (torch.from_numpy(t).to(dtype).to("neuron") for t in rope_tables(130, 64))
    for inverse in (False, True):
        check_fast_form(rope_kernel, x, cos, sin, layout, inverse, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_softmax_kernels(dtype):
    x, dy = _on_device(*inputs((130, 200), (130, 200), dtype=dtype, scale=3.0))
    y = check_fast_form(softmax_kernel, x, **TOLERANCE[dtype])
    check_fast_form(softmax_backward_kernel, dy, y, **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_cross_entropy_kernels(dtype):
    rows, classes = 130, CHUNK + 300
    (logits,) = _on_device(*inputs((rows, classes), dtype=dtype, scale=4.0))
    labels = torch.randint(0, classes, (rows, 1), generator=torch.Generator().manual_seed(0)).float()
    labels[3] = classes + 5  # outside the classes: +inf both ways
    labels = labels.to("neuron")
    loss, lse = check_fast_form(cross_entropy_kernel, logits, labels, rtol=2e-5, atol=2e-5)
    assert torch.isinf(loss.cpu()[3]).all()
    dloss = torch.randn(rows, 1).to("neuron")
    check_fast_form(cross_entropy_backward_kernel, logits, labels, lse, dloss, **TOLERANCE[dtype])
