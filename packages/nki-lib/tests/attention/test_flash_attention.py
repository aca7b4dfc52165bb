"""Flash attention forward against the numpy reference: fp32 and bf16, causal and not, one
query, grouped-query and multi-query heads, sequences of partial 128-row tiles and of several
512-key blocks, head dims 64 and 128."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.attention import flash_attention
from nkilib.attention.flash_attention_reference import attention_reference
from nkilib_helpers import BF16, DTYPES, assert_close, randn

# (B, Hq, Hkv, S, d)
SHAPES = [pytest.param((1, 1, 1, 1, 64), id="one-query"), pytest.param((1, 2, 1, 130, 64), id="gqa-130"),
          pytest.param((2, 4, 1, 257, 128), id="mqa-257-d128"), pytest.param((1, 2, 2, 700, 64), id="mha-700")]


def _qkv(shape, dtype, seed=0):
    b, hq, hkv, s, d = shape
    return (randn((b, hq, s, d), dtype, seed=seed), randn((b, hkv, s, d), dtype, seed=seed + 1),
            randn((b, hkv, s, d), dtype, seed=seed + 2))


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference(shape, dtype, causal):
    q, k, v = _qkv(shape, dtype)
    out = flash_attention(q, k, v, causal=causal)
    assert out.dtype == np.dtype(dtype) and out.shape == q.shape
    # bf16: the probabilities are rounded to bf16 before they meet V
    assert_close(out, attention_reference(q, k, v, causal), dtype, atol=1e-2 if dtype is BF16 else None)


# (B, Hq, Hkv, Sq, Sk, d): one new token against a cache of 700 keys; a chunk of 130 after 170
DECODE = [pytest.param((2, 4, 1, 1, 700, 64), id="decode-1x700"), pytest.param((1, 2, 2, 130, 300, 128), id="chunk-130x300")]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", DECODE)
def test_fewer_queries_than_keys_are_the_last_positions(shape, dtype, causal):
    b, hq, hkv, sq, sk, d = shape
    q, k, v = randn((b, hq, sq, d), dtype, seed=7), randn((b, hkv, sk, d), dtype, seed=8), randn((b, hkv, sk, d), dtype, seed=9)
    out = flash_attention(q, k, v, causal=causal)
    assert out.shape == q.shape
    assert_close(out, attention_reference(q, k, v, causal), dtype, atol=1e-2 if dtype is BF16 else None)


def test_scale_and_the_first_query_seeing_only_the_first_key():
    q, k, v = _qkv((1, 1, 1, 600, 64), np.float32, seed=5)
    assert_close(flash_attention(q, k, v, scale=0.3), attention_reference(q, k, v, scale=0.3), np.float32)
    out = flash_attention(q * 4.0, k, v, causal=True)
    np.testing.assert_allclose(out[0, 0, 0], v[0, 0, 0], rtol=1e-6, atol=1e-6)


def test_bad_inputs_name_the_argument():
    q, k, v = _qkv((1, 3, 2, 16, 64), np.float32)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.heads\] 3 query heads over 2 key/value heads"):
        flash_attention(q, k, v)
    q, k, v = _qkv((1, 2, 1, 16, 160), np.float32)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.head_dim\] head dim 160 of q; .* at most 128"):
        flash_attention(q, k, v)
    q, k, v = _qkv((1, 2, 1, 16, 64), np.float32)
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] k has shape \[1, 1, 16, 32\]; expected \[1, Hkv, Sk, 64\]"):
        flash_attention(q, k[..., :32], v)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.causal\] causal with 16 queries over 15 keys"):
        flash_attention(q, k[:, :, :15], v[:, :, :15], causal=True)
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] v has shape \[1, 1, 16, 32\], expected \[1, 1, 16, 64\]"):
        flash_attention(q, k, v[..., :32])
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] v has dtype bfloat16, expected float32"):
        flash_attention(q, k, v.astype(BF16))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] q has shape \[2, 16, 64\]"):
        flash_attention(q[0], k, v)
    s = 80000  # K^T alone: 80000 fp32 keys per partition
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] flash_attention: sequence {s} with head dim 64"):
        flash_attention(np.zeros((1, 1, s, 64), np.float32), np.zeros((1, 1, s, 64), np.float32),
                        np.zeros((1, 1, s, 64), np.float32))
