"""A logical NeuronCore's executors: one per mode (and options), one launch at a time.

The executors' on-chip state (SBUF, PSUM, the fast executor's pool) is shared by every queue of
the core, so launches run one after another in host time (a lock). A launch is one program, or
one per physical core of an LNC=2 core (an NKI ``kernel[2]``): those share HBM - the launch's
internal tensors too - and run in program order on the host; on the simulated timeline they run
at once (``Queue.launch``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import numpy as np

from ..executor import ExecutorSpec, RunReport, registry
from ..memory import Hbm
from ..program import PerProgram
from .timing_cache import has_runtime_trip_counts

_NO_REPORT = RunReport()
_internal = PerProgram()  # program -> ((name, nbytes), ...) of its internal tensors


def _internal_tensors(program) -> tuple:
    return _internal.get(program, lambda: tuple((t.name, t.nbytes) for t in program.tensors if t.kind == "internal"))


class Core:
    def __init__(self, arch, hbm: Hbm, mode: str):
        self.arch = arch
        self.hbm = hbm
        self.mode = mode  # the device's default executor mode (NEURON_SIM_MODE)
        self._run_lock = threading.Lock()  # one launch at a time on the executors
        self._made_lock = threading.Lock()
        self._executors: dict = {}  # spec, or (spec, options) -> executor

    def resolve(self, mode: str | None, programs: Sequence) -> ExecutorSpec:
        """The executor that runs the launch of ``programs`` when ``mode`` (None: the device's) is
        asked for: one that can run every program (else exact, which runs any)."""
        mode = mode or self.mode
        spec = None
        for program in programs:
            each = registry.resolve(mode, program, needs_trip_counts=has_runtime_trip_counts(program))
            if spec is not None and each is not spec:
                return registry.spec(registry.FALLBACK_MODE)
            spec = each
        return spec

    def executor(self, spec: ExecutorSpec, options: Mapping | None = None):
        """The core's executor for ``spec`` with ``options`` (made on first use; bad options raise here)."""
        key = spec if not options else (spec, tuple(sorted(options.items())))
        executor = self._executors.get(key)
        if executor is None:
            with self._made_lock:
                executor = self._executors.get(key)
                if executor is None:
                    try:
                        executor = spec.factory(self.arch, **(options or {}))
                    except TypeError as err:
                        raise ValueError(f"executor {spec.mode!r} does not take options {dict(options or {})}: {err}") from None
                    self._executors[key] = executor
        return executor

    def run(self, programs: Sequence, buffers: Mapping[str, np.ndarray], spec: ExecutorSpec,
            options: Mapping | None = None) -> tuple[RunReport, ...]:
        """Run ``programs`` (one launch) over ``buffers`` on ``spec``'s executor; returns each
        program's report."""
        scratch = []
        try:
            internal = _internal_tensors(programs[0]) if len(programs) == 1 else _shared_internal(programs)
            if internal:
                buffers = dict(buffers)
                # A graph-form executor never reads internal tensors: they only hold the launch's
                # HBM (as on the device), without the poison fill (a backward graph's took 30 ms a step).
                for name, nbytes in internal:
                    if name not in buffers:
                        block = self.hbm.allocate(nbytes, tag=f"{programs[0].name}/{name} (internal)", poison=not spec.needs_graph)
                        scratch.append(block)
                        buffers[name] = block.array
            executor = self.executor(spec, options)
            with self._run_lock:
                if len(programs) == 1:
                    return (executor.run(programs[0], buffers) or _NO_REPORT,)
                return tuple(executor.run(p, buffers) or _NO_REPORT for p in programs)
        finally:
            for block in scratch:
                self.hbm.free(block)


def _shared_internal(programs: Sequence) -> tuple:
    """The internal tensors of programs sharing HBM: one buffer per name, of the largest size."""
    sizes: dict[str, int] = {}
    for program in programs:
        for name, nbytes in _internal_tensors(program):
            sizes[name] = max(sizes.get(name, 0), nbytes)
    return tuple(sizes.items())
