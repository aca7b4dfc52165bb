"""What one unit (a test or a script) came to, and how an exception is classified."""

from __future__ import annotations

import os
import traceback
from dataclasses import asdict, dataclass, field

from neuron_sim.errors import ExecutionError, ValidationError

OK, WRONG, REJECTED, CRASH, TIMEOUT, SKIPPED, NO_CHECK = "ok", "wrong", "rejected", "crash", "timeout", "skipped", "no-check"
STATUSES = (OK, WRONG, REJECTED, CRASH, TIMEOUT, SKIPPED, NO_CHECK)


@dataclass
class Outcome:
    file: str  # relative to the path it was found under
    unit: str  # the pytest node name, or "<script>"
    status: str
    detail: str = ""  # rule and line, exception and line, skip reason, ...
    device_ns: float = 0.0  # simulated device time of the NKI launches the unit made
    wall_s: float = 0.0
    launches: int = 0
    kernels: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


class UnitTimeout(BaseException):
    """Raised in a unit that ran past its time limit (a BaseException: a unit's ``except
    Exception`` must not swallow it)."""


def classify(err: BaseException, root: str) -> tuple[str, str]:
    """(status, detail) of a unit that raised ``err``; ``root`` is where its own code lives."""
    timeout = next((e for e in _chain(err) if isinstance(e, UnitTimeout)), None)  # also inside a failed launch
    if timeout is not None:
        return TIMEOUT, str(timeout)
    rule_error = next((e for e in _chain(err) if isinstance(e, ValidationError)), None)
    if rule_error is not None:
        return REJECTED, f"[{rule_error.rule}] {rule_error.detail}" + (f" at {_short(rule_error.location, root)}"
                                                                         if rule_error.location else "")
    if isinstance(err, AssertionError):
        return WRONG, _one_line(err) + _where(err, root)
    return CRASH, f"{type(err).__name__}: {_one_line(err)}{_where(err, root)}"


def _chain(err: BaseException):
    """``err`` and what is behind it: the simulator's error of a failed launch
    (``ExecutionError.original``), or the cause a test harness wrapped (``raise X from err``)."""
    seen = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        original = getattr(err, "original", None) if isinstance(err, ExecutionError) else None
        err = original if isinstance(original, BaseException) else (err.__cause__ or err.__context__)


def _one_line(err: BaseException, limit: int = 300) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _where(err: BaseException, root: str) -> str:
    """`` at file:line`` of the innermost traceback frame in the unit's own files."""
    frames = [f for f in traceback.extract_tb(err.__traceback__) if _inside(f.filename, root)]
    return f" at {_short(f'{frames[-1].filename}:{frames[-1].lineno}', root)}" if frames else ""


def _inside(path: str, root: str) -> bool:
    return os.path.abspath(path).startswith(os.path.abspath(root) + os.sep)


def _short(location: str, root: str) -> str:
    path, sep, line = location.rpartition(":")
    if sep and _inside(path, root):
        return f"{os.path.relpath(path, root)}:{line}"
    return location
