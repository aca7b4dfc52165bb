"""Per-device random number generators (torch.Generator(device="neuron") and the defaults).

Each device has its own default generator: a counter-based Philox4x32-10 state (seed, offset) as
CUDA's, held by the C++ shim. A draw reserves one offset step on the issuing thread (``reserve``)
and the device computes its numbers from (seed, offset), so reading or setting the state never
waits for queued work. ``get_rng_state`` is 16 bytes: seed then offset, little-endian uint64s.
``torch.manual_seed`` seeds these generators too.
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


def generator_of(generator, device: torch.device) -> torch.Generator:
    """The generator a draw on ``device`` uses: ``generator``, or the device's default. A generator
    of another device type is refused as CUDA refuses it."""
    if generator is None:
        return default_generator(device)
    if generator.device.type != "neuron":
        raise RuntimeError(f"Expected a 'neuron' device type for generator but found '{generator.device.type}'")
    return generator


def reserve(generator: torch.Generator, increment: int = 1) -> tuple[int, int]:
    """(seed, offset) of one draw from a neuron ``generator``; its offset advances by ``increment``."""
    return state.shim().philox_reserve(generator, increment)


def manual_seed(seed: int, device=None) -> None:
    default_generator(device).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    # Must not call torch.manual_seed (which calls this: infinite recursion).
    for index in range(state.bridge().runtime.device_count):
        default_generator(index).manual_seed(int(seed))


def seed(device=None) -> None:
    default_generator(device).seed()


def seed_all() -> None:
    for index in range(state.bridge().runtime.device_count):
        default_generator(index).seed()


def initial_seed(device=None) -> int:
    return default_generator(device).initial_seed()


def get_rng_state(device="neuron") -> torch.Tensor:
    return default_generator(device).get_state()


def set_rng_state(new_state: torch.Tensor, device="neuron") -> None:
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(state.bridge().runtime.device_count)]


def set_rng_state_all(states) -> None:
    for index, rng_state in enumerate(states):
        set_rng_state(rng_state, index)


def host_seed(seed: int, offset: int) -> int:
    """The seed of a CPU generator drawing on the host for the draw at (seed, offset) (ops with no
    device form): as reproducible as the device's draws, different from offset to offset
    (splitmix64's finalizer over the pair)."""
    z = (seed ^ (offset * 0x9E3779B97F4A7C15)) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return (z ^ (z >> 31)) >> 1  # 63 bits: Generator.manual_seed takes an int64
