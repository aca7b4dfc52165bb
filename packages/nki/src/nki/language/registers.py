"""Virtual registers: 32-bit integers held by the engines' sequencers at run time."""

from __future__ import annotations

from .. import tracing


class VirtualRegister:
    """A run-time integer. ``frozen`` registers (loop counters handed to a body) are read-only."""

    def __init__(self, name: str, frozen: bool = False):
        self.name = name
        self.is_frozen = frozen

    def frozen(self) -> VirtualRegister:
        return VirtualRegister(self.name, True)

    def __repr__(self) -> str:
        return f"VirtualRegister({self.name}{', frozen' if self.is_frozen else ''})"

    def __bool__(self):
        raise tracing.current().error(
            "register.branch",
            f"{self!r} holds a run-time value: Python `if`/`while` cannot branch on it; use nl.while_loop / nl.fori_loop",
        )


def new_register(ctx, base: str) -> VirtualRegister:
    return VirtualRegister(ctx.unique_name(f"r_{base}"))
