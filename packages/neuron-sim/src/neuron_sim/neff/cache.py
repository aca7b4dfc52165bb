"""An on-disk NEFF cache with an in-memory LRU layer in front of it.

Eager mode compiles every distinct op into its own NEFF, so compiled NEFFs are kept across runs,
keyed by a hash of what they were compiled from. The cache is a convenience, never a source of
failure: a corrupt entry is discarded (with a warning) so the caller rebuilds it, and a disk that
is full or read-only degrades the cache to memory-only instead of breaking the program.

Layout: ``<dir>/<key[:2]>/<key[2:4]>/<key>.neff``. Two levels of sharding keep directories small
with hundreds of thousands of entries. Writes are atomic renames, so any number of processes may
share a directory and write the same key at once; readers see a whole file or none.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NeffFormatError
from .atomic import atomic_write_bytes, is_temporary_name
from .container import NEFF_VERSION
from .format import Neff

_KEY = re.compile(r"[0-9a-f]{8,128}")
_SHARD = re.compile(r"[0-9a-f]{2}")


class NeffCacheWarning(RuntimeWarning):
    """The cache hit a problem it worked around (corrupt entry, unwritable disk)."""


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache object was created. ``hits`` counts memory and disk hits;
    ``disk_hits`` is the part of them that had to be read from disk."""

    hits: int = 0
    misses: int = 0
    disk_hits: int = 0
    corrupt_entries: int = 0
    write_failures: int = 0


def cache_key(*parts: Any) -> str:
    """A stable hex key for JSON-able ``parts`` (source text, shapes, dtypes, compiler options).

    Dicts are hashed with sorted keys, so insertion order does not matter; bytes are hashed by
    content. The NEFF format version is mixed in so a format upgrade looks up fresh entries
    instead of tripping over (and warning about) every old one.
    """
    try:
        text = json.dumps(["neuron-sim-neff", NEFF_VERSION, list(parts)], sort_keys=True, separators=(",", ":"), default=_key_default)
    except (TypeError, ValueError) as err:
        raise TypeError(f"cache_key parts must be JSON-able (str, numbers, bools, None, lists, dicts, bytes): {err}") from None
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _key_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes.sha256": hashlib.sha256(value).hexdigest()}
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():  # NumPy scalars
        return item()
    raise TypeError(f"{type(value).__name__} {value!r} has no stable JSON form")


