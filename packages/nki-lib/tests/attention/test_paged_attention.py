"""Attention over a KV cache (paged with a block table, and contiguous) against the numpy
reference: fp32 and bf16, decoding one token and chunked prefill, GQA/MQA, head dims 64 and 128,
block sizes that do and do not divide 128, per-sequence lengths from 1 to the table's width."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.attention import decode_attention, paged_attention
from nkilib.attention.paged_attention_reference import decode_attention_reference, paged_attention_reference
from nkilib_helpers import BF16, DTYPES, assert_close, randn

# (B, Hq, Hkv, Sq, d, block_size, num_blocks, max_blocks, seq_lens)
CASES = [
    pytest.param((3, 4, 1, 1, 64, 16, 50, 41, (1, 656, 300)), id="decode-mqa-bs16-656"),
    pytest.param((2, 8, 2, 1, 128, 32, 20, 9, (288, 17)), id="decode-gqa-d128-bs32"),
    pytest.param((2, 4, 2, 50, 64, 48, 30, 13, (600, 50)), id="chunk50-bs48"),
    pytest.param((1, 3, 1, 130, 128, 200, 5, 3, (555,)), id="chunk130-group3-bs200"),
    pytest.param((1, 1, 1, 1, 64, 1, 7, 5, (5,)), id="one-head-bs1"),
]


def _inputs(case, dtype, seed=0):
    b, hq, hkv, sq, d, bs, nblocks, maxb, lens = case
    rng = np.random.default_rng(seed)
    q = randn((b, hq, sq, d), dtype, seed=seed)
    kc, vc = randn((nblocks, bs, hkv, d), dtype, seed=seed + 1), randn((nblocks, bs, hkv, d), dtype, seed=seed + 2)
    tables = rng.integers(0, nblocks, (b, maxb)).astype(np.int32)  # blocks shared between sequences too
    return q, kc, vc, tables, np.array(lens, np.int32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_paged_matches_reference(case, dtype):
    q, kc, vc, tables, lens = _inputs(case, dtype)
    out = paged_attention(q, kc, vc, tables, lens)
    assert out.dtype == np.dtype(dtype) and out.shape == q.shape
    assert_close(out, paged_attention_reference(q, kc, vc, tables, lens), dtype, atol=1e-2 if dtype is BF16 else None)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES[1:4])
def test_contiguous_cache_matches_reference(case, dtype):
    b, hq, hkv, sq, d, bs, _nblocks, maxb, lens = case
    q = randn((b, hq, sq, d), dtype, seed=3)
    kc, vc = randn((b, maxb * bs, hkv, d), dtype, seed=4), randn((b, maxb * bs, hkv, d), dtype, seed=5)
    lens = np.array(lens, np.int32)
    out = decode_attention(q, kc, vc, lens, scale=0.2)
    assert_close(out, decode_attention_reference(q, kc, vc, lens, scale=0.2), dtype, atol=1e-2 if dtype is BF16 else None)


def test_a_sequence_sees_only_its_own_blocks_and_length():
    """Poisoned cache rows outside a sequence's blocks or past its length change nothing; a query
    seeing one key returns that key's value."""
    q, kc, vc, _, _ = _inputs((2, 2, 1, 1, 64, 16, 8, 3, (1, 1)), np.float32)
    tables = np.array([[5, 2, 0], [1, 1, 1]], np.int32)
    lens = np.array([33, 1], np.int32)
    out = paged_attention(q, kc, vc, tables, lens)
    kc2, vc2 = kc.copy(), vc.copy()
    for c in (kc2, vc2):
        c[[3, 4, 6, 7]] = 1e4  # no table uses these blocks
        c[0, 1:] = -1e4  # block 0 holds sequence 0's token 32 only
        c[1, 1:] = 1e4  # sequence 1 has one token
    np.testing.assert_array_equal(paged_attention(q, kc2, vc2, tables, lens), out)
    np.testing.assert_allclose(out[1, :, 0], np.broadcast_to(vc[1, 0, 0], (2, 64)), rtol=1e-6, atol=1e-6)


def test_bad_inputs_name_the_argument_and_the_limit():
    q, kc, vc, tables, lens = _inputs((2, 4, 2, 1, 64, 16, 10, 4, (20, 64)), np.float32)
    bad = tables.copy()
    bad[1, 3] = 10
    with pytest.raises(
        NkilibError,
        match=r"\[nkilib.attention.block_table\] block_tables\[1, 3\] = 10 is outside the cache's "
        r"10 blocks: every entry must be in \[0, 10\)",
    ):
        paged_attention(q, kc, vc, bad, lens)
    bad[1, 3] = -1
    with pytest.raises(NkilibError, match=r"block_tables\[1, 3\] = -1 is outside"):
        paged_attention(q, kc, vc, bad, lens)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.seq_lens\] seq_lens\[1\] = 65; each length must be in \[Sq, 64\]"):
        paged_attention(q, kc, vc, tables, np.array([20, 65], np.int32))
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.seq_lens\] seq_lens\[0\] = 2; .* \[3, 64\]"):
        paged_attention(np.concatenate([q] * 3, axis=2), kc, vc, tables, np.array([2, 5], np.int32))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] block_tables has dtype int64; the kernel takes int32"):
        paged_attention(q, kc, vc, tables.astype(np.int64), lens)
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] seq_lens has shape \[3\], expected \[2\]"):
        paged_attention(q, kc, vc, tables, np.array([1, 2, 3], np.int32))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] block_tables has shape \[1, 4\]; expected \[2, max_blocks\]"):
        paged_attention(q, kc, vc, tables[:1], lens)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.heads\] 4 query heads over 3 key/value heads"):
        paged_attention(q, kc[:, :, :1].repeat(3, axis=2), vc[:, :, :1].repeat(3, axis=2), tables, lens)
    with pytest.raises(
        NkilibError,
        match=r"\[nkilib.shape\] key_cache has shape \[10, 16, 2, 32\]; expected "
        r"\[num_blocks, block_size, Hkv, d\] with d = 64",
    ):
        paged_attention(q, kc[..., :32], vc, tables, lens)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] value_cache has dtype bfloat16, expected float32"):
        paged_attention(q, kc, vc.astype(BF16), tables, lens)
    with pytest.raises(NkilibError, match=r"\[nkilib.attention.head_dim\] head dim 192 of q"):
        z = np.zeros((1, 1, 1, 192), np.float32)
        paged_attention(z, np.zeros((2, 16, 1, 192), np.float32), np.zeros((2, 16, 1, 192), np.float32), tables[:1], lens[:1])
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] k_cache has shape \[1, 64, 2, 64\]; expected \[2, S_max, Hkv, d\]"):
        decode_attention(q, kc.reshape(1, 160, 2, 64)[:, :64], vc.reshape(1, 160, 2, 64)[:, :64], lens)
    big = np.zeros((1, 8, 1, 128), np.float32)
    cache = np.broadcast_to(np.zeros((), np.float32), (1000, 16, 8, 128))
    with pytest.raises(NkilibError, match=r"\[nkilib.sbuf\] paged_attention: a context of 16000 tokens with 8 key/value heads"):
        paged_attention(big, cache, cache, np.zeros((1, 1000), np.int32), np.array([1], np.int32))
