"""Per-device random number generators (torch.Generator(device="neuron") and the defaults).

Each device has its own default generator - the CPU engine tagged ``neuron`` - so random ops on
neuron have their own reproducible stream. ``torch.manual_seed`` seeds them too.
"""

from __future__ import annotations

import torch

from . import state

_defaults: dict[int, torch.Generator] = {}


def default_generator(device=None) -> torch.Generator:
    index = state.device_index(device)
    if index not in _defaults:
        _defaults[index] = state.shim().default_generator(index)  # the C++ default, wrapped once
    return _defaults[index]


def _sync(device=None) -> None:
    # Queued random ops advance the generator when they run: settle them first.
    state.bridge().synchronize_device(state.device_index(device) if device is not None else -1)


def manual_seed(seed: int, device=None) -> None:
    _sync(device)
    default_generator(device).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    # Must not call torch.manual_seed (which calls this: infinite recursion).
    _sync()
    for index in range(state.bridge().runtime.device_count):
        default_generator(index).manual_seed(int(seed))


def seed(device=None) -> None:
    _sync(device)
    default_generator(device).seed()


def seed_all() -> None:
    _sync()
    for index in range(state.bridge().runtime.device_count):
        default_generator(index).seed()


def initial_seed(device=None) -> int:
    return default_generator(device).initial_seed()


def get_rng_state(device="neuron") -> torch.Tensor:
    _sync(device)
    return default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="neuron") -> None:
    _sync(device)
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(state.bridge().runtime.device_count)]


def set_rng_state_all(states) -> None:
    for index, rng_state in enumerate(states):
        set_rng_state(rng_state, index)
