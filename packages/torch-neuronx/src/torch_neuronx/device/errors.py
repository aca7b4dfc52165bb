"""Exceptions of the neuron device."""

from __future__ import annotations

import torch


class NeuronOutOfMemoryError(torch.OutOfMemoryError):
    """The simulated HBM of a NeuronCore cannot hold an allocation. Catch it (or
    torch.OutOfMemoryError), free tensors, and the device keeps working."""


class NeuronRuntimeError(RuntimeError):
    """Misuse of the neuron device (bad device index, mixed devices, use after a bad fork...)."""
