"""The pieces the model runner relies on, each against a plain reference."""

from __future__ import annotations

import math

import pytest
import torch
from vllm_neuron.attention import NeuronAttentionMetadata, paged_attention
from vllm_neuron.kernels import compute_slot_mapping
from vllm_neuron.model_runner import token_bucket
from vllm_neuron.worker import kv_cache_bytes


@pytest.mark.parametrize(("n", "bucket"), [(1, 8), (8, 8), (9, 16), (100, 128), (128, 128), (129, 200), (200, 200)])
def test_token_bucket(n, bucket):
    assert token_bucket(n, 200) == bucket


@pytest.mark.parametrize("n", [0, 201])
def test_token_bucket_rejects_out_of_range(n):
    with pytest.raises(ValueError, match=r"\[vllm_neuron.buckets\]"):
        token_bucket(n, 200)


def test_kv_cache_bytes():
    assert kv_cache_bytes(1000, 0.5, 100) == 400
    assert kv_cache_bytes(1000, 0.5, 100, cap=300) == 300
    with pytest.raises(ValueError, match=r"\[vllm_neuron.memory\] no room"):
        kv_cache_bytes(1000, 0.1, 200)
    with pytest.raises(ValueError, match=r"\[vllm_neuron.memory\].*got 1.5"):
        kv_cache_bytes(1000, 1.5, 0)


def test_slot_mapping_on_neuron():
    bs = 4
    block_table = torch.tensor([[7, 2, 0], [5, 1, 3]], dtype=torch.int32)
    query_start = torch.tensor([0, 3, 5], dtype=torch.int32)
    positions = torch.tensor([4, 5, 6, 8, 9], dtype=torch.int64)  # req 0: 4..6, req 1: 8..9
    slots = torch.full((8,), 99, dtype=torch.int64)
    dev = "neuron"
    out = slots.to(dev)
    compute_slot_mapping(5, 8, query_start.to(dev), positions.to(dev), block_table.to(dev), 3, out, bs)
    expected = [2 * bs + 0, 2 * bs + 1, 2 * bs + 2, 3 * bs + 0, 3 * bs + 1, -1, -1, -1]
    assert out.cpu().tolist() == expected


def reference_attention(q, k, v, scale):
    """Causal SDPA of a request's query tokens (the last len(q) positions) over its keys."""
    s, h = k.shape[0], q.shape[1]
    k = k.repeat_interleave(h // k.shape[1], dim=1)
    v = v.repeat_interleave(h // v.shape[1], dim=1)
    scores = torch.einsum("thd,shd->hts", q, k) * scale
    pos = torch.arange(s - q.shape[0], s)
    scores = scores.masked_fill(torch.arange(s)[None, None, :] > pos[None, :, None], float("-inf"))
    return torch.einsum("hts,shd->thd", scores.softmax(-1), v)


def test_paged_attention_matches_sdpa_for_mixed_prefill_and_decode():
    torch.manual_seed(0)
    heads, kv_heads, dim, bs, num_blocks = 4, 2, 32, 16, 12
    seq_lens, query_lens = [37, 5, 16], [37, 1, 3]  # a fresh prefill, a decode, a chunk after a cached prefix
    key_cache = torch.randn(num_blocks, bs, kv_heads, dim)
    value_cache = torch.randn(num_blocks, bs, kv_heads, dim)
    tables = [[3, 9, 0], [4, 0, 0], [11, 1, 0]]
    q = torch.randn(sum(query_lens), heads, dim)
    token_req = torch.repeat_interleave(torch.arange(3), torch.tensor(query_lens))
    token_pos = torch.cat([torch.arange(s - n, s) for s, n in zip(seq_lens, query_lens)])
    dev = "neuron"
    meta = NeuronAttentionMetadata(
        num_actual_tokens=q.shape[0],
        slot_mapping=torch.zeros(q.shape[0], dtype=torch.int64).to(dev),
        token_req=token_req.to(dev),
        token_pos=token_pos.to(dev),
        block_table=torch.tensor(tables, dtype=torch.int32).to(dev),
        num_write_tokens=q.shape[0],
    )
    scale = 1 / math.sqrt(dim)
    got = paged_attention(q.to(dev), key_cache.to(dev), value_cache.to(dev), meta, scale).cpu()
    start = 0
    for table, s, n in zip(tables, seq_lens, query_lens):
        k = key_cache[table].reshape(-1, kv_heads, dim)[:s]
        v = value_cache[table].reshape(-1, kv_heads, dim)[:s]
        torch.testing.assert_close(
            got[start : start + n], reference_attention(q[start : start + n], k, v, scale), rtol=2e-5, atol=2e-5
        )
        start += n
