"""Plain numpy router top-k (fp32 math), the reference router.py is tested against."""

from __future__ import annotations

import numpy as np


def router_topk_reference(logits, k, gating="softmax", normalize=False):
    x = np.asarray(logits, np.float32)
    if gating == "softmax":
        e = np.exp(x - x.max(axis=1, keepdims=True))
        scores = e / e.sum(axis=1, keepdims=True)
    else:
        scores = 1.0 / (1.0 + np.exp(-x))
    experts = np.argsort(-scores, axis=1, kind="stable")[:, :k]  # ties: the lower expert first
    weights = np.take_along_axis(scores, experts, axis=1)
    if normalize:
        weights = weights / weights.sum(axis=1, keepdims=True)
    return weights.astype(np.float32), experts.astype(np.int32)
