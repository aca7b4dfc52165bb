"""An on-disk NEFF cache with an in-memory LRU layer in front of it.

Eager mode compiles every distinct op into its own NEFF, so compiled NEFFs are kept across runs,
keyed by a hash of what they were compiled from. The cache is a convenience, never a source of
failure: a corrupt entry is discarded (with a warning) so the caller rebuilds it, and a disk that
is full or read-only degrades the cache to memory-only instead of breaking the program.

A file name is not trusted. Each entry records the request it was compiled for (its key's parts,
in the header), and a read returns it only for that request: a NEFF of another request copied
or linked under a key is refused, as are symbolic links, anything but a regular file, files over
the size limit (unread) and files whose sections would decompress past it (before decompressing).

Layout: ``<dir>/<key[:2]>/<key[2:4]>/<key>.neff``. Two levels of sharding keep directories small
with hundreds of thousands of entries. Writes are atomic renames, so any number of processes may
share a directory and write the same key at once; readers see a whole file or none.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import stat
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import NeffFormatError
from .atomic import atomic_write_bytes, is_temporary_name
from .container import NEFF_VERSION, PREAMBLE_SIZE, check_preamble, decoded_size, header_of, unpack
from .format import Neff, decode_sections

# Default bound on one entry: its file, and what its sections decompress to. A NEFF's JSON expands
# several times more when parsed, so this bounds what a foreign or crafted entry can cost.
DEFAULT_MAX_ENTRY_BYTES = 256 << 20
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) \
    | getattr(os, "O_BINARY", 0)

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
    corrupt_entries: int = 0  # unreadable files (damaged, foreign, another format version), deleted
    refused_entries: int = 0  # readable but not for this request: links, other keys, over the limit
    write_failures: int = 0
    skipped_writes: int = 0  # NEFFs over the size limit, kept in memory only


@dataclass(frozen=True)
class CacheKey:
    """What a NEFF is cached for: ``parts``, the canonical JSON text of the request (recorded in
    the entry and compared on every read), and ``hex``, its SHA-256 (the entry's file name)."""

    hex: str
    parts: str

    def __str__(self) -> str:
        return self.hex


def cache_key(*parts: Any) -> CacheKey:
    """The key of JSON-able ``parts`` (source text, shapes, dtypes, targets, code fingerprints).

    Dicts are hashed with sorted keys, so insertion order does not matter; bytes are hashed by
    content. The NEFF format version is mixed in so a format upgrade looks up fresh entries
    instead of tripping over (and warning about) every old one.
    """
    try:
        text = json.dumps(["neuron-sim-neff", NEFF_VERSION, list(parts)], sort_keys=True, separators=(",", ":"), default=_key_default)
    except (TypeError, ValueError) as err:
        raise TypeError(f"cache_key parts must be JSON-able (str, numbers, bools, None, lists, dicts, bytes): {err}") from None
    return CacheKey(hashlib.sha256(text.encode("utf-8")).hexdigest(), text)


def _key_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"bytes.sha256": hashlib.sha256(value).hexdigest()}
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "shape", None) == ():  # NumPy scalars
        return item()
    raise TypeError(f"{type(value).__name__} {value!r} has no stable JSON form")


