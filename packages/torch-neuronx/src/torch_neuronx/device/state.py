"""Process-wide state of the device: the runtime bridge and the compiled shim, set once by
``registration.initialize``."""

from __future__ import annotations

import threading

import torch

lock = threading.RLock()
_bridge = None
_shim = None
initialized = False


def bridge():
    """The Bridge between the shim and the simulator runtime."""
    if _bridge is None:
        raise RuntimeError("the neuron device is not initialized: import torch_neuronx (or torch, with backend autoload)")
    return _bridge


def shim():
    """The C++ shim (``torch_neuronx._C``)."""
    if _shim is None:
        raise RuntimeError("the neuron device is not initialized: import torch_neuronx (or torch, with backend autoload)")
    return _shim


def install(bridge_, shim_) -> None:
    global _bridge, _shim, initialized
    _bridge, _shim = bridge_, shim_
    initialized = True


def current_bridge():
    """The bridge, or None before initialization (the fork handler asks without initializing)."""
    return _bridge


def device_index(device) -> int:
    """The index of ``device`` (None, an int, "neuron", "neuron:1" or a torch.device): the
    thread's current device where it names none."""
    if device is None:
        return shim().current_device()
    if isinstance(device, int):
        return device
    device = torch.device(device)
    return device.index if device.index is not None else shim().current_device()
