"""Attention: flash attention forward (causal or not, grouped-query heads), and attention over a
KV cache - contiguous or paged with a block table - for decoding and chunked prefill."""

from nkilib.attention.flash_attention import flash_attention
from nkilib.attention.paged_attention import decode_attention, paged_attention

__all__ = ["decode_attention", "flash_attention", "paged_attention"]
