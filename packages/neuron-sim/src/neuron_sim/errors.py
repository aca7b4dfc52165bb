"""Every error neuron-sim raises derives from NeuronSimError, so callers can catch the family."""

from __future__ import annotations


class NeuronSimError(Exception):
    """Base class of all simulator errors."""


class ConfigurationError(NeuronSimError, ValueError):
    """An environment variable or option has a value the simulator cannot use."""


class ValidationError(NeuronSimError, ValueError):
    """An instruction or access pattern breaks a hardware rule.

    ``rule`` is a short stable identifier (for tests and docs), ``location`` the source line that
    produced the instruction when known (``file:line``).
    """

    def __init__(self, rule: str, message: str, location: str | None = None):
        self.rule = rule
        self.detail = message
        self.location = location
        where = f" (at {location})" if location else ""
        super().__init__(f"[{rule}] {message}{where}")

    def at(self, location: str | None) -> ValidationError:
        """The same error, attributed to ``location`` unless it already has one."""
        if location is None or self.location is not None:
            return self
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)  # a subclass's own fields (an index error's index and size)
        ValidationError.__init__(err, self.rule, self.detail, location)
        return err


class AccessPatternError(ValidationError):
    """An access pattern is malformed or reaches outside its memory."""


class IndexOutOfBoundsError(AccessPatternError, IndexError):
    """An index operand (a gather's, a scatter's, an indirect DMA's) names a row or element
    outside its tensor. Also an IndexError, as frameworks report bad indices. ``index`` is the
    first bad index found, ``size`` the extent it indexes into, so a framework can report the
    error in its own words (a launch's ``errors=``)."""

    def __init__(self, rule: str, message: str, location: str | None = None, *,
                 index: int | None = None, size: int | None = None):
        self.index = index
        self.size = size
        super().__init__(rule, message, location)


class OutOfMemoryError(NeuronSimError, MemoryError):
    """The simulated HBM of a NeuronCore cannot hold the requested allocation."""

    def __init__(self, requested: int, free: int, capacity: int, device: str = "HBM"):
        self.requested = requested
        self.free = free
        self.capacity = capacity
        super().__init__(
            f"out of memory on {device}: tried to allocate {_fmt_bytes(requested)} "
            f"with {_fmt_bytes(free)} free of {_fmt_bytes(capacity)}"
        )


class NeffFormatError(NeuronSimError, ValueError):
    """A NEFF file is corrupt, truncated, of another format, or of an unsupported version."""


class ExecutionError(NeuronSimError, RuntimeError):
    """A launched program failed; raised at the next synchronization point with the launch's context."""


class InvalidMemoryError(ExecutionError):
    """Device memory holds no valid data: the work that should have written it failed or was
    skipped. ``original`` is the error that started it."""


class UninitializedReadError(ValidationError):
    """An instruction read on-chip memory that no earlier instruction wrote."""


def _fmt_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n} B"
