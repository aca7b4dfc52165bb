"""Register instructions: allocate, move, load from and store to SBUF."""

from __future__ import annotations

import numbers

from neuron_sim.isa import RegisterLoad, RegisterSet, RegisterStore

from .. import tracing
from ..registers import VirtualRegister, new_register
from ..tensor import NkiTensor


def _immediate(ctx, value) -> int:
    # Fix: int(value) used to truncate 2.7 to 2 silently.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ctx.error("register.value", f"a register holds an integer, got {value!r}")
    return int(value)


def _tensor(ctx, t, role: str) -> NkiTensor:
    # Fix: a non-tensor used to fail with an AttributeError from inside the tracer.
    if not isinstance(t, NkiTensor):
        raise ctx.error("register.type", f"{role} must be a [1, 1] SBUF integer tensor, got {t!r}")
    return t


def register_alloc(x: int | None = None) -> VirtualRegister:
    """A new register, set to ``x`` (0 if omitted)."""
    ctx = tracing.current()
    reg = new_register(ctx, "reg")
    ctx.emit(RegisterSet(register=reg.name, value=0 if x is None else _immediate(ctx, x)))
    return reg


def _writable(ctx, dst) -> VirtualRegister:
    if not isinstance(dst, VirtualRegister):
        raise ctx.error("register.type", f"expected a register, got {dst!r}")
    if dst.is_frozen:
        raise ctx.error("register.frozen", f"{dst!r} is a loop counter: it is read-only inside the loop body")
    return dst


def register_move(dst: VirtualRegister, src) -> None:
    ctx = tracing.current()
    _writable(ctx, dst)
    value = src.name if isinstance(src, VirtualRegister) else _immediate(ctx, src)
    ctx.emit(RegisterSet(register=dst.name, value=value))


def register_load(dst: VirtualRegister, src: NkiTensor) -> None:
    ctx = tracing.current()
    _writable(ctx, dst)
    ctx.emit(RegisterLoad(register=dst.name, src=_tensor(ctx, src, "src").access_pattern()))


def register_store(dst: NkiTensor, src: VirtualRegister) -> None:
    ctx = tracing.current()
    if not isinstance(src, VirtualRegister):
        raise ctx.error("register.type", f"register_store stores a register, got {src!r}")
    ctx.emit(RegisterStore(dst=_tensor(ctx, dst, "dst").access_pattern(), register=src.name))
