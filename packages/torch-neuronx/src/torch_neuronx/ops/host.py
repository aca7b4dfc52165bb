"""Copies between CPU tensors made on the calling thread, and telling neuron tensors apart.

The host views these copy into and out of come from ``execution.host_view``.
"""

from __future__ import annotations

import numpy as np
import torch

NEURON = "neuron"


def is_neuron(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NEURON


# Element types numpy copies as torch does (bit for bit).
_NUMPY_COPYABLE = frozenset({
    torch.float16, torch.float32, torch.float64, torch.complex64, torch.complex128, torch.bool,
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
})


def host_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """``dst.copy_(src)`` for CPU tensors (``src`` broadcast to ``dst``), on the calling thread.

    torch spreads a large copy over its OpenMP threads, and while the executor and the thread
    issuing ops each keep a core busy, every OpenMP barrier waits for a core: a 0.5 MB copy took
    20 us alone and 200-400 us beside the executor. numpy copies on the calling thread only.
    Conversions between element types, tensors with a lazy conj/neg bit, and a destination whose
    elements share memory (torch's copy_ refuses to write it) keep torch's copy."""
    if (dst.dtype == src.dtype and dst.dtype in _NUMPY_COPYABLE
            and not (src.is_conj() or src.is_neg() or dst.is_conj() or dst.is_neg())
            and torch._debug_has_internal_overlap(dst) == 0):
        np.copyto(dst.detach().numpy(), src.detach().numpy())
    else:
        dst.copy_(src)


def host_snapshot(t: torch.Tensor) -> torch.Tensor:
    """A copy of CPU tensor ``t`` (as ``t.clone()``: same layout where ``t`` is dense), made by ``host_copy``."""
    out = torch.empty_like(t, memory_format=torch.preserve_format)
    host_copy(out, t)
    return out
