"""The instruction base class, the opcode registry, and the checks instructions share.

An instruction is plain data: its operands (access patterns and immediates), the engine that runs
it, and the source line that produced it. Semantics live in ``executor``, costs in ``timing``;
``validate`` checks the hardware rules so that both can assume well-formed operands.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

from .. import dtypes
from ..arch import Architecture
from ..errors import ValidationError
from ..memory.access_pattern import HBM, PSUM, SBUF, AccessPattern

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")

# Which memories each engine's ports reach (trainium2_arch.rst, "engine/memory connectivity").
ENGINE_READS = {
    "tensor": (SBUF,),
    "vector": (SBUF, PSUM),
    "scalar": (SBUF, PSUM),
    "gpsimd": (SBUF,),
}
ENGINE_WRITES = {
    "tensor": (PSUM,),
    "vector": (SBUF, PSUM),
    "scalar": (SBUF, PSUM),
    "gpsimd": (SBUF,),
}

OPCODES: dict[str, type[Instruction]] = {}


@dataclass(kw_only=True, eq=False)
class Instruction:
    opcode: ClassVar[str] = ""
    engines: ClassVar[tuple[str, ...]] = ()  # engines allowed to run it; first is the default

    engine: str = ""
    name: str | None = None
    location: str | None = None  # "file:line" of the source statement that produced it

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.opcode:
            OPCODES[cls.opcode] = cls

    def __post_init__(self):
        if not self.engine:
            self.engine = self.engines[0]

    # --- operands --------------------------------------------------------------------------
    def reads(self) -> list[AccessPattern]:
        return []

    def writes(self) -> list[AccessPattern]:
        return []

    # --- validation ------------------------------------------------------------------------
    def validate(self, arch: Architecture) -> None:
        """Raise ValidationError (with this instruction's location) if a hardware rule is broken."""
        try:
            if self.engine not in self.engines:
                raise ValidationError(
                    "engine.unsupported",
                    f"{self.opcode} cannot run on the {self.engine} engine; it runs on {list(self.engines)}",
                )
            self._validate(arch)
        except ValidationError as err:
            raise err.at(self.location) from None

    def _validate(self, arch: Architecture) -> None:
        raise NotImplementedError

    # --- serialization ---------------------------------------------------------------------
    # The opcode is stored under "opcode": several instructions have a field named ``op`` (the ALU
    # op), which used to overwrite an "op" opcode key and made them unreadable.
    def to_dict(self) -> dict:
        d = {"opcode": self.opcode}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name == "engine" and value == self.engines[0]):
                continue
            d[f.name] = _encode(value)
        return d

    @staticmethod
    def from_dict(d: dict) -> Instruction:
        key = "opcode" if "opcode" in d else "op"  # "op": the layout written before the rename
        cls = OPCODES.get(d.get(key))
        if cls is None:
            raise ValidationError("isa.unknown_opcode", f"unknown opcode {d.get(key)!r}")
        kwargs = {k: _decode(v) for k, v in d.items() if k != key}
        return cls(**kwargs)

    def describe(self) -> str:
        """One line in the profiler's ``opcode operands`` style."""
        parts = []
        for f in dataclasses.fields(self):
            if f.name in ("engine", "name", "location"):
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            parts.append(f"{f.name}={value.describe() if isinstance(value, AccessPattern) else value}")
        return f"{self.opcode} " + " ".join(parts)


def _encode(value):
    if isinstance(value, AccessPattern):
        return {"ap": value.to_dict()}
    if isinstance(value, tuple):
        return {"tuple": [_encode(v) for v in value]}
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return {"float": repr(value)}
    return value


def _decode(value):
    if isinstance(value, dict):
        if "ap" in value:
            return AccessPattern.from_dict(value["ap"])
        if "tuple" in value:
            return tuple(_decode(v) for v in value["tuple"])
        if "float" in value:
            return float(value["float"])
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


# --- shared checks ---------------------------------------------------------------------------


def check_memory(ap: AccessPattern, engine: str, role: str, writing: bool) -> None:
    allowed = (ENGINE_WRITES if writing else ENGINE_READS)[engine]
    if ap.memory not in allowed:
        verb = "write" if writing else "read"
        raise ValidationError(
            "engine.memory_access",
            f"the {engine} engine cannot {verb} {ap.memory.upper()} ({role} is {ap.describe()}); "
            f"it can {verb} {', '.join(m.upper() for m in allowed)}",
        )


