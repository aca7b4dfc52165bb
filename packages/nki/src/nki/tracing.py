"""The trace context: what a kernel's Python body builds while it runs.

Tracing follows NKI's own compile model: the kernel body runs as ordinary Python (loops unroll,
calls inline, ``print`` prints), and every ``nki.language`` / ``nki.isa`` call appends simulator
instructions to the current context, tagged with the kernel line that made them. The context is
a neuron-sim ``ProgramBuilder`` (as Triton's interpreter implements the compiler's builder): the
builder checks each instruction once, as it is emitted, and the tracer adds what NKI needs on
top - kernel lines as locations, NKI's error type, the launch grid, which HBM tensors were written.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from contextlib import contextmanager

from neuron_sim import Architecture, ProgramBuilder, ValidationError
from neuron_sim.builder import in_packages
from neuron_sim.isa import Instruction

from .errors import NkiError, NkiValidationError, from_sim

# Code of these packages is never "the kernel's line". Judged by module name (not by directory:
# a user package ``nki_kernels/`` beside ``nki/`` shares its path prefix).
LIBRARY_PACKAGES = ("nki", "neuronxcc.nki", "neuron_sim")


def _library_frame(frame) -> bool:
    module = frame.f_globals.get("__name__") or ""
    return (in_packages(frame, LIBRARY_PACKAGES) or module.partition(".")[0] in sys.stdlib_module_names
            or frame.f_code.co_filename.startswith("<frozen"))


def user_location(kernel_code=None) -> str | None:
    """``file:line`` of the kernel line being traced: the innermost frame that is neither nki nor
    neuron-sim nor the standard library (``with nl.no_reorder():`` runs contextlib), searching no
    further out than the kernel's own frame (``kernel_code``, its code object): beyond it is the
    kernel's caller, whose line is never the location of something the kernel did."""
    frame = sys._getframe(1)
    if kernel_code is None and _STACK:
        kernel_code = _STACK[-1].kernel_code
    while frame is not None:
        if frame.f_code is kernel_code or not _library_frame(frame):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return None


def user_traceback(tb):
    """``tb`` without its leading frames inside nki / neuron_sim: an exception raised in a kernel
    body (a ZeroDivisionError, a KeyError in a helper) shows the kernel's frames first, not the
    tracer's. Frames after the first kernel frame are kept; a traceback with no kernel frame is
    returned whole."""
    first = tb
    while first is not None and in_packages(first.tb_frame, LIBRARY_PACKAGES):
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


class TraceContext(ProgramBuilder):
    """The builder of one kernel trace (one SPMD instance / one physical core)."""

    def __init__(self, arch: Architecture, name: str = "kernel", kernel_code=None, program_id: tuple[int, ...] = (0,),
                 grid: tuple[int, ...] = (1,)):
        super().__init__(name, arch)
        self.kernel_code = kernel_code  # the kernel function's code object: locations stop at its frame
        self.program_id = program_id
        self.grid = grid
        self.hbm_written: set[str] = set()
        self.prints: list[tuple[str, str]] = []  # nl.device_print calls: (prefix, HBM tensor holding the values)
        self.constants: dict = {}  # nl.shared_constant: HBM tensor name -> its values (numpy), bound at each launch
        self._names: set[str] = set()
        self._masked_off = 0  # > 0 inside a call whose constant mask keeps no element: nothing is emitted

    def unique_name(self, base: str) -> str:
        name, n = base, 0
        while name in self._names:
            n += 1
            name = f"{base}_{n}"
        self._names.add(name)
        return name

    def location(self) -> str | None:
        return user_location(self.kernel_code)

    def emit(self, inst: Instruction) -> Instruction:
        """Check ``inst`` against the hardware rules and append it, tagged with the kernel line."""
        if self._masked_off:
            return inst
        try:
            super().emit(inst)
        except ValidationError as err:
            raise from_sim(err, inst.location) from None
        for ap in inst.writes():
            if ap.tensor is not None:
                self.hbm_written.add(ap.tensor)
        return inst

    @contextmanager
    def masked_off(self):
        """Drop the instructions emitted inside: a call whose mask is constant False."""
        self._masked_off += 1
        try:
            yield
        finally:
            self._masked_off -= 1

    def error(self, rule: str, message: str) -> NkiValidationError:
        return NkiValidationError(rule, message, self.location())


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
