"""Random numbers drawn on the host for the device: ops with no device form (``multinomial``,
``poisson``, ``randperm``...) run CPU's kernel with a CPU generator seeded for one draw reserved
from the device's generator (``device.random.host_seed``), so they advance the device's stream by
one offset step and are reproducible under ``torch.manual_seed`` like the device's own draws.
"""

from __future__ import annotations

import threading

import torch

from ..device.random import default_generator, generator_of, host_seed, reserve

_LOCK = threading.Lock()


def generator_for(flat, device: torch.device) -> torch.Generator:
    """The generator of a call's arguments ``flat`` (refused if not a neuron one), or ``device``'s default."""
    for x in flat:
        if isinstance(x, torch.Generator):
            return generator_of(x, device)
    return default_generator(device.index)


class HostRng:
    """A CPU generator for one draw of ``neuron_generator``, reserved when this is made (at the call).

    An op with no Generator argument (the CPU flash-attention kernel's dropout) draws from the CPU
    *default* generator, so for it that generator is seeded for the draw during the call and gets
    its own state back after."""

    def __init__(self, neuron_generator: torch.Generator, swap_default: bool = False):
        self.seed = host_seed(*reserve(neuron_generator))
        self.swap_default = swap_default
        self.saved = None

    def __enter__(self) -> torch.Generator:
        if not self.swap_default:
            return torch.Generator().manual_seed(self.seed)
        _LOCK.acquire()
        self.saved = torch.default_generator.get_state()
        return torch.default_generator.manual_seed(self.seed)

    def __exit__(self, *exc):
        if self.swap_default:
            try:
                torch.default_generator.set_state(self.saved)
            finally:
                _LOCK.release()
