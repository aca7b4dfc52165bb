"""Plain numpy attention over a KV cache (fp32 math), the reference paged_attention.py is tested against."""

from __future__ import annotations

import numpy as np

from nkilib.attention.flash_attention_reference import attention_reference


def gather_cache(cache, block_tables):
    """[num_blocks, block_size, Hkv, d] paged cache -> [B, Hkv, max_blocks * block_size, d], sequence b's
    token t from block block_tables[b, t // block_size] at offset t % block_size."""
    cache = np.asarray(cache)
    b, nblk = np.shape(block_tables)
    seq = cache[np.asarray(block_tables)]  # [B, max_blocks, block_size, Hkv, d]
    return seq.reshape(b, nblk * cache.shape[1], cache.shape[2], cache.shape[3]).transpose(0, 2, 1, 3)


def cached_attention_reference(q, k, v, seq_lens, scale=None):
    """q [B, Hq, Sq, d] against k/v [B, Hkv, S, d] (the sequences' cached tokens in order): query i of
    sequence b at position seq_lens[b] - Sq + i sees keys 0 .. that position."""
    q = np.asarray(q, np.float32)
    sq = q.shape[2]
    out = np.empty(q.shape, np.float32)
    for b, n in enumerate(np.asarray(seq_lens)):
        n = int(n)
        # causal with Sq queries over n keys puts query i at n - Sq + i, as flash attention's reference
        out[b : b + 1] = attention_reference(q[b : b + 1], k[b : b + 1, :, :n], v[b : b + 1, :, :n], causal=True, scale=scale)
    assert out.shape[2] == sq
    return out


def paged_attention_reference(q, key_cache, value_cache, block_tables, seq_lens, scale=None):
    return cached_attention_reference(
        q, gather_cache(key_cache, block_tables), gather_cache(value_cache, block_tables), seq_lens, scale
    )


def decode_attention_reference(q, k_cache, v_cache, seq_lens, scale=None):
    """k_cache/v_cache [B, S_max, Hkv, d] (contiguous)."""
    k, v = (np.asarray(c).transpose(0, 2, 1, 3) for c in (k_cache, v_cache))
    return cached_attention_reference(q, k, v, seq_lens, scale)
