"""Host views of device memory.

Device memory is host memory (neuron_sim HBM), so a CPU tensor or numpy array over the same bytes
lets CPU kernels and the executors read and write a neuron tensor in place (zero-copy). Only work
ordered on the tensor's stream (a task submitted through this API), or code that synchronized
with it, may touch the bytes.
"""

from __future__ import annotations

import numpy as np
import torch

from ..device import state


def host_view(t: torch.Tensor) -> torch.Tensor:
    """A CPU tensor aliasing ``t``'s elements (same size, strides and offset)."""
    storage = t.untyped_storage()
    nbytes = storage.nbytes()
    address = storage.data_ptr()
    if nbytes == 0 or address == 0:
        return torch.empty_strided(t.size(), t.stride(), dtype=t.dtype)
    raw = state.bridge().host_bytes(address, nbytes)
    typed = raw if t.dtype == torch.uint8 else raw.view(t.dtype)
    return typed.as_strided(t.size(), t.stride(), t.storage_offset())


def host_storage_bytes(t: torch.Tensor) -> torch.Tensor:
    """The whole storage of ``t`` as uint8 CPU bytes."""
    storage = t.untyped_storage()
    if storage.nbytes() == 0 or storage.data_ptr() == 0:
        return torch.empty(0, dtype=torch.uint8)
    return state.bridge().host_bytes(storage.data_ptr(), storage.nbytes())


def device_bytes(address: int, nbytes: int) -> np.ndarray:
    """A flat uint8 numpy view of device bytes [address, address + nbytes) (zero-copy)."""
    return state.bridge().numpy_bytes(address, nbytes)
