"""The trace context: what a kernel's Python body builds while it runs.

Tracing follows NKI's own compile model: the kernel body runs as ordinary Python (loops unroll,
calls inline, ``print`` prints), and every ``nki.language`` / ``nki.isa`` call appends simulator
instructions to the current context, tagged with the kernel line that made them.
"""

from __future__ import annotations

import ast
import inspect
import os
import sys
import textwrap
from contextlib import contextmanager

from neuron_sim import Architecture, ValidationError
from neuron_sim.isa import Instruction
from neuron_sim.memory.allocator import OnChipAllocator
from neuron_sim.program import TensorDecl

from .errors import NkiError, NkiValidationError, from_sim

_NKI_DIR = os.path.dirname(os.path.abspath(__file__))
_SIM_DIR = os.path.dirname(os.path.abspath(sys.modules["neuron_sim"].__file__))
_SKIP = (_NKI_DIR, _SIM_DIR)


def user_location() -> str | None:
    """``file:line`` of the innermost frame outside nki and neuron_sim (the kernel's line)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not os.path.abspath(path).startswith(_SKIP) and not path.startswith("<frozen"):
            return f"{path}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def user_traceback(tb):
    """``tb`` without its leading frames inside nki / neuron_sim: an exception raised in a kernel
    body (a ZeroDivisionError, a KeyError in a helper) shows the kernel's frames first, not the
    tracer's. Frames after the first kernel frame are kept; a traceback with no kernel frame is
    returned whole."""
    first = tb
    while first is not None and os.path.abspath(first.tb_frame.f_code.co_filename).startswith(_SKIP):
        first = first.tb_next
    return first if first is not None else tb


def function_location(func, returns: bool = False) -> str | None:
    """``file:line`` of a kernel's ``def`` statement - or, with ``returns``, of its return
    statement when it has exactly one. Errors about what a kernel returns or writes are found
    after its frame is gone; this still points them into the kernel."""
    code = getattr(func, "__code__", None)
    if code is None:
        return None
    fallback = f"{code.co_filename}:{code.co_firstlineno}"
    try:
        lines, first = inspect.getsourcelines(func)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return fallback
    node = tree.body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return fallback
    line = node.lineno  # the ``def`` line (decorators are not part of it)
    if returns:
        found = [n.lineno for n in _own_nodes(node) if isinstance(n, ast.Return) and n.value is not None]
        if len(found) == 1:
            line = found[0]
    return f"{code.co_filename}:{first + line - 1}"


def _own_nodes(func_node):
    """The nodes of a function body, not descending into nested functions or classes."""
    stack = list(func_node.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


class TraceContext:
    """State of one kernel trace (one SPMD instance / one physical core)."""

    def __init__(self, arch: Architecture, program_id: tuple[int, ...] = (0,), grid: tuple[int, ...] = (1,)):
        self.arch = arch
        self.program_id = program_id
        self.grid = grid
        self.instructions: list[Instruction] = []
        self.tensors: list[TensorDecl] = []
        self.sbuf = OnChipAllocator("sbuf", arch.sbuf_usable_bytes_per_partition)
        self.psum = OnChipAllocator("psum", arch.psum_bytes_per_partition, bank_bytes=arch.psum_bank_bytes)
        self.hbm_written: set[str] = set()
        self.psum_written: set[tuple] = set()  # (storage id, partition range, byte span) of matmul targets
        self._names: set[str] = set()

    def unique_name(self, base: str) -> str:
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def emit(self, inst: Instruction) -> Instruction:
        """Validate ``inst`` against the hardware rules and append it, tagged with the kernel line."""
        if inst.location is None:
            inst.location = user_location()
        try:
            inst.validate(self.arch)
        except ValidationError as err:
            raise from_sim(err, inst.location) from None
        self.instructions.append(inst)
        for ap in inst.writes():
            if ap.tensor is not None:
                self.hbm_written.add(ap.tensor)
        return inst

    def error(self, rule: str, message: str) -> NkiValidationError:
        return NkiValidationError(rule, message, user_location())


_STACK: list[TraceContext] = []


def current() -> TraceContext:
    if not _STACK:
        raise NkiError(
            "this nki.language / nki.isa call needs a kernel being traced: call it inside a function "
            "decorated with @nki.jit (and invoke that kernel)"
        )
    return _STACK[-1]


def active() -> bool:
    return bool(_STACK)


@contextmanager
def tracing(ctx: TraceContext):
    _STACK.append(ctx)
    try:
        yield ctx
    finally:
        _STACK.pop()