def check_onchip(ap: AccessPattern, arch: Architecture, role: str, compute: bool = True) -> None:
    """Bounds, partition-start and dtype rules for an on-chip operand."""
    if ap.memory == HBM:
        raise ValidationError("engine.memory_access", f"{role} must be on chip (SBUF/PSUM), got {ap.describe()}")
    size = arch.sbuf_bytes_per_partition if ap.memory == SBUF else arch.psum_bytes_per_partition
    ap.check_bounds(arch.num_partitions, size, role)
    if ap.dtype in dtypes.HBM_ONLY:
        raise ValidationError(
            "dtype.unsupported_on_chip", f"{role}: {ap.dtype} is not a NeuronCore engine dtype ({ap.describe()})"
        )
    if compute:
        check_partition_start(ap, arch, role)
        check_pattern_limits(ap, role)


def check_operand(ap: AccessPattern, arch: Architecture, engine: str, role: str, writing: bool) -> None:
    """An on-chip operand of a compute instruction that ``engine`` can read (or write)."""
    check_onchip(ap, arch, role)
    check_memory(ap, engine, role, writing=writing)


# A compute engine's access pattern encodes each free dimension as [stride: int16, count: uint16]
# in elements (trainium2_arch.rst, "access patterns"). DMA descriptors are not limited this way.
STRIDE_RANGE = (-(1 << 15), (1 << 15) - 1)
MAX_COUNT = (1 << 16) - 1


def check_pattern_limits(ap: AccessPattern, role: str) -> None:
    for stride, count in ap.free:
        if count > MAX_COUNT or not STRIDE_RANGE[0] <= stride <= STRIDE_RANGE[1]:
            raise ValidationError(
                "ap.pattern_limits",
                f"{role}: free dimension [stride {stride}, count {count}] of {ap.describe()} does not fit an engine "
                f"access pattern (stride in [{STRIDE_RANGE[0]}, {STRIDE_RANGE[1]}] elements, count <= {MAX_COUNT}); "
                "split the instruction or reshape the tile",
            )


def check_partition_start(ap: AccessPattern, arch: Architecture, role: str) -> None:
    """Compute engines address partitions from a quadrant boundary (trainium2_arch.rst)."""
    q = arch.quadrant
    start, count = ap.partition_start, ap.partition_count
    if count > 2 * q:
        ok = start == 0
        allowed = "0"
    elif count > q:
        ok = start in (0, 2 * q)
        allowed = f"0 or {2 * q}"
    else:
        ok = start % q == 0 and start + count <= (start // q + 1) * q
        allowed = f"a multiple of {q} (within one quadrant)"
    if not ok:
        raise ValidationError(
            "partition.start",
            f"{role}: an access of {count} partitions must start at partition {allowed}, got {start}",
        )


def check_same_partitions(a: AccessPattern, b: AccessPattern, role_a: str, role_b: str) -> None:
    if a.partition_count != b.partition_count:
        raise ValidationError(
            "shape.partition_mismatch",
            f"{role_a} spans {a.partition_count} partitions but {role_b} spans {b.partition_count}",
        )


def check_same_free_size(a: AccessPattern, b: AccessPattern, role_a: str, role_b: str) -> None:
    if a.free_size != b.free_size:
        raise ValidationError(
            "shape.free_mismatch",
            f"{role_a} has {a.free_size} elements per partition ({list(a.shape)}) but {role_b} has "
            f"{b.free_size} ({list(b.shape)})",
        )


def check_scalar_operand(operand, data: AccessPattern, arch: Architecture, role: str, engine: str) -> None:
    """A per-partition operand is an immediate or a [P, 1] tile on chip."""
    if operand is None or isinstance(operand, (int, float)):
        return
    if not isinstance(operand, AccessPattern):
        raise ValidationError("operand.type", f"{role} must be a number or a [P, 1] tile, got {type(operand).__name__}")
    check_onchip(operand, arch, role)
    check_memory(operand, engine, role, writing=False)
    if operand.free_size != 1:
        raise ValidationError("operand.shape", f"{role} must have one element per partition, got shape {list(operand.shape)}")
    check_same_partitions(operand, data, role, "data")
