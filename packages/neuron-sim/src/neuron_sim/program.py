"""A program: the tensor table (its HBM interface) plus an instruction list for one NeuronCore.

Programs are what compilers and the NKI tracer produce and what a NEFF stores. ``validate`` checks
every instruction against an architecture and every HBM access against the tensor table.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass, field

from . import dtypes
from .arch import Architecture
from .errors import ValidationError
from .isa import Instruction, loop_structure
from .memory.access_pattern import HBM

TENSOR_KINDS = ("input", "output", "inout", "internal")


@dataclass(frozen=True)
class TensorDecl:
    """An HBM tensor of the program. ``input``/``output``/``inout`` are bound by the caller at
    launch; ``internal`` tensors are scratch space the runtime allocates per launch."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    kind: str = "input"

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        object.__setattr__(self, "dtype", dtypes.dtype_name(self.dtype))
        if self.kind not in TENSOR_KINDS:
            raise ValidationError("program.tensor_kind", f"tensor {self.name!r}: kind must be one of {TENSOR_KINDS}, got {self.kind!r}")
        if any(s < 0 for s in self.shape):
            raise ValidationError("program.tensor_shape", f"tensor {self.name!r} has a negative dimension: {self.shape}")

    @property
    def num_elements(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.num_elements * dtypes.itemsize(self.dtype)

    @property
    def is_input(self) -> bool:
        return self.kind in ("input", "inout")

    @property
    def is_output(self) -> bool:
        return self.kind in ("output", "inout")

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "kind": self.kind}

    @classmethod
    def from_dict(cls, d: dict) -> TensorDecl:
        return cls(d["name"], tuple(d["shape"]), d["dtype"], d.get("kind", "input"))


@dataclass
class Program:
    name: str
    tensors: list[TensorDecl]
    instructions: list[Instruction]
    target: str = "trn2"
    # A graph-level form of the same computation for the fast executor (whole-tensor ops); optional.
    # A ``neuron_sim.graph.Graph`` as a compiler made it (serialized only when a NEFF is written),
    # or its dict form as read from a NEFF (parsed once, by ``graph_of``).
    graph: object = None
    metadata: dict = field(default_factory=dict)

    def tensor(self, name: str) -> TensorDecl:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(f"program {self.name!r} has no tensor {name!r}; it has {[t.name for t in self.tensors]}")

    @property
    def inputs(self) -> list[TensorDecl]:
        return [t for t in self.tensors if t.is_input]

    @property
    def outputs(self) -> list[TensorDecl]:
        return [t for t in self.tensors if t.is_output]

    def validate(self, arch: Architecture) -> None:
        """Check everything: each instruction against ``arch`` and the tensor table, then the
        program as a whole. For programs from outside (a loaded NEFF); a ProgramBuilder checks
        each instruction as it is emitted and only the whole at ``build``."""
        for inst in self.instructions:
            if not isinstance(inst, Instruction):
                raise ValidationError("program.not_an_instruction", f"program holds a {type(inst).__name__}, not an instruction")
        self.validate_structure()
        sizes = self._tensor_sizes()
        for inst in self.instructions:
            inst.validate(arch)
            check_hbm_accesses(inst, sizes)

    def validate_structure(self) -> None:
        """The checks that need the whole program, not one instruction: unique tensor names,
        balanced loops, and no writes to tensors declared ``input`` (kinds may be settled only
        once the program is complete, as NKI does for arguments a kernel writes)."""
        self._tensor_sizes()
        loop_structure(self.instructions)  # balanced, properly nested loops
        kinds = {t.name: t.kind for t in self.tensors}
        for inst in self.instructions:
            for ap in inst.writes():
                if ap.memory == HBM and kinds.get(ap.tensor) == "input":
                    raise ValidationError(
                        "program.write_to_input",
                        f"{inst.opcode} writes input tensor {ap.tensor!r}; declare it 'inout' to update it in place",
                        inst.location,
                    )

    def _tensor_sizes(self) -> dict[str, int]:
        names = [t.name for t in self.tensors]
        if len(set(names)) != len(names):
            dup = sorted({n for n in names if names.count(n) > 1})
            raise ValidationError("program.duplicate_tensor", f"tensor names must be unique, repeated: {dup}")
        return {t.name: t.nbytes for t in self.tensors}

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "target": self.target,
            "tensors": [t.to_dict() for t in self.tensors],
            "instructions": [i.to_dict() for i in self.instructions],
            "graph": self.graph.to_dict() if hasattr(self.graph, "to_dict") else self.graph,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Program:
        return cls(
            name=d["name"],
            target=d.get("target", "trn2"),
            tensors=[TensorDecl.from_dict(t) for t in d["tensors"]],
            instructions=[Instruction.from_dict(i) for i in d["instructions"]],
            graph=d.get("graph"),
            metadata=d.get("metadata") or {},
        )


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


def check_hbm_accesses(inst: Instruction, sizes: dict[str, int]) -> None:
    """Every HBM access of ``inst`` names a tensor of the table (``sizes``: name -> bytes) and
    stays inside it."""
    for ap in inst.reads() + inst.writes():
        if ap.memory != HBM:
            continue
        if ap.tensor not in sizes:
            raise ValidationError("program.unknown_tensor", f"{inst.opcode} accesses unknown HBM tensor {ap.tensor!r}", inst.location)
        try:
            ap.check_tensor_bounds(sizes[ap.tensor], inst.opcode)
        except ValidationError as err:
            raise err.at(inst.location) from None
