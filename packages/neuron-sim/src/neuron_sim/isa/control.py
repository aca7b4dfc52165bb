"""Run-time control: 32-bit registers and structured loops.

Registers hold integers read from or written to SBUF; access patterns may add ``register x stride``
to their offset (``AccessPattern.dynamic``). ``LoopStart``/``LoopEnd`` bracket a body that runs
while ``register`` steps from ``lower`` to ``upper`` (either may be a register, read when the loop
starts) - or, for a ``while`` loop, while ``register`` is nonzero. Loops nest. A program with
run-time trip counts has data-dependent timing: the executor reports the counts it ran.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import SBUF, AccessPattern
from .base import ENGINES, Instruction, check_onchip

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
# Register moves run on any engine's sequencer; the default (the first) is the sync engine's, where
# loops run - not TensorE's (ENGINES' first), whose timeline track they would otherwise occupy.
REGISTER_ENGINES = ("sync",) + tuple(e for e in ENGINES if e != "sync")


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _check_register_name(name, role: str) -> None:
    if not isinstance(name, str) or not name:
        raise ValidationError("register.name", f"{role} must be a register name, got {name!r}")


def _check_scalar_tile(ap: AccessPattern, arch, role: str) -> None:
    check_onchip(ap, arch, role, compute=False)
    if ap.memory != SBUF or ap.num_elements != 1 or not dtypes.is_int(ap.dtype) or ap.itemsize > 4:
        raise ValidationError("register.tile", f"{role} must be one 32-bit-or-narrower integer in SBUF, got {ap.describe()}")


@dataclass(kw_only=True, eq=False)
class RegisterSet(Instruction):
    """``register = value`` (an immediate or another register)."""

    opcode = "REG_SET"
    engines = REGISTER_ENGINES
    register: str
    value: int | str = 0

    def _validate(self, arch):
        _check_register_name(self.register, "register")
        if isinstance(self.value, str):
            _check_register_name(self.value, "value")
        # Not int(value): that truncates 1.5 and raises a TypeError/ValueError on None or NaN.
        elif not _is_int(self.value) or not INT32_MIN <= self.value <= INT32_MAX:
            raise ValidationError("register.value", f"registers hold 32-bit integers, got {self.value!r}")


@dataclass(kw_only=True, eq=False)
class RegisterLoad(Instruction):
    """``register = src[0, 0]`` (an integer in SBUF)."""

    opcode = "REG_LOAD"
    engines = REGISTER_ENGINES
    register: str
    src: AccessPattern

    def reads(self):
        return [self.src]

    def _validate(self, arch):
        _check_register_name(self.register, "register")
        _check_scalar_tile(self.src, arch, "src")


@dataclass(kw_only=True, eq=False)
class RegisterStore(Instruction):
    """``dst[0, 0] = register``."""

    opcode = "REG_STORE"
    engines = REGISTER_ENGINES
    dst: AccessPattern
    register: str

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        _check_register_name(self.register, "register")
        _check_scalar_tile(self.dst, arch, "dst")


@dataclass(kw_only=True, eq=False)
class LoopStart(Instruction):
    """Start of a loop body. ``kind="for"``: ``register`` runs ``lower, lower+step, ... < upper``;
    ``kind="while"``: the body repeats while ``register`` is nonzero (checked before each pass)."""

    opcode = "LOOP_START"
    engines = ("sync",)
    register: str
    kind: str = "for"
    lower: int | str = 0
    upper: int | str = 0
    step: int = 1

    def _validate(self, arch):
        _check_register_name(self.register, "register")
        if self.kind not in ("for", "while"):
            raise ValidationError("loop.kind", f"loop kind must be 'for' or 'while', got {self.kind!r}")
        if self.kind == "for":
            if not _is_int(self.step) or self.step <= 0:
                raise ValidationError("loop.step", f"a loop step is a positive compile-time integer, got {self.step!r}")
            for bound, role in ((self.lower, "lower"), (self.upper, "upper")):
                if isinstance(bound, str):
                    _check_register_name(bound, role)
                # The counter is a 32-bit register: a bound outside int32 (or a bool/float) is a bug.
                elif not _is_int(bound) or not INT32_MIN <= bound <= INT32_MAX:
                    raise ValidationError("loop.bound", f"loop {role} bound must be a 32-bit int or a register, got {bound!r}")

    def static_trip_count(self) -> int | None:
        if self.kind != "for" or isinstance(self.lower, str) or isinstance(self.upper, str):
            return None
        return max(0, -(-(self.upper - self.lower) // self.step))


@dataclass(kw_only=True, eq=False)
class LoopEnd(Instruction):
    """End of the innermost open loop body (``register`` names the loop, for checking)."""

    opcode = "LOOP_END"
    engines = ("sync",)
    register: str

    def _validate(self, arch):
        _check_register_name(self.register, "register")


def loop_structure(instructions) -> dict[int, int]:
    """Map each LoopStart index to its LoopEnd index and back; raise on unbalanced loops."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, inst in enumerate(instructions):
        if isinstance(inst, LoopStart):
            stack.append(i)
        elif isinstance(inst, LoopEnd):
            if not stack:
                raise ValidationError("loop.unbalanced", f"LOOP_END for {inst.register!r} has no open loop", inst.location)
            start = stack.pop()
            if instructions[start].register != inst.register:
                raise ValidationError(
                    "loop.unbalanced",
                    f"LOOP_END for {inst.register!r} closes the loop on {instructions[start].register!r}",
                    inst.location,
                )
            pairs[start], pairs[i] = i, start
    if stack:
        inst = instructions[stack[-1]]
        raise ValidationError("loop.unbalanced", f"loop on {inst.register!r} is never closed", inst.location)
    return pairs
