"""Facts about a program that every launch needs, computed once per program object: its tensor
table and whether its loops have run-time trip counts. (Its device time is
``neuron_sim.timing.program_timing``, kept the same way.) Programs must not be mutated after
their first launch.
"""

from __future__ import annotations

from ..isa.control import LoopStart
from ..program import PerProgram

_tables = PerProgram()  # program -> TensorTable


class TensorTable:
    """A program's tensors as launches check them: name -> (kind, nbytes, shape, dtype), and the
    names a launch must bind."""

    __slots__ = ("decls", "required", "runtime_trip_counts")

    def __init__(self, program):
        self.decls = {t.name: (t.kind, t.nbytes, t.shape, t.dtype) for t in program.tensors}
        self.required = tuple(t.name for t in program.tensors if t.kind != "internal")
        self.runtime_trip_counts = any(isinstance(i, LoopStart) and i.static_trip_count() is None for i in program.instructions)


def tensor_table(program) -> TensorTable:
    return _tables.get(program, lambda: TensorTable(program))


def has_runtime_trip_counts(program) -> bool:
    """Whether some loop of ``program`` runs a number of times known only at run time."""
    return tensor_table(program).runtime_trip_counts
