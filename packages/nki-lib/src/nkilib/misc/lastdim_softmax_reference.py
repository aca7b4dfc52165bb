"""Plain numpy softmax over the last dim (fp32 math), the reference lastdim_softmax.py is tested against."""

from __future__ import annotations

import numpy as np


def softmax_reference(x):
    x = np.asarray(x, np.float32)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_backward_reference(dy, y):
    dy, y = np.asarray(dy, np.float32), np.asarray(y, np.float32)
    return y * (dy - (dy * y).sum(axis=-1, keepdims=True))
