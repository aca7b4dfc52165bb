"""Plain numpy rotary embedding in both layouts, the reference rotary.py is tested against."""

from __future__ import annotations

import numpy as np


def rope_reference(x, cos, sin, layout="half"):
    """x [..., S, H, D], cos/sin [S, D/2] (fp32 math)."""
    x = np.asarray(x, np.float32)
    c = np.asarray(cos, np.float32)[:, None, :]  # [S, 1, D/2]: the same angle for every head
    s = np.asarray(sin, np.float32)[:, None, :]
    half = x.shape[-1] // 2
    if layout == "half":
        a, b = x[..., :half], x[..., half:]
        return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = b * c + a * s
    return out


def rope_tables(seq, dim, base=10000.0, dtype=np.float32):
    """(cos, sin) [seq, dim/2] of the usual RoPE frequencies base^(-2i/dim)."""
    inv_freq = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    angles = np.arange(seq, dtype=np.float64)[:, None] * inv_freq[None, :]
    return np.cos(angles).astype(np.float32).astype(dtype), np.sin(angles).astype(np.float32).astype(dtype)
