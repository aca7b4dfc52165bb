"""Register instructions: allocate, move, load from and store to SBUF."""

from __future__ import annotations

from neuron_sim.isa import RegisterLoad, RegisterSet, RegisterStore

from .. import tracing
from ..language.registers import VirtualRegister, new_register
from ..tensor import NkiTensor


def register_alloc(x: int | None = None) -> VirtualRegister:
    """A new register, set to ``x`` (0 if omitted)."""
    ctx = tracing.current()
    reg = new_register(ctx, "reg")
    ctx.emit(RegisterSet(register=reg.name, value=0 if x is None else int(x)))
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
    value = src.name if isinstance(src, VirtualRegister) else int(src)
    ctx.emit(RegisterSet(register=dst.name, value=value))


def register_load(dst: VirtualRegister, src: NkiTensor) -> None:
    ctx = tracing.current()
    _writable(ctx, dst)
    ctx.emit(RegisterLoad(register=dst.name, src=src.access_pattern()))


def register_store(dst: NkiTensor, src: VirtualRegister) -> None:
    ctx = tracing.current()
    ctx.emit(RegisterStore(dst=dst.access_pattern(), register=src.name))