class NeffCache:
    """``get``/``put``/``get_or_build`` NEFFs by ``CacheKey``. Thread-safe; shareable between
    processes. ``max_entry_bytes`` bounds an entry's file and its decompressed sections."""

    def __init__(self, directory: str | os.PathLike, memory_entries: int = 256, max_entry_bytes: int = DEFAULT_MAX_ENTRY_BYTES):
        if memory_entries < 0:
            raise ValueError(f"memory_entries must be >= 0, got {memory_entries}")
        if not isinstance(max_entry_bytes, int) or max_entry_bytes <= PREAMBLE_SIZE:
            raise ValueError(f"max_entry_bytes must be an int above {PREAMBLE_SIZE}, got {max_entry_bytes!r}")
        self._directory = Path(directory)
        self._memory_entries = memory_entries
        self._max_entry_bytes = max_entry_bytes
        self._memory: OrderedDict[str, Neff] = OrderedDict()
        self._lock = threading.Lock()  # guards _memory and the counters; disk I/O runs outside it
        self._counts = {f.name: 0 for f in dataclasses.fields(CacheStats)}
        self._warned = set()  # write problems are reported once per cache, then counted

    def __repr__(self) -> str:
        return f"NeffCache({str(self._directory)!r}, memory_entries={self._memory_entries}, max_entry_bytes={self._max_entry_bytes})"

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def max_entry_bytes(self) -> int:
        return self._max_entry_bytes

    @property
    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(**self._counts)

    def path_for(self, key: CacheKey) -> Path:
        """Where ``key`` lives on disk (its hex is validated: it becomes a file name)."""
        if not isinstance(key, CacheKey):
            raise TypeError(f"NEFF cache keys are CacheKey objects made by cache_key(), got {type(key).__name__} {key!r}")
        if not isinstance(key.hex, str) or not _KEY.fullmatch(key.hex):
            raise ValueError(f"NEFF cache keys are lowercase hex strings of 8-128 characters (see cache_key()), got {key.hex!r}")
        return self._directory / key.hex[:2] / key.hex[2:4] / f"{key.hex}.neff"

    # --- lookups ---------------------------------------------------------------------------
    def get(self, key: CacheKey) -> Neff | None:
        """The NEFF cached for ``key``, or None when absent or unusable (then the caller rebuilds it)."""
        path = self.path_for(key)
        with self._lock:
            neff = self._memory.get(key.hex)
            if neff is not None:
                self._memory.move_to_end(key.hex)
                self._counts["hits"] += 1
                return neff
        neff = self._read(path, key)
        with self._lock:
            if neff is None:
                self._counts["misses"] += 1
                return None
            self._counts["hits"] += 1
            self._counts["disk_hits"] += 1
            self._remember(key.hex, neff)
        return neff

    def put(self, key: CacheKey, neff: Neff) -> None:
        """Keep ``neff`` in memory and write it to disk, recording ``key`` in it; a failed write
        (or a NEFF over the size limit) only costs a warning."""
        if not isinstance(neff, Neff):
            raise TypeError(f"NeffCache.put expects a Neff, got {type(neff).__name__}")
        path = self.path_for(key)
        # Outside the try: an unserializable NEFF is the caller's bug.
        data = dataclasses.replace(neff, compiled_for=key.parts).to_bytes()
        with self._lock:
            self._remember(key.hex, neff)
        size = max(len(data), decoded_size(header_of(data)))
        if size > self._max_entry_bytes:
            self._count_and_warn_once("skipped_writes", f"not writing NEFF cache entry {path}: it takes {size} bytes, more than "
                                      f"the limit of {self._max_entry_bytes} bytes per entry; keeping it in memory only "
                                      f"(further such NEFFs are counted in stats.skipped_writes, not reported)")
            return
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(path, data)
        except OSError as err:
            self._count_and_warn_once("write_failures", f"cannot write NEFF cache entry {path}: {err}; keeping NEFFs in memory "
                                      f"only (further write failures are counted in stats.write_failures, not reported)")

    def get_or_build(self, key: CacheKey, build_fn: Callable[[], Neff]) -> Neff:
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

    def _read(self, path: Path, key: CacheKey) -> Neff | None:
        """The entry at ``path`` if it is a regular file within the size limit, an intact NEFF,
        and was compiled for ``key``; reads no more of it than that takes."""
        limit = self._max_entry_bytes
        try:
            st = os.lstat(path)
            if stat.S_ISLNK(st.st_mode):
                target = os.readlink(path)
                _unlink(path)  # the link only; what it points at is not ours
                return self._refused(path, f"it is a symbolic link (to {target}), and entries must be regular files")
            if not stat.S_ISREG(st.st_mode):
                return self._refused(path, f"it is not a regular file ({_file_kind(st.st_mode)})")
            if st.st_size > limit:
                return self._refused(path, f"it holds {st.st_size} bytes, more than the limit of {limit} bytes per entry")
            fd = os.open(path, _OPEN_FLAGS)  # no following a link, no blocking on a FIFO swapped in meanwhile
            with open(fd, "rb") as f:
                st = os.fstat(f.fileno())
                if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
                    return self._refused(path, "it was replaced by something that is not an entry while being read")
                identity = _identity(st)
                head = f.read(PREAMBLE_SIZE)
                try:
                    check_preamble(head, str(path))  # a foreign file is refused after 16 bytes
                except NeffFormatError as err:
                    return self._corrupt(path, identity, err)
                data = _read_rest(f, head, st.st_size)
        except (FileNotFoundError, NotADirectoryError):  # no entry (or no cache directory) yet
            return None
        except OSError as err:
            warnings.warn(f"cannot read NEFF cache entry {path}: {err}; treating it as a miss", NeffCacheWarning, stacklevel=3)
            return None
        try:
            header, sections = unpack(data, str(path))
            recorded = header.get("compiled_for")
            if recorded != key.parts:
                _remove_if_unchanged(path, identity)
                return self._refused(path, _mismatch(recorded, key.parts))
            inflated = decoded_size(header)
            if inflated > limit:
                return self._refused(path, f"its sections decompress to {inflated} bytes, more than the limit of {limit} bytes per entry")
            return decode_sections(header, sections, str(path))
        except NeffFormatError as err:
            return self._corrupt(path, identity, err)

    def _corrupt(self, path: Path, identity: tuple, err: NeffFormatError) -> None:
        with self._lock:
            self._counts["corrupt_entries"] += 1
        warnings.warn(f"discarding unusable NEFF cache entry ({err}); it will be rebuilt", NeffCacheWarning, stacklevel=4)
        _remove_if_unchanged(path, identity)
        return None

    def _refused(self, path: Path, reason: str) -> None:
        with self._lock:
            self._counts["refused_entries"] += 1
        warnings.warn(f"refusing NEFF cache entry {path}: {reason}; it will be rebuilt", NeffCacheWarning, stacklevel=4)
        return None

    def _count_and_warn_once(self, counter: str, message: str) -> None:
        """Count every occurrence but warn once: a full disk would otherwise warn on every op."""
        with self._lock:
            self._counts[counter] += 1
            first = counter not in self._warned
            self._warned.add(counter)
        if first:
            warnings.warn(message, NeffCacheWarning, stacklevel=4)


