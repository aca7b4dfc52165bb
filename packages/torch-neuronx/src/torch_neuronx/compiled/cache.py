"""Compiled ops, cached in memory and on disk.

A call's key is its op, the shape, strides and dtype of each tensor argument, its other
arguments and the target. The NEFF compiled for a key is kept in memory for the process and on
disk (``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``$XDG_CACHE_HOME/torch_neuronx/neff`` or
``~/.cache/torch_neuronx/neff``) for the next one, with what the launch needs in its metadata, so
a disk hit skips tracing too. On disk the key also holds everything that shapes the NEFF or its
timing (``fingerprints()``: each package's code fingerprint, the versions of torch, numpy,
ml_dtypes and Python), and each entry records the key it was compiled for: neuron_sim's NeffCache
refuses an entry of another key, a link, or one over ``TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB``,
and discards corrupt or old ones, with a warning - the entry is rebuilt. A full or read-only disk
only costs the disk layer. Calls that cannot be lowered are remembered in memory, so they go
straight to CPU fallback next time.
"""

from __future__ import annotations

import functools
import os
import platform
import threading
import time

import ml_dtypes
import neuron_sim
import neuronxcc.compiler
import numpy
import torch
from neuron_sim.fingerprint import tree_fingerprint
from neuron_sim.neff import DEFAULT_MAX_ENTRY_BYTES, CacheKey, NeffCache, cache_key

from .dtypes import NotLowerable
from .entry import METADATA_VERSION, CompiledOp

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_CACHE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"
MAX_ENTRY_MB_ENV = "TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB"


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
        self._disk_config: tuple | None = None
        self.stats = dict.fromkeys(("hits", "compiled", "disk_hits", "not_lowerable"), 0)
        self.compile_seconds = 0.0

    def disk(self) -> NeffCache | None:
        if os.environ.get(DISABLE_CACHE_ENV, "0") not in ("", "0"):
            return None
        config = (os.environ.get(CACHE_DIR_ENV) or default_cache_dir(), max_entry_bytes())
        if self._disk is None or config != self._disk_config:
            self._disk, self._disk_config = NeffCache(config[0], memory_entries=0, max_entry_bytes=config[1]), config
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


def max_entry_bytes() -> int:
    """The disk cache's bound on one entry (``TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB``)."""
    raw = os.environ.get(MAX_ENTRY_MB_ENV, "").strip()
    if not raw:
        return DEFAULT_MAX_ENTRY_BYTES
    try:
        mib = float(raw)
    except ValueError:
        mib = -1.0
    if not mib > 0:
        raise ValueError(f"{MAX_ENTRY_MB_ENV}={raw!r}: expected a positive number of MiB (default {DEFAULT_MAX_ENTRY_BYTES >> 20})")
    return max(int(mib * (1 << 20)), 1024)


def neff_key(kind: str, *signature) -> CacheKey:
    """The disk key of a request of ``kind`` (eager op, graph, adaptive run): its ``signature``
    (op or graph, shapes, strides, dtypes, target - JSON-able) and everything that shapes its NEFF."""
    return cache_key(kind, METADATA_VERSION, fingerprints(), *signature)


def _disk_key(key: tuple) -> CacheKey:
    # repr() of the key is stable across processes: op names, dtypes, shapes, numbers.
    return neff_key("torch_neuronx.eager", repr(key))


@functools.cache
def fingerprints() -> dict:
    """What shapes a NEFF or its timing besides the request itself: the code of neuron-sim (ISA,
    builder, timing model, architecture tables), of the compiler and its frontends, of this
    package (tracing, partitioning, entry metadata), and the versions of the libraries whose
    arithmetic folds constants or traces ops. Computed once per process."""
    return {
        "neuron-sim": neuron_sim.code_fingerprint(),
        "neuronx-cc": neuronxcc.compiler.code_fingerprint(),
        "torch-neuronx": code_fingerprint(),
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "ml_dtypes": ml_dtypes.__version__,
        "python": platform.python_version(),
    }


@functools.cache
def code_fingerprint() -> str:
    """The fingerprint of this package's code: tracing, partitioning and lowering a graph, the
    entries' metadata - all of it but the test helpers. Version numbers alone would miss every
    change made between releases."""
    return tree_fingerprint(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), exclude=("testing",))


CACHE = OpCache()
