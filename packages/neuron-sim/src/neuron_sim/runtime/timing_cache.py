"""Facts about a program that every launch needs, computed once per program object: its device
time per architecture, its tensor table, and whether its loops have run-time trip counts.

Timing is data-independent, so the first launch pays for the timing model and later launches
reuse the result (``PerProgram``, also used for a program's decoded constants). Programs must
not be mutated after their first launch.
"""

from __future__ import annotations

import threading
import weakref

from ..arch import Architecture
from ..timing import TimingResult, estimate


class PerProgram:
    """Values computed once per program object (and an optional ``extra`` key, e.g. the target).
    ``Program`` is an unhashable dataclass, so entries are keyed by ``id`` and dropped by a
    weakref callback when the program dies (ids are reused after that)."""

    def __init__(self):
        # Reentrant: a program can die (and its callback run) while this thread holds the lock.
        self._lock = threading.RLock()
        self._entries: dict[tuple, tuple[weakref.ref, object]] = {}

    def get(self, program, make, extra=None):
        """The value for ``program``, made by ``make()`` on its first request (outside the lock:
        other programs need not wait; a racing thread's value is dropped for the first one)."""
        key = (id(program), extra)
        entry = self._entries.get(key)
        if entry is not None and entry[0]() is program:
            return entry[1]
        value = make()
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0]() is program:
                return entry[1]
            self._entries[key] = (weakref.ref(program, lambda ref, key=key: self._forget(key, ref)), value)
        return value

    def _forget(self, key, ref) -> None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0] is ref:
                del self._entries[key]

    def __contains__(self, key) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)


_cache = PerProgram()  # (program, arch name) -> TimingResult
_tables = PerProgram()  # program -> TensorTable


def program_timing(program, arch: Architecture) -> TimingResult:
    return _cache.get(program, lambda: estimate(program, arch), arch.name)


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


def tensor_table(program) -> TensorTable:
    return _tables.get(program, lambda: TensorTable(program))


def has_runtime_trip_counts(program) -> bool:
    """Whether some loop of ``program`` runs a number of times known only at run time."""
    return tensor_table(program).runtime_trip_counts
