"""Compiled entries (``entry.CompiledNeff``), cached in memory and on disk: one cache class for
eager ops (``CACHE`` here) and compiled graphs (``dynamo.graph_cache.CACHE``).

An eager call's key is its op, the shape, strides and dtype of each tensor argument, its other
arguments and the target; a graph's, its code and buffer layouts. The entry compiled for a key is
kept in memory for the process and on disk (``TORCH_NEURONX_NEFF_CACHE_DIR``, default
``$XDG_CACHE_HOME/torch_neuronx/neff`` or ``~/.cache/torch_neuronx/neff``) for the next one, with
what the launch needs in its NEFF's metadata, so a disk hit skips tracing too. On disk the key also holds everything that shapes the NEFF or its
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
import warnings
from collections.abc import Callable, Hashable
from dataclasses import dataclass

import ml_dtypes
import neuron_sim
import neuronxcc.compiler
import numpy
import torch
from neuron_sim.fingerprint import tree_fingerprint
from neuron_sim.neff import DEFAULT_MAX_ENTRY_BYTES, CacheKey, NeffCache, NeffCacheWarning, cache_key

from .dtypes import NotLowerable
from .entry import METADATA_KEY, METADATA_VERSION, CompiledNeff

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
DISABLE_CACHE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"
MAX_ENTRY_MB_ENV = "TORCH_NEURONX_NEFF_CACHE_MAX_ENTRY_MB"


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "torch_neuronx", "neff")


@dataclass(frozen=True)
class EntryStats:
    """Counters of an EntryCache since it was made: memory hits, entries read from disk, entries
    compiled, calls remembered as not lowerable (eager ops that run on CPU), and the seconds
    ``get_or_build`` spent building."""

    hits: int = 0
    disk_hits: int = 0
    compiled: int = 0
    not_lowerable: int = 0
    compile_seconds: float = 0.0


class EntryCache:
    """Compiled entries of one kind of request (``kind``: eager ops, compiled graphs), in memory
    for the process, over the disk cache. ``signature(key)`` is the JSON-able form of a memory
    key (op or graph, shapes, strides, dtypes, target) that the disk key is made of."""

    def __init__(self, kind: str, signature: Callable[[Hashable], list]):
        self.kind = kind
        self._signature = signature
        self._memory: dict = {}
        self._lock = threading.Lock()
        # One build at a time: tracing (torch.fx's patcher is a module global) breaks when two
        # threads trace at once - the loser's op was remembered as not lowerable and fell back
        # for the rest of the process. Also saves building one op twice.
        self._build_lock = threading.RLock()
        self._hits = 0  # a plain attribute: counted on every eager op
        self._counts = {"disk_hits": 0, "compiled": 0, "not_lowerable": 0, "compile_seconds": 0.0}

    def __len__(self) -> int:
        """Entries in memory (calls remembered as not lowerable included)."""
        return len(self._memory)

    @property
    def stats(self) -> EntryStats:
        return EntryStats(hits=self._hits, **self._counts)

    def lookup(self, key):
        """The entry (or NotLowerable) in memory for ``key``, or None: the eager hit path."""
        entry = self._memory.get(key)
        if entry is not None:
            self._hits += 1
        return entry

    def get(self, key) -> tuple[CompiledNeff | None, str]:
        """(entry, where it was found: ``memory`` / ``disk``), or (None, "")."""
        entry = self.lookup(key)
        if entry is not None:
            return entry, "memory"
        disk_key = self.disk_key(key)
        entry = self._load(disk_key)
        if entry is None:
            return None, ""
        with self._lock:
            self._memory[key] = entry
        return entry, "disk"

    def put(self, key, entry: CompiledNeff) -> CompiledNeff:
        """Keep a just-built ``entry`` for ``key``, in memory and on disk. Returns the entry as a
        disk hit would give it back (its facts checked against its NEFF, as every load's are)."""
        disk_key = self.disk_key(key)
        entry = self._stored(entry, disk_key)
        with self._lock:
            self._memory[key] = entry
        return entry

    def get_or_build(self, key, build_fn):
        """The entry for ``key``: from memory, from disk, or ``build_fn()`` (a CompiledNeff, or
        raising NotLowerable, which is remembered and returned)."""
        entry = self.lookup(key)
        if entry is not None:
            return entry
        with self._build_lock:
            entry = self._memory.get(key)  # built by another thread meanwhile
            if entry is not None:
                return entry
            disk_key = self.disk_key(key)
            entry = self._load(disk_key)
            if entry is None:
                started = time.perf_counter()
                try:
                    entry = self._stored(build_fn(), disk_key)
                except NotLowerable as err:
                    entry = err
                    self._counts["not_lowerable"] += 1
                finally:
                    self._counts["compile_seconds"] += time.perf_counter() - started
            with self._lock:
                self._memory[key] = entry
            return entry

    def clear(self) -> None:
        """Forget the in-memory entries (the disk cache stays)."""
        with self._lock:
            self._memory.clear()

    def disk_key(self, key) -> CacheKey:
        return neff_key(self.kind, *self._signature(key))

    def _load(self, disk_key: CacheKey) -> CompiledNeff | None:
        disk = disk_cache()
        neff = disk.get(disk_key) if disk is not None else None
        if neff is None:
            return None
        try:
            entry = CompiledNeff.from_neff(neff)
        except ValueError as err:  # our key, but facts that do not fit the NEFF: never launch it
            warnings.warn(f"discarding NEFF cache entry {disk.path_for(disk_key)}: {err}; it will be rebuilt",
                          NeffCacheWarning, stacklevel=4)
            return None
        entry.key = disk_key.hex
        self._counts["disk_hits"] += 1
        return entry

    def _stored(self, built: CompiledNeff, disk_key: CacheKey) -> CompiledNeff:
        built.neff.metadata[METADATA_KEY] = built.metadata()
        entry = CompiledNeff.from_neff(built.neff)  # the form a disk hit gives: one path for both
        entry.key = disk_key.hex
        self._counts["compiled"] += 1
        disk = disk_cache()
        if disk is not None:
            disk.put(disk_key, entry.neff)
        return entry


_disk: NeffCache | None = None
_disk_config: tuple | None = None


def disk_cache() -> NeffCache | None:
    """The disk layer shared by every entry cache and adaptive eager's fused runs, as the
    environment configures it now (None: ``TORCH_NEURONX_NEFF_DISABLE_CACHE``)."""
    global _disk, _disk_config
    if os.environ.get(DISABLE_CACHE_ENV, "0") not in ("", "0"):
        return None
    config = (os.environ.get(CACHE_DIR_ENV) or default_cache_dir(), max_entry_bytes())
    if _disk is None or config != _disk_config:
        _disk, _disk_config = NeffCache(config[0], memory_entries=0, max_entry_bytes=config[1]), config
    return _disk


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


# An eager call's key: (op, target, call_signature(...)). repr() of it is stable across
# processes: op names, dtypes, shapes, strides, numbers.
CACHE = EntryCache("torch_neuronx.eager", lambda key: [repr(key)])
