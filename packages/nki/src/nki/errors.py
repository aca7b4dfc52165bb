"""Errors NKI raises. Hardware-rule violations carry the kernel's source line.

``NkiValidationError`` is a ``neuron_sim.ValidationError`` (same ``rule`` ids, documented in the
simulator), so ``except neuron_sim.NeuronSimError`` catches it too.
"""

from __future__ import annotations

import linecache

from neuron_sim import ValidationError


class NkiError(Exception):
    """Misuse of the NKI API outside hardware rules (e.g. calling nl.* outside a kernel)."""


class NkiValidationError(ValidationError):
    """A kernel breaks a hardware rule. The message names the rule, the value and the kernel line."""

    def __init__(self, rule: str, message: str, location: str | None = None):
        super().__init__(rule, message, location)
        code = source_line(location)
        if code:
            self.args = (f"{self.args[0]}\n    {code}",)


def source_line(location: str | None) -> str:
    """The source text of ``file:line``, or '' when unavailable."""
    if not location or ":" not in location:
        return ""
    path, _, line = location.rpartition(":")
    try:
        return linecache.getline(path, int(line)).strip()
    except ValueError:
        return ""


def from_sim(err: ValidationError, location: str | None) -> NkiValidationError:
    """Re-raise a simulator validation error as an NKI error attributed to the kernel line."""
    return NkiValidationError(err.rule, err.detail, err.location or location)
