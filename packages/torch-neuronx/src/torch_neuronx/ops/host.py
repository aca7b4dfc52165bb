"""Zero-copy CPU views of neuron tensors.

Device memory is host memory (neuron_sim HBM), so a CPU tensor over the same bytes lets CPU
kernels read and write a neuron tensor in place. Only code that has synchronized with the
tensor's stream (or runs on it) may touch the bytes.
"""

from __future__ import annotations

import numpy as np
import torch

from .. import _state

NEURON = "neuron"


def is_neuron(x) -> bool:
    return isinstance(x, torch.Tensor) and x.device.type == NEURON


def host_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor aliasing ``t``'s elements (same size, strides and offset)."""
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    address = storage.data_ptr()
    if nbytes == 0 or address == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype)
    raw = _state.bridge().host_bytes(address, nbytes)
    typed = raw if t.dtype == torch.uint8 else raw.view(t.dtype)
    return typed.as_strided(t.size(), t.stride(), t.storage_offset())


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


def host_storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``t`` as uint8 CPU bytes."""
    storage = t.untyped_storage()
    if storage.nbytes() == 0 or storage.data_ptr() == 0:
        return torch.empty(0, dtype=torch.uint8)
    return _state.bridge().host_bytes(storage.data_ptr(), storage.nbytes())


def worker_task(fn):
    """``fn`` as a queue task. It runs on the queue's worker thread, outside whatever mode the op
    was issued in: host views made under ``torch.inference_mode()`` are inference tensors, and
    writing them there raised "Inplace update to inference tensor outside InferenceMode". Inference
    mode allows writes to both kinds of tensor (and the CPU kernels must not record autograd)."""

    def task():
        with torch.inference_mode():
            fn()

    return task
