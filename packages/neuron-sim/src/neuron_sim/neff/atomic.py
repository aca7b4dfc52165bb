"""Atomic file replacement: readers see the old file or the new one, never a partial write.

Several processes (eager-mode workers, compile workers) may write the same NEFF at once, and a
crash or full disk may interrupt any of them; writing a uniquely named temporary file in the same
directory and renaming it over the target is the one pattern that is safe for all of these.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically; on any error the target is untouched and the
    temporary file removed, and the OSError propagates."""
    path = Path(path)
    # Same directory as the target, so os.replace is a rename within one filesystem. The pid and
    # random suffix keep concurrent writers (threads or processes) from sharing a temporary file.
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())  # the data must be on disk before the rename makes it visible
        os.replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise
    _fsync_directory(path.parent)


def is_temporary_name(name: str) -> bool:
    """Whether ``name`` is a temporary file left by ``atomic_write_bytes`` (e.g. after a crash)."""
    return name.startswith(".") and name.endswith(".tmp")


def _fsync_directory(directory: Path) -> None:
    # Makes the rename itself durable on POSIX; not possible (nor needed) everywhere, so best effort.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _remove_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
