"""``native_dropout``: CPU's mask, drawn on the host from the device's generator; the masking on the device."""

from __future__ import annotations

import torch

from ..ops.generators import draw_dropout_mask
from .copies import upload


def native_dropout(input, p, train=None):
    """Dropout as CPU's kernel computes it (``native_dropout_cpu``): a bool mask drawn by
    ``bernoulli_`` from the device's generator - on the host, so the stream is CPU's for the same
    seed - and uploaded, then the masking and scaling compiled on the device. (Run whole through
    the fallback, the input and output would cross the host link too.)"""
    if input.numel() == 0:
        return input, torch.empty_like(input)
    if train is None or train:
        p1m = 1.0 - p
        scale = 0.0 if p1m == 0 else 1.0 / p1m
        drawn = draw_dropout_mask(torch.empty_like(input, dtype=torch.bool, device="cpu"), p, input.device)  # CPU's layout
        mask = torch.empty_like(input, dtype=torch.bool)
        upload(mask, drawn)  # ``drawn`` is ours: no snapshot of it, as copy_ would make
        return input.mul(mask).mul_(scale), mask
    return input.clone(), torch.ones_like(input, dtype=torch.bool)
