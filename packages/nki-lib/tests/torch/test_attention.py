"""nkilib.torch.scaled_dot_product_attention on neuron tensors (eager and compiled) against CPU's
F.scaled_dot_product_attention, the fast form against the kernel's instructions, and the
fallback for calls the kernel cannot serve."""

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from nkilib.attention.flash_attention import flash_attention_kernel
from nkilib.torch import NkilibFallbackWarning, scaled_dot_product_attention
from nkilib_torch_helpers import DTYPES, assert_close, inputs
from torch_neuronx.testing import check_fast_form


def _qkv(b, hq, hkv, s, d, dtype=torch.float32, seed=0):
    return inputs((b, hq, s, d), (b, hkv, s, d), (b, hkv, s, d), dtype=dtype, seed=seed)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_eager_matches_cpu_sdpa(dtype, causal):
    q, k, v = _qkv(2, 4, 2, 130, 64, dtype)
    out = scaled_dot_product_attention(*(t.to("neuron") for t in (q, k, v)), is_causal=causal, enable_gqa=True)
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=True)
    assert_close(out.cpu(), ref, dtype)
    assert "nki::flash_attention_kernel" in torch_neuronx.get_executed_ops()


def test_compiled_attention_block(strict):
    q, k, v = _qkv(1, 2, 2, 200, 64, seed=1)

    def block(q, k, v):
        return scaled_dot_product_attention(q * 2.0, k, v, is_causal=True).sum(1)

    out = torch.compile(block, backend="neuron")(*(t.to("neuron") for t in (q, k, v)))
    assert_close(out.cpu(), F.scaled_dot_product_attention(q * 2.0, k, v, is_causal=True).sum(1), torch.float32)
    assert "nki::flash_attention_kernel" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_fast_form_matches_the_instructions(dtype):
    q, k, v = (t.to("neuron") for t in _qkv(1, 2, 1, 600, 64, dtype, seed=2))
    tol = {"rtol": 2e-5, "atol": 2e-5} if dtype == torch.float32 else {"rtol": 8e-3, "atol": 8e-3}
    for causal in (False, True):
        check_fast_form(flash_attention_kernel, q, k, v, causal, 0.125, **tol)


def test_decoding_one_token_against_a_cache():
    q, k, v = _qkv(1, 4, 2, 1, 64, seed=4)
    k, v = inputs((1, 2, 300, 64), (1, 2, 300, 64), seed=5)
    out = scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), enable_gqa=True)
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, enable_gqa=True), torch.float32)
    assert "nki::flash_attention_kernel" in torch_neuronx.get_executed_ops()
    check_fast_form(flash_attention_kernel, *(t.to("neuron") for t in (q, k, v)), True, 0.125, rtol=2e-5, atol=2e-5)


def test_training_and_masks_fall_back_to_torch_sdpa():
    q, k, v = _qkv(1, 2, 2, 64, 32, seed=3)
    qn = q.to("neuron").requires_grad_()
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.attention.backward\]"):
        out = scaled_dot_product_attention(qn, k.to("neuron"), v.to("neuron"), is_causal=True)
    out.sum().backward()
    qc = q.clone().requires_grad_()
    F.scaled_dot_product_attention(qc, k, v, is_causal=True).sum().backward()
    assert_close(qn.grad.cpu(), qc.grad, torch.float32)
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.attention.causal\] is_causal with 16 queries over 64 keys"):
        out = scaled_dot_product_attention(q[:, :, :16].to("neuron"), k.to("neuron"), v.to("neuron"), is_causal=True)
    assert_close(out.cpu(), F.scaled_dot_product_attention(q[:, :, :16], k, v, is_causal=True), torch.float32)
    mask = torch.ones(64, 64, dtype=torch.bool).tril()
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.attention.arguments\]"):
        out = scaled_dot_product_attention(q.to("neuron"), k.to("neuron"), v.to("neuron"), attn_mask=mask.to("neuron"))
    assert_close(out.cpu(), F.scaled_dot_product_attention(q, k, v, attn_mask=mask), torch.float32)
    assert "nki::flash_attention_kernel" not in torch_neuronx.get_executed_ops()
