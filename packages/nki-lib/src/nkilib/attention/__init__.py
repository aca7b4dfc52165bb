"""Attention: flash attention forward (causal or not, grouped-query heads)."""

from nkilib.attention.flash_attention import flash_attention

__all__ = ["flash_attention"]
