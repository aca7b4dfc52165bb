"""What every functional executor is: the protocol the runtime runs programs through.

An executor is made once per device and mode, by a factory taking the ``Architecture``, and runs
one program at a time (the device holds a lock around it), so it may keep state between launches
(the exact executor's SBUF/PSUM, the fast executor's pool of temporaries).

``run(program, buffers)`` executes ``program`` with every HBM tensor it declares bound in
``buffers`` (tensor name -> flat, C-contiguous uint8 numpy array: device memory, zero-copy), and
returns a ``RunReport`` (or None: nothing to report). It raises on failure; the runtime keeps the
error until the next synchronization point.

What an executor can do is declared on its registry entry (``ExecutorSpec``), not discovered by
trying: whether it evaluates the program's graph-level form (``needs_graph``: programs without
one run ``exact`` instead) and whether it reports the trip counts of loops whose bounds are read
at run time (``reports_trip_counts``: such programs' device time depends on them).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np

from ..arch import Architecture


@dataclass(frozen=True)
class RunReport:
    """What a run found out: for each loop with run-time bounds (by the index of its LoopStart in
    the program) the trip count of each time the loop was entered - timing needs them - and the
    warnings the run kept rather than issued (e.g. uninitialized reads, as text)."""

    trip_counts: Mapping[int, list[int]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()


@runtime_checkable
class Executor(Protocol):
    def run(self, program, buffers: Mapping[str, np.ndarray]) -> RunReport | None: ...


@dataclass(frozen=True, eq=False)
class ExecutorSpec:
    """A registered executor mode: how to make its executor and what it can run. Compared by
    identity: each registration is its own spec."""

    mode: str
    factory: Callable[[Architecture], Executor]
    needs_graph: bool = False  # evaluates ``program.graph``; programs without one run exact
    reports_trip_counts: bool = False  # its RunReport holds the trip counts of run-time loops

    def make(self, arch: Architecture) -> Executor:
        return self.factory(arch)
