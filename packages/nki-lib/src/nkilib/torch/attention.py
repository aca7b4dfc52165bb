"""Attention as torch ops (forward only): ``nkilib::flash_attention`` behind a drop-in
F.scaled_dot_product_attention, whose calls it cannot serve - a gradient needed (no backward
kernel yet), an attention mask, dropout, another layout - run F.scaled_dot_product_attention; and
``nkilib::paged_attention`` / ``nkilib::decode_attention`` over a KV cache (decoding and chunked
prefill with per-sequence lengths; layouts in nkilib.attention.paged_attention), whose fallback is
the same computation in plain torch ops (``cached_attention_plain``)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch_neuronx import nki_op

from nkilib.attention.flash_attention import check
from nkilib.attention.flash_attention import flash_attention as flash_attention_forward

# (by name: nkilib.attention's paged_attention attribute is the function, not the module)
from nkilib.attention.paged_attention import check as check_cached
from nkilib.attention.paged_attention import decode_attention as decode_attention_forward
from nkilib.attention.paged_attention import paged_attention as paged_attention_forward
from nkilib.attention.paged_attention import resolve_scale
from nkilib.torch._support import CHECKS, refusal, refuse, spec, wants_grad


@nki_op("nkilib::flash_attention", mutates_args=())
def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    return flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, scale)


def _check(q, k, v, grad, masked, dropout, gqa, causal):
    if grad:
        refuse("attention.backward", "a gradient is needed; the library has no flash attention backward kernel yet")
    if masked or dropout:
        refuse("attention.arguments", "attn_mask and dropout_p are not kernel arguments")
    if q.shape[1] != k.shape[1] and not gqa:
        refuse("attention.heads", f"{q.shape[1]} query heads over {k.shape[1]} without enable_gqa=True")
    if causal and q.shape[2] != k.shape[2]:
        # torch's is_causal aligns the mask top-left (query i sees keys 0..i), the kernel bottom-right
        refuse("attention.causal", f"is_causal with {q.shape[2]} queries over {k.shape[2]} keys (torch aligns it top-left)")
    check(q, k, v, causal)


CHECKS["flash_attention"] = _check


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` for q [B, Hq, S, d], k/v [B, Hkv, S, d], through the
    flash attention kernel on neuron tensors (inference: no gradient)."""
    if all(t.device.type == "neuron" for t in (q, k, v)) and not refusal(
            "flash_attention", (spec(q), spec(k), spec(v), wants_grad(q, k, v), attn_mask is not None,
                                dropout_p != 0.0, bool(enable_gqa), bool(is_causal))):
        return flash_attention_op(q, k, v, bool(is_causal), 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                          scale=scale, enable_gqa=enable_gqa)


# ---- attention over a KV cache ---------------------------------------------------------------

@nki_op("nkilib::paged_attention", mutates_args=())
def paged_attention_op(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables: torch.Tensor,
                       seq_lens: torch.Tensor, scale: float) -> torch.Tensor:
    return paged_attention_forward(q.contiguous(), key_cache.contiguous(), value_cache.contiguous(), block_tables.contiguous(),
                                 seq_lens.contiguous(), scale)


@nki_op("nkilib::decode_attention", mutates_args=())
def decode_attention_op(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: torch.Tensor,
                        scale: float) -> torch.Tensor:
    return decode_attention_forward(q.contiguous(), k_cache.contiguous(), v_cache.contiguous(), seq_lens.contiguous(), scale)


def _check_cached(q, key_cache, value_cache, block_tables, seq_lens, grad):
    if grad:
        refuse("attention.backward", "a gradient is needed; the KV-cache attention kernels are forward only")
    check_cached(q, key_cache, value_cache, block_tables, seq_lens)


CHECKS["paged_attention"] = _check_cached


def cached_attention_plain(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, seq_lens: torch.Tensor,
                           scale: float | None = None) -> torch.Tensor:
    """The kernels' computation in plain torch ops (the fallback): q [B, Hq, Sq, d] over each
    sequence's cached keys k/v [B, Hkv, S, d] in order, query i of sequence b at position
    seq_lens[b] - Sq + i seeing the keys up to its own."""
    sq, ctx = q.shape[2], k.shape[2]
    position = seq_lens.to(torch.int64)[:, None] - sq + torch.arange(sq, device=q.device)[None, :]
    keep = torch.arange(ctx, device=q.device)[None, None, :] <= position[:, :, None]  # [B, Sq, S]
    return F.scaled_dot_product_attention(q, k, v, attn_mask=keep[:, None], scale=scale, enable_gqa=q.shape[1] != k.shape[1])


def gather_cache(cache: torch.Tensor, block_tables: torch.Tensor) -> torch.Tensor:
    """A paged cache [num_blocks, block_size, Hkv, d] as each sequence's tokens [B, Hkv, max_blocks * block_size, d]."""
    blocks, block, kv_heads, dim = cache.shape
    return cache[block_tables.to(torch.int64)].reshape(block_tables.shape[0], -1, kv_heads, dim).transpose(1, 2)


def _on_device(*tensors) -> bool:
    return all(t.device.type == "neuron" for t in tensors)


def paged_attention(q: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, block_tables: torch.Tensor,
                    seq_lens: torch.Tensor, scale: float | None = None) -> torch.Tensor:
    """Attention of q [B, Hq, Sq, d] (each sequence's Sq newest tokens) over a paged KV cache
    key_cache/value_cache [num_blocks, block_size, Hkv, d] with block_tables [B, max_blocks] and
    seq_lens [B] (int32; lengths include the Sq new tokens, whose keys/values are in the cache):
    decoding (Sq = 1) and chunked prefill (causal by position). Through the kernel on neuron tensors
    (inference: no gradient); scale defaults to 1/sqrt(d)."""
    args = (q, key_cache, value_cache, block_tables, seq_lens)
    if _on_device(*args) and not refusal("paged_attention", tuple(spec(t) for t in args) + (wants_grad(q, key_cache, value_cache),)):
        return paged_attention_op(*args, resolve_scale(q, scale))
    return cached_attention_plain(q, gather_cache(key_cache, block_tables), gather_cache(value_cache, block_tables), seq_lens,
                                  scale)


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, seq_lens: torch.Tensor,
                     scale: float | None = None) -> torch.Tensor:
    """As paged_attention over a contiguous cache k_cache/v_cache [B, S_max, Hkv, d]."""
    args = (q, k_cache, v_cache, seq_lens)
    if _on_device(*args) and not refusal("paged_attention", (spec(q), spec(k_cache), spec(v_cache), None, spec(seq_lens),
                                                             wants_grad(q, k_cache, v_cache))):
        return decode_attention_op(*args, resolve_scale(q, scale))
    return cached_attention_plain(q, k_cache.transpose(1, 2), v_cache.transpose(1, 2), seq_lens, scale)
