"""Device memory statistics, as torch.cuda's memory API names them.

The allocator caches, as CUDA's does: a freed block stays *reserved* (still counted against the
simulated HBM) and serves a later allocation of a similar size without going back to the
runtime. ``memory_allocated`` counts live tensors, ``memory_reserved`` what the HBM holds for
this process; ``empty_cache()`` returns the cached blocks, and an allocation that would not fit
releases them itself before reporting out-of-memory. ``TORCH_NEURONX_NO_MEMORY_CACHING=1``
turns caching off (every free returns memory at once: reserved equals allocated).
"""

from __future__ import annotations

from collections import OrderedDict

import torch

from . import hooks, state


def _check(index: int) -> int:
    count = state.bridge().runtime.device_count
    if not 0 <= index < count:
        raise ValueError(f"invalid neuron device index {index}: {count} device(s) are visible (NEURON_RT_VISIBLE_CORES)")
    return index


def memory_stats(device=None) -> OrderedDict:
    return torch.accelerator.memory_stats(_check(state.device_index(device)))


def memory_allocated(device=None) -> int:
    return torch.accelerator.memory_allocated(_check(state.device_index(device)))


def max_memory_allocated(device=None) -> int:
    return torch.accelerator.max_memory_allocated(_check(state.device_index(device)))


def memory_reserved(device=None) -> int:
    return torch.accelerator.memory_reserved(_check(state.device_index(device)))


def max_memory_reserved(device=None) -> int:
    return torch.accelerator.max_memory_reserved(_check(state.device_index(device)))


def reset_peak_memory_stats(device=None) -> None:
    torch.accelerator.reset_peak_memory_stats(_check(state.device_index(device)))


def reset_accumulated_memory_stats(device=None) -> None:
    torch.accelerator.reset_accumulated_memory_stats(_check(state.device_index(device)))


def empty_cache() -> None:
    """Return the allocator's cached free blocks to the simulated HBM (as torch.cuda.empty_cache),
    after dropping the device tensors the layers above keep for reuse (the eager path's scalars)."""
    hooks.run_release_memory()
    state.shim().empty_cache()


def mem_get_info(device=None) -> tuple[int, int]:
    """(free bytes, total bytes) of the device's simulated HBM."""
    return torch.accelerator.get_memory_info(_check(state.device_index(device)))


def memory_summary(device=None) -> str:
    stats = memory_stats(device)
    free, total = mem_get_info(device)
    return (
        f"neuron:{state.device_index(device)} simulated HBM: {stats.get('allocated_bytes.all.current', 0):,} B allocated "
        f"(peak {stats.get('allocated_bytes.all.peak', 0):,} B) of {total:,} B; {free:,} B free; "
        f"{stats.get('allocation.all.current', 0)} live allocations, {stats.get('num_ooms', 0)} OOMs"
    )
