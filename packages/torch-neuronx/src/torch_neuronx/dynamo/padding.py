"""Padding to bucket sizes: a few static shapes instead of one graph per length.

The neuron backend compiles one NEFF per input shape. Inputs of varying length (sequences,
last batches) are padded up to the next of a few bucket sizes, so a program compiles a graph per
bucket, not per length:

    ids, n = pad_to_bucket(ids, buckets=(64, 128, 256), dim=1, value=pad_id)
    logits = compiled(ids)[:, :n]
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def bucket_for(size: int, buckets) -> int:
    """The smallest bucket >= ``size``; ValueError if ``size`` exceeds the largest."""
    fitting = [b for b in sorted(buckets) if b >= size]
    if not fitting:
        raise ValueError(f"size {size} exceeds the largest bucket {max(buckets)}: add a larger bucket")
    return fitting[0]


def pad_to_bucket(x: torch.Tensor, buckets, dim: int = -1, value: float = 0) -> tuple[torch.Tensor, int]:
    """``x`` padded at the end of ``dim`` with ``value`` up to its bucket; returns (padded, original
    size) so results can be sliced back with ``[..., :size]``."""
    if not buckets:
        raise ValueError("pad_to_bucket needs at least one bucket size")
    dim = dim % x.dim()
    size = x.shape[dim]
    target = bucket_for(size, buckets)
    if target == size:
        return x, size
    pad = [0, 0] * (x.dim() - dim - 1) + [0, target - size]
    return F.pad(x, pad, value=value), size
