"""Plain numpy LayerNorm (fp32 math), the reference layernorm.py is tested against."""

from __future__ import annotations

import numpy as np


def layer_norm_reference(x, weight, bias, eps=1e-5):
    x = np.asarray(x, dtype=np.float32)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(weight, np.float32) + np.asarray(bias, np.float32)


def layer_norm_backward_reference(dy, x, weight, eps=1e-5):
    """(dx, dweight, dbias) by the chain rule through layer_norm_reference."""
    x, dy, w = (np.asarray(a, dtype=np.float32) for a in (x, dy, weight))
    mean = x.mean(axis=-1, keepdims=True)
    rstd = 1.0 / np.sqrt(x.var(axis=-1, keepdims=True) + eps)
    xhat = (x - mean) * rstd
    gy = dy * w
    dx = rstd * (gy - gy.mean(axis=-1, keepdims=True) - xhat * (gy * xhat).mean(axis=-1, keepdims=True))
    h = x.shape[-1]
    return dx, (dy * xhat).reshape(-1, h).sum(axis=0), dy.reshape(-1, h).sum(axis=0)