def _read_rest(f, head: bytes, size: int) -> bytearray:
    """``head`` and the rest of the file, in one buffer of the size ``fstat`` gave (a file that
    changes meanwhile fails the checksum instead)."""
    data = bytearray(max(size, len(head)))
    view = memoryview(data)
    view[: len(head)] = head
    filled = len(head)
    while filled < len(data):
        n = f.readinto(view[filled:])
        if not n:
            break
        filled += n
    del view
    del data[filled:]
    return data


def _mismatch(recorded: Any, requested: str) -> str:
    """Why an entry's recorded request is not this one, naming the first part that differs."""
    if not isinstance(recorded, str):
        return "it records no request it was compiled for (written by an older version?), so it may be any NEFF"
    try:
        mine, theirs = json.loads(requested)[2], json.loads(recorded)[2]
    except (ValueError, IndexError, TypeError, KeyError):
        return "it was compiled for another request"
    if not isinstance(theirs, list):
        return "it was compiled for another request"
    for i, (a, b) in enumerate(zip(theirs, mine)):
        if a != b:
            return f"it was compiled for another request (key part {i} is {_short(a)}, this request's is {_short(b)})"
    return f"it was compiled for another request ({len(theirs)} key parts, this request has {len(mine)})"


def _short(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _file_kind(mode: int) -> str:
    for test, kind in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return kind
    return "not a file"


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
