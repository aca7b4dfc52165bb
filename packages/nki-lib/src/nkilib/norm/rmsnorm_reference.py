"""Plain numpy RMSNorm (fp32 math from the inputs' values), the reference rmsnorm.py is tested against."""

from __future__ import annotations

import numpy as np


def rms_norm_reference(x, weight, eps=1e-6):
    x = np.asarray(x, dtype=np.float32)
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * np.asarray(weight, np.float32)


def rms_norm_backward_reference(dy, x, weight, eps=1e-6):
    """(dx, dweight) by the chain rule through rms_norm_reference."""
    x, dy, w = (np.asarray(a, dtype=np.float32) for a in (x, dy, weight))
    r = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)
    gy = dy * w
    dx = gy * r - x * r**3 * np.mean(gy * x, axis=-1, keepdims=True)
    dw = (dy * x * r).reshape(-1, x.shape[-1]).sum(axis=0)
    return dx, dw


def residual_rms_norm_reference(x, residual, weight, eps=1e-6):
    """(rms_norm(x + residual), x + residual); the sum is rounded to x's dtype as the kernel stores it."""
    h = (np.asarray(x, np.float32) + np.asarray(residual, np.float32)).astype(np.asarray(x).dtype)
    return rms_norm_reference(h, weight, eps), h
