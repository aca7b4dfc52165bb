"""Random numbers drawn on the host for the device, from the device's own generator.

A neuron device's default generator is a CPU engine tagged ``neuron`` (``device.random``). CPU
kernels refuse a generator of another device, so a draw runs with a CPU generator holding the
device generator's state, which is written back afterwards: the device's random stream advances
exactly as a CPU kernel drawing from it would. Eager random ops (CPU fallback), eager dropout and
compiled graphs' dropout masks all draw here, so they see the same numbers for the same seed.
"""

from __future__ import annotations

import threading

import torch

from ..device.random import default_generator

_LOCK = threading.Lock()


def generator_for(flat, device: torch.device):
    for x in flat:
        if isinstance(x, torch.Generator) and x.device.type == "neuron":
            return x
    return default_generator(device.index)


class HostRng:
    """Run a random op with a CPU generator holding the neuron generator's state, then write the
    advanced state back (CPU kernels refuse a generator tagged with another device).

    An op with no Generator argument (native_dropout) draws from the CPU *default* generator, so
    for it that generator holds the device state during the call and gets its own state back
    after. (Before, dropout on neuron consumed the CPU generator instead of the device's.)"""

    def __init__(self, neuron_generator, swap_default: bool = False):
        self.neuron = neuron_generator
        self.swap_default = swap_default
        self.cpu = torch.default_generator if swap_default else torch.Generator()
        self.saved = None

    def __enter__(self):
        _LOCK.acquire()
        if self.swap_default:
            self.saved = self.cpu.get_state()
        self.cpu.set_state(self.neuron.get_state())
        return self.cpu

    def __exit__(self, *exc):
        try:
            self.neuron.set_state(self.cpu.get_state())
            if self.swap_default:
                self.cpu.set_state(self.saved)
        finally:
            _LOCK.release()


def device_generator(device: torch.device) -> HostRng:
    """Context manager: a CPU generator holding ``device``'s default generator state (written
    back on exit), for random draws made on the host for the device."""
    return HostRng(generator_for([], device))


def draw_dropout_mask(drawn: torch.Tensor, p: float, device: torch.device) -> torch.Tensor:
    """Fill host bool tensor ``drawn`` with the mask CPU's native_dropout draws - ``bernoulli_(1 - p)``
    - from ``device``'s generator, and return it. Eager (``native_dropout``) and compiled graphs
    (``dynamo.runtime``) both draw here, so they see the same masks."""
    with device_generator(device) as generator:
        drawn.bernoulli_(1.0 - p, generator=generator)
    return drawn
