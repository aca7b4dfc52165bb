"""Synchronization: explicit semaphores and barriers.

Data dependencies between instructions are found from the memory they touch (the compiler's job on
hardware); these instructions add orderings that memory does not show, e.g. between cores.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError
from .base import ENGINES, Instruction


@dataclass(kw_only=True, eq=False)
class SemaphoreSignal(Instruction):
    """Increment ``semaphore`` by ``value`` once every earlier instruction of this engine is done."""

    opcode = "SEM_SIGNAL"
    engines = ENGINES
    semaphore: str
    value: int = 1

    def _validate(self, arch):
        if self.value <= 0:
            raise ValidationError("semaphore.value", f"semaphore increments must be positive, got {self.value}")


@dataclass(kw_only=True, eq=False)
class SemaphoreWait(Instruction):
    """Block this engine until ``semaphore`` >= ``value``."""

    opcode = "SEM_WAIT"
    engines = ENGINES
    semaphore: str
    value: int = 1

    def _validate(self, arch):
        if self.value <= 0:
            raise ValidationError("semaphore.value", f"semaphore wait values must be positive, got {self.value}")


@dataclass(kw_only=True, eq=False)
class Barrier(Instruction):
    """Every engine (and every outstanding DMA) reaches this point before any continues."""

    opcode = "BARRIER"
    engines = ("sync",)

    def _validate(self, arch):
        pass
