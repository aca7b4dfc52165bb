"""``torch.neuron``: the device module PyTorch and generic code look up for the ``neuron`` device.

It mirrors torch.cuda's surface (device_count, current_device, set_device, synchronize, streams,
events, memory, RNG) for the simulated NeuronCores the runtime exposes
(NEURON_RT_VISIBLE_CORES, NEURON_RT_NUM_CORES, NEURON_LOGICAL_NC_CONFIG).
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from neuron_sim.runtime import current_runtime

from . import state
from .memory import (  # noqa: F401 - re-exported device module API
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .random import (  # noqa: F401
    default_generator,
    get_rng_state,
    get_rng_state_all,
    initial_seed,
    manual_seed,
    manual_seed_all,
    seed,
    seed_all,
    set_rng_state,
    set_rng_state_all,
)
from .streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: F401

_bad_fork = False


def _after_fork_in_child() -> None:
    # Only a parent that used the device makes a bad fork. Importing torch registers the device
    # (autoload) and creates the runtime, so without this a child forked from a process that had
    # merely imported torch could never use neuron, even with nothing of the parent's to inherit.
    global _bad_fork
    bridge = state.current_bridge()
    # Only the device's own runtime, untouched by anyone: another user of neuron_sim's global
    # runtime keeps its fork protection.
    if bridge is not None and not bridge.used and current_runtime() is bridge.runtime and not bridge.runtime.used:
        bridge.adopt_fresh_runtime()
        _bad_fork = False
    else:
        _bad_fork = state.initialized


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _is_in_bad_fork() -> bool:
    return _bad_fork


def _lazy_init() -> None:
    if _bad_fork:
        raise RuntimeError(
            "Cannot re-initialize the neuron device in a forked subprocess. To use neuron with "
            "multiprocessing, you must use the 'spawn' start method (multiprocessing.set_start_method('spawn'))"
        )
    state.bridge()


def is_available() -> bool:
    return device_count() > 0


def is_initialized() -> bool:
    return state.initialized


def device_count() -> int:
    _lazy_init()
    return state.bridge().runtime.device_count


def current_device() -> int:
    _lazy_init()
    return state.shim().current_device()


def _index(device) -> int:
    if isinstance(device, int):
        index = device
    elif device is None:
        index = current_device()
    else:
        device = torch.device(device)
        if device.type != "neuron":
            raise ValueError(f"expected a neuron device, got {device}")
        index = device.index if device.index is not None else current_device()
    count = device_count()
    if not 0 <= index < count:
        raise ValueError(f"invalid neuron device index {index}: {count} device(s) are visible (neuron:0 .. neuron:{count - 1})")
    return index


def set_device(device) -> None:
    state.shim().set_device(_index(device))


@contextmanager
def device(device):
    """Make ``device`` current inside the block (used by torch._utils._to and torch.load)."""
    if device is None or (isinstance(device, int) and device < 0):
        yield
        return
    previous = current_device()
    set_device(device)
    try:
        yield
    finally:
        set_device(previous)


def synchronize(device=None) -> None:
    """Wait for all work queued on ``device`` (all devices if None); raises a launch's error."""
    _lazy_init()
    state.bridge().synchronize_device(-1 if device is None else _index(device))


@dataclass(frozen=True)
class DeviceProperties:
    name: str
    total_memory: int
    platform: str
    neuron_core: str
    core_id: int

    def __repr__(self) -> str:
        return f"_NeuronDeviceProperties(name={self.name!r}, total_memory={self.total_memory >> 20}MB, core={self.core_id})"


def get_device_properties(device=None) -> DeviceProperties:
    dev = state.bridge().runtime.device(_index(device))
    arch = dev.arch
    return DeviceProperties(f"{arch.neuron_core} (simulated {arch.name})", dev.hbm.capacity, arch.name,
                            arch.neuron_core, dev.core_id)


def get_device_name(device=None) -> str:
    return get_device_properties(device).name


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.bfloat16, torch.float16]


def is_bf16_supported() -> bool:
    return True
