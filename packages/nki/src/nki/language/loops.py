"""Loops. Python loops and the range helpers unroll at trace time (NKI's specialization stage);
``fori_loop`` and ``while_loop`` are run-time loops: their body is traced once and runs as often
as the bounds (or the condition register) say when the kernel executes."""

from __future__ import annotations

from contextlib import contextmanager

from neuron_sim.isa import LoopEnd, LoopStart, RegisterSet

from .. import tracing
from ..registers import VirtualRegister, new_register


def affine_range(start, stop=None, step=1):
    """Iterations without loop-carried dependencies (unrolled; independent iterations overlap)."""
    return range(start, stop, step) if stop is not None else range(start)


def sequential_range(start, stop=None, step=1):
    """Iterations that depend on each other (unrolled in program order)."""
    return range(start, stop, step) if stop is not None else range(start)


def static_range(start, stop=None, step=1):
    """Fully unrolled at trace time."""
    return range(start, stop, step) if stop is not None else range(start)


@contextmanager
def no_reorder():
    """Program order is already each engine's schedule here; kept for compatibility."""
    yield


def _bound(value, role: str):
    if isinstance(value, VirtualRegister):
        return value.name
    if isinstance(value, bool) or not isinstance(value, int):
        raise tracing.current().error("loop.bound", f"fori_loop {role} must be an int or a register, got {value!r}")
    return value


def fori_loop(lower, upper, body_fun, step: int = 1) -> None:
    """Run ``body_fun(i)`` for ``i`` in ``range(lower, upper, step)`` at run time; ``i`` is a
    register (use it as ``t.ap(..., scalar_offset=i)``). Bounds may be registers."""
    ctx = tracing.current()
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ctx.error("loop.step", f"fori_loop step must be a positive compile-time int, got {step!r}")
    counter = new_register(ctx, "i")
    ctx.emit(LoopStart(register=counter.name, lower=_bound(lower, "lower"), upper=_bound(upper, "upper"), step=step))
    body_fun(counter.frozen())
    ctx.emit(LoopEnd(register=counter.name))


def while_loop(init: VirtualRegister, body_fun) -> VirtualRegister:
    """Run ``cond = body_fun(cond)`` while ``cond`` is nonzero (checked before each pass)."""
    ctx = tracing.current()
    if not isinstance(init, VirtualRegister):
        raise ctx.error("loop.condition", f"while_loop starts from a register, got {init!r}")
    cond = new_register(ctx, "cond")
    ctx.emit(RegisterSet(register=cond.name, value=init.name))
    ctx.emit(LoopStart(register=cond.name, kind="while"))
    nxt = body_fun(cond.frozen())
    if not isinstance(nxt, VirtualRegister):
        raise ctx.error("loop.condition", f"a while_loop body returns the next condition register, got {nxt!r}")
    ctx.emit(RegisterSet(register=cond.name, value=nxt.name))
    ctx.emit(LoopEnd(register=cond.name))
    return cond


def dynamic_range(start, stop=None, step: int = 1):
    """A run-time loop written as a Python ``for`` (deprecated in NKI 0.6 for ``nl.fori_loop``):
    ``for i in nl.dynamic_range(n_reg): body(i)`` traces the body once and runs it as often as the
    bounds (ints or registers) say; ``i`` is a frozen register."""
    if stop is None:
        start, stop = 0, start
    ctx = tracing.current()
    if isinstance(step, bool) or not isinstance(step, int) or step <= 0:
        raise ctx.error("loop.step", f"dynamic_range step must be a positive compile-time int, got {step!r}")
    counter = new_register(ctx, "i")
    ctx.emit(LoopStart(register=counter.name, lower=_bound(start, "lower"), upper=_bound(stop, "upper"), step=step))
    yield counter.frozen()
    ctx.emit(LoopEnd(register=counter.name))
