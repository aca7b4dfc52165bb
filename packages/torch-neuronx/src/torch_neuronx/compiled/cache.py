"""Compiled ops, cached in memory and on disk.

A call's key is its op, the shape, strides and dtype of each tensor argument, its other
arguments and the target. The NEFF compiled for a key is kept in memory for the process and on
disk (``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``$XDG_CACHE_HOME/torch_neuronx/neff`` or
``~/.cache/torch_neuronx/neff``) for the next one, with what the launch needs in its metadata, so
a disk hit skips tracing too. Corrupt or old entries are rebuilt (neuron_sim's NeffCache warns);
a full or read-only disk only costs the disk layer. Calls that cannot be lowered are remembered
in memory, so they go straight to CPU fallback next time.
"""

from __future__ import annotations

import functools
import hashlib
import os
import threading
import time

import torch
from neuron_sim.neff import NeffCache, cache_key

from .dtypes import NotLowerable
from .entry import METADATA_VERSION, CompiledOp

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_CACHE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_neuronx", "neff")


class OpCache:
    def __init__(self):
        self._memory: dict[tuple, CompiledOp | NotLowerable] = {}
        self._lock = threading.Lock()
        # One build at a time: tracing (torch.fx's patcher is a module global) breaks when two
        # threads trace at once - the loser's op was remembered as not lowerable and fell back
        # for the rest of the process. Also saves building one op twice.
        self._build_lock = threading.RLock()
        self._disk: NeffCache | None = None
        self._disk_dir: str | None = None
        self.stats = dict.fromkeys(("hits", "compiled", "disk_hits", "not_lowerable"), 0)
        self.compile_seconds = 0.0

    def disk(self) -> NeffCache | None:
        if os.environ.get(DISABLE_CACHE_ENV, "0") not in ("", "0"):
            return None
        directory = os.environ.get(CACHE_DIR_ENV) or default_cache_dir()
        if self._disk is None or directory != self._disk_dir:
            self._disk, self._disk_dir = NeffCache(directory, memory_entries=0), directory
        return self._disk

    def lookup(self, key: tuple):
        """The cached CompiledOp or NotLowerable for ``key``, or None."""
        entry = self._memory.get(key)
        if entry is not None:
            self.stats["hits"] += 1
        return entry

    def get_or_build(self, key: tuple, build_fn) -> CompiledOp | NotLowerable:
        """The entry for ``key``: from memory, from disk, or ``build_fn()`` (a CompiledOp, or
        raising NotLowerable, which is remembered and returned)."""
        entry = self.lookup(key)
        if entry is not None:
            return entry
        with self._build_lock:
            entry = self._memory.get(key)  # built by another thread meanwhile
            return entry if entry is not None else self._load_or_build(key, build_fn)

    def _load_or_build(self, key: tuple, build_fn) -> CompiledOp | NotLowerable:
        entry = None
        disk = self.disk()
        disk_key = _disk_key(key) if disk is not None else None
        neff = disk.get(disk_key) if disk is not None else None
        if neff is not None:
            try:
                entry = CompiledOp.from_neff(neff)
                self.stats["disk_hits"] += 1
            except (ValueError, KeyError, TypeError):
                entry = None  # another writer's entry under our key: rebuild and overwrite it
        if entry is None:
            started = time.perf_counter()
            try:
                entry = build_fn()
            except NotLowerable as err:
                entry = err
                self.stats["not_lowerable"] += 1
            else:
                self.stats["compiled"] += 1
                if disk is not None:
                    disk.put(disk_key, entry.neff)
            self.compile_seconds += time.perf_counter() - started
        with self._lock:
            self._memory[key] = entry
        return entry

    def clear(self) -> None:
        """Forget the in-memory entries (the disk cache stays)."""
        with self._lock:
            self._memory.clear()


def _disk_key(key: tuple) -> str:
    # repr() of the key is stable across processes: op names, dtypes, shapes, numbers.
    return cache_key("torch_neuronx.eager", METADATA_VERSION, code_fingerprint(), torch.__version__, repr(key))


@functools.cache
def code_fingerprint() -> str:
    """A hash of the code that turns a call into a NEFF (this package's tracing and the compiler):
    a NEFF compiled by other code is another entry, never a stale hit. Version numbers alone
    would miss every change made between releases."""
    import neuron_sim
    import neuronxcc.compiler
    import neuronxcc.frontend

    digest = hashlib.sha256(neuron_sim.__version__.encode())
    roots = [os.path.dirname(__file__), os.path.dirname(neuronxcc.compiler.__file__), os.path.dirname(neuronxcc.frontend.__file__)]
    for root in roots:
        for folder, _, files in sorted(os.walk(root)):
            for name in sorted(f for f in files if f.endswith(".py")):
                with open(os.path.join(folder, name), "rb") as f:
                    digest.update(name.encode() + f.read())
    return digest.hexdigest()


CACHE = OpCache()
