"""Host views of device memory.

Device memory is host memory (neuron_sim HBM), so a CPU tensor or numpy array over the same bytes
lets CPU kernels and the executors read and write a neuron tensor in place (zero-copy). Only work
ordered on the tensor's stream (a task submitted through this API), or code that synchronized
with it, may touch the bytes.
"""

from __future__ import annotations

import numpy as np
import torch
from neuron_sim.memory.validity import INVALID

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


def _extent_nbytes(t: torch.Tensor) -> int:
    """Bytes from ``t``'s first element to the end of its last."""
    return (sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 1) + 1) * t.element_size()


def device_span(t: torch.Tensor) -> np.ndarray:
    """The device bytes ``t``'s elements occupy, from its first element to its last (zero-copy):
    what host work declares it reads (``submit_host(reads=)``)."""
    if t.numel() == 0:
        return np.empty(0, dtype=np.uint8)
    return state.bridge().numpy_bytes(t.data_ptr(), _extent_nbytes(t))


def written_span(t: torch.Tensor) -> np.ndarray:
    """What host work declares it writes when it writes every element of ``t``
    (``submit_host(writes=)``): all its bytes when they fill their extent, else a strided view -
    the runtime then makes nothing valid on success (the bytes between the elements keep their
    state) and the whole extent invalid on failure."""
    span = device_span(t)
    if t.numel() == 0 or _fills_extent(t):
        return span
    size = t.element_size()
    return np.lib.stride_tricks.as_strided(span, (*t.shape, size), (*(s * size for s in t.stride()), 1), writeable=False)


def _fills_extent(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements are every element of their extent, once each (contiguous in some
    order of its dims: a transpose is, a slice of columns or an expanded view is not)."""
    expected = 1
    for stride, size in sorted((s, n) for n, s in zip(t.shape, t.stride()) if n > 1):
        if stride != expected:
            return False
        expected *= size
    return True


def check_readable(t: torch.Tensor) -> None:
    """Raise the original error (as neuron_sim's InvalidMemoryError) if work that should have
    written ``t``'s elements failed or was skipped; call it before the host reads them."""
    if INVALID.count and t.numel():  # nothing failed in this process: nothing to look at
        state.bridge().runtime.device(t.device.index).check_valid(t.data_ptr(), _extent_nbytes(t))
