"""Virtual registers: 32-bit integers held by the engines' sequencers at run time."""

from __future__ import annotations

from . import tracing


class VirtualRegister:
    """A run-time integer. ``frozen`` registers (loop counters handed to a body) are read-only."""

    def __init__(self, name: str, frozen: bool = False):
        self.name = name
        self.is_frozen = frozen

    def frozen(self) -> VirtualRegister:
        return VirtualRegister(self.name, True)

    def __repr__(self) -> str:
        return f"VirtualRegister({self.name}{', frozen' if self.is_frozen else ''})"

    def _runtime_value(self, use: str):
        return tracing.current().error(
            "register.branch",
            f"{self!r} holds a run-time value: Python {use} cannot use it at trace time; "
            "use nl.while_loop / nl.fori_loop (a register can bound a loop or offset a view)",
        )

    def __bool__(self):
        raise self._runtime_value("`if`/`while`")

    # Fix: range(r), int(r) and r < 3 used to fail with a bare TypeError from Python.
    def __index__(self):
        raise self._runtime_value("range()/int()/indexing")

    __int__ = __index__

    def __lt__(self, other):
        raise self._runtime_value("comparisons")

    __le__ = __gt__ = __ge__ = __lt__


def new_register(ctx, base: str) -> VirtualRegister:
    return VirtualRegister(ctx.unique_name(f"r_{base}"))
