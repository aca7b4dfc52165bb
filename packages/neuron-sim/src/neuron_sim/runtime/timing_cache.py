"""Facts about a program that every launch needs, computed once per program object: its device
time per architecture, its tensor table, and whether its loops have run-time trip counts.

Timing is data-independent, so the first launch pays for the timing model and later launches
reuse the result. ``Program`` is an unhashable dataclass, so entries are keyed by ``id`` and
dropped by a weakref callback when the program dies (ids are reused after that). Programs must
not be mutated after their first launch.
"""

from __future__ import annotations

import threading
import weakref

from ..arch import Architecture
from ..timing import TimingResult, estimate

# Reentrant: a program can die (and its callback run) while this thread holds the lock.
_lock = threading.RLock()
_cache: dict[tuple[int, str], tuple[weakref.ref, TimingResult]] = {}


def program_timing(program, arch: Architecture) -> TimingResult:
    key = (id(program), arch.name)
    entry = _cache.get(key)
    if entry is not None and entry[0]() is program:
        return entry[1]
    result = estimate(program, arch)  # outside the lock: other programs need not wait
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0]() is program:
            return entry[1]  # another thread won the race; keep one shared result
        _cache[key] = (weakref.ref(program, lambda _ref, key=key: _forget(key, _ref)), result)
    return result


def _forget(key, ref) -> None:
    with _lock:
        entry = _cache.get(key)
        if entry is not None and entry[0] is ref:
            del _cache[key]


def cached_program_count() -> int:
    return len(_cache)


class TensorTable:
    """A program's tensors as launches check them: name -> (kind, nbytes, shape, dtype), and the
    names a launch must bind."""

    __slots__ = ("decls", "required", "runtime_trip_counts")

    def __init__(self, program):
        from ..isa.control import LoopStart

        self.decls = {t.name: (t.kind, t.nbytes, t.shape, t.dtype) for t in program.tensors}
        self.required = tuple(t.name for t in program.tensors if t.kind != "internal")
        self.runtime_trip_counts = any(isinstance(i, LoopStart) and i.static_trip_count() is None for i in program.instructions)


_tables: dict[int, tuple[weakref.ref, TensorTable]] = {}


def tensor_table(program) -> TensorTable:
    key = id(program)
    entry = _tables.get(key)
    if entry is not None and entry[0]() is program:
        return entry[1]
    table = TensorTable(program)
    with _lock:
        _tables[key] = (weakref.ref(program, lambda _ref, key=key: _forget_table(key, _ref)), table)
    return table


def _forget_table(key, ref) -> None:
    with _lock:
        entry = _tables.get(key)
        if entry is not None and entry[0] is ref:
            del _tables[key]


def has_runtime_trip_counts(program) -> bool:
    """Whether some loop of ``program`` runs a number of times known only at run time."""
    return tensor_table(program).runtime_trip_counts
