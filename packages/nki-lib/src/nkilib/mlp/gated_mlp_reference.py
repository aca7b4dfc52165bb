"""Plain numpy gated MLP (fp32 math, the hidden activations rounded to the I/O dtype as the torch
module rounds them), the reference gated_mlp.py is tested against."""

from __future__ import annotations

import math

import numpy as np


def activation_reference(g, activation):
    if activation == "silu":
        return g / (1.0 + np.exp(-g))
    if activation == "gelu":
        erf = np.vectorize(math.erf, otypes=[np.float64])
        return (0.5 * g * (1.0 + erf(g / math.sqrt(2.0)))).astype(np.float32)
    return 0.5 * g * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (g + 0.044715 * g**3)))


def gated_mlp_reference(x, w_gate, w_up, w_down, activation="silu"):
    dtype = np.asarray(x).dtype
    xf = np.asarray(x, np.float32)
    h = activation_reference(xf @ np.asarray(w_gate, np.float32), activation) * (xf @ np.asarray(w_up, np.float32))
    h = h.astype(dtype).astype(np.float32)
    return h @ np.asarray(w_down, np.float32)
