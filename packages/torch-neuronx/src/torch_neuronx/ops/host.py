"""Zero-copy CPU views of neuron tensors.

Device memory is host memory (neuron_sim HBM), so a CPU tensor over the same bytes lets CPU
kernels read and write a neuron tensor in place. Only code that has synchronized with the
tensor's stream (or runs on it) may touch the bytes.
"""

from __future__ import annotations

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
