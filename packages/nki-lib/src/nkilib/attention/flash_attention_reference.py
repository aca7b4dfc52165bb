"""Plain numpy scaled dot-product attention (fp32 math), the reference flash_attention.py is tested against."""

from __future__ import annotations

import numpy as np


def attention_reference(q, k, v, causal=False, scale=None):
    """q [B, Hq, Sq, d], k/v [B, Hkv, Sk, d] (Hq a multiple of Hkv: grouped-query heads share a
    key/value head) -> [B, Hq, Sq, d]; causal: query i at position Sk - Sq + i."""
    q, k, v = (np.asarray(t, np.float32) for t in (q, k, v))
    group = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, group, axis=1), np.repeat(v, group, axis=1)
    scale = 1.0 / np.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = np.where(np.tril(np.ones((sq, sk), bool), k=sk - sq), s, -np.inf)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v
