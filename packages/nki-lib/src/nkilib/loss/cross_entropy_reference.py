"""Plain numpy cross-entropy over the last dim (fp32 math), the reference cross_entropy.py is tested against."""

from __future__ import annotations

import numpy as np


def cross_entropy_reference(logits, labels):
    """(loss [R], lse [R]) per row: lse = log(sum(exp(x))), loss = lse - x[label]."""
    x = np.asarray(logits, np.float32)
    m = x.max(axis=-1, keepdims=True)
    lse = (np.log(np.exp(x - m).sum(axis=-1, keepdims=True)) + m)[:, 0]
    picked = np.take_along_axis(x, np.asarray(labels).astype(np.int64)[:, None], axis=-1)[:, 0]
    return lse - picked, lse


def cross_entropy_backward_reference(logits, labels, dloss):
    """dlogits = (softmax(x) - onehot(label)) * dloss per row."""
    x = np.asarray(logits, np.float32)
    p = np.exp(x - x.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    p[np.arange(x.shape[0]), np.asarray(labels).astype(np.int64)] -= 1.0
    return p * np.asarray(dloss, np.float32)[:, None]