class NeffCache:
    """``get``/``put``/``get_or_build`` NEFFs by key. Thread-safe; shareable between processes."""

    def __init__(self, directory: str | os.PathLike, memory_entries: int = 256):
        if memory_entries < 0:
            raise ValueError(f"memory_entries must be >= 0, got {memory_entries}")
        self._directory = Path(directory)
        self._memory_entries = memory_entries
        self._memory: OrderedDict[str, Neff] = OrderedDict()
        self._lock = threading.Lock()  # guards _memory and the counters; disk I/O runs outside it
        self._counts = dict.fromkeys(("hits", "misses", "disk_hits", "corrupt_entries", "write_failures"), 0)
        self._warned_write_failure = False

    def __repr__(self) -> str:
        return f"NeffCache({str(self._directory)!r}, memory_entries={self._memory_entries})"

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(**self._counts)

    def path_for(self, key: str) -> Path:
        """Where ``key`` lives on disk. Keys are validated because they become file names."""
        if not isinstance(key, str) or not _KEY.fullmatch(key):
            raise ValueError(f"NEFF cache keys are lowercase hex strings of 8-128 characters (see cache_key()), got {key!r}")
        return self._directory / key[:2] / key[2:4] / f"{key}.neff"

    # --- lookups ---------------------------------------------------------------------------
    def get(self, key: str) -> Neff | None:
        """The cached NEFF, or None when absent or unusable (then the caller rebuilds it)."""
        path = self.path_for(key)
        with self._lock:
            neff = self._memory.get(key)
            if neff is not None:
                self._memory.move_to_end(key)
                self._counts["hits"] += 1
                return neff
        neff = self._read(path)
        with self._lock:
            if neff is None:
                self._counts["misses"] += 1
                return None
            self._counts["hits"] += 1
            self._counts["disk_hits"] += 1
            self._remember(key, neff)
        return neff

    def put(self, key: str, neff: Neff) -> None:
        """Keep ``neff`` in memory and write it to disk; a failed write only costs a warning."""
        if not isinstance(neff, Neff):
            raise TypeError(f"NeffCache.put expects a Neff, got {type(neff).__name__}")
        path = self.path_for(key)
        data = neff.to_bytes()  # outside the try: an unserializable NEFF is the caller's bug
        with self._lock:
            self._remember(key, neff)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except OSError as err:
            self._write_failed(path, err)

    def get_or_build(self, key: str, build_fn: Callable[[], Neff]) -> Neff:
        """The cached NEFF for ``key``, or ``build_fn()`` cached under it. Concurrent callers may
        both build; the atomic write makes the last one win harmlessly."""
        neff = self.get(key)
        if neff is None:
            neff = build_fn()
            if not isinstance(neff, Neff):
                raise TypeError(f"build_fn must return a Neff, got {type(neff).__name__}")
            self.put(key, neff)
        return neff

    def clear(self) -> None:
        """Empty memory and delete this cache's files (entries and stale temporaries) on disk.

        Only files the cache itself names are removed, never anything else in the directory,
        which may be a user's. Counters are kept.
        """
        with self._lock:
            self._memory.clear()
        for shard in _subdirs(self._directory):
            for subshard in _subdirs(shard):
                for entry in _listdir(subshard):
                    if (entry.suffix == ".neff" and _KEY.fullmatch(entry.stem)) or is_temporary_name(entry.name):
                        _unlink(entry)
                _rmdir_if_empty(subshard)
            _rmdir_if_empty(shard)

    # --- internals -------------------------------------------------------------------------
    def _remember(self, key: str, neff: Neff) -> None:
        """Insert into the LRU layer; the caller holds the lock."""
        if self._memory_entries == 0:
            return
        self._memory[key] = neff
        self._memory.move_to_end(key)
        while len(self._memory) > self._memory_entries:
            self._memory.popitem(last=False)

    def _read(self, path: Path) -> Neff | None:
        try:
            with open(path, "rb") as f:
                identity = _identity(os.fstat(f.fileno()))
                data = f.read()
        except (FileNotFoundError, NotADirectoryError):  # no entry (or no cache directory) yet
            return None
        except OSError as err:
            warnings.warn(f"cannot read NEFF cache entry {path}: {err}; treating it as a miss", NeffCacheWarning, stacklevel=3)
            return None
        try:
            return Neff.from_bytes(data, source=str(path))
        except NeffFormatError as err:
            with self._lock:
                self._counts["corrupt_entries"] += 1
            warnings.warn(f"discarding unusable NEFF cache entry ({err}); it will be rebuilt", NeffCacheWarning, stacklevel=3)
            _remove_if_unchanged(path, identity)
            return None

    def _write_failed(self, path: Path, err: OSError) -> None:
        """Count every failure but warn once: a full disk would otherwise warn on every op."""
        with self._lock:
            self._counts["write_failures"] += 1
            first = not self._warned_write_failure
            self._warned_write_failure = True
        if first:
            warnings.warn(
                f"cannot write NEFF cache entry {path}: {err}; keeping NEFFs in memory only "
                f"(further write failures are counted in stats.write_failures, not reported)",
                NeffCacheWarning,
                stacklevel=3,
            )


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _remove_if_unchanged(path: Path, identity: tuple[int, int, int, int]) -> None:
    """Delete the bad file unless another process has meanwhile replaced it with a new one."""
    try:
        if _identity(os.stat(path)) == identity:
            os.unlink(path)
    except OSError:
        pass


def _subdirs(directory: Path) -> list[Path]:
    return [p for p in _listdir(directory) if _SHARD.fullmatch(p.name) and p.is_dir()]


def _listdir(directory: Path) -> list[Path]:
    try:
        return list(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def _rmdir_if_empty(directory: Path) -> None:
    try:
        directory.rmdir()
    except OSError:
        pass
