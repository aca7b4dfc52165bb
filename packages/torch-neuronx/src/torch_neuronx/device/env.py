"""Environment settings read on every op (they may change while a process runs: tests switch the
eager backend per test).

``os.environ.get`` encodes the name and decodes the value on each call, ~1 us - a few percent of
a tiny op's whole eager overhead. On POSIX ``os.environ`` keeps its bytes table (``_data``,
updated by every assignment through ``os.environ``), which a lookup reads directly.
"""

from __future__ import annotations

import os
import sys

_BYTES_TABLE = getattr(os.environ, "_data", None) if os.name == "posix" and sys.implementation.name == "cpython" else None


def get(name: str, default: str) -> str:
    """``os.environ.get(name, default)``."""
    if _BYTES_TABLE is None:
        return os.environ.get(name, default)
    value = _BYTES_TABLE.get(name.encode())
    return default if value is None else os.fsdecode(value)
