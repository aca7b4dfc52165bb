"""nl.device_print: print a tile's values as the kernel runs.

On hardware the runtime exports printed tensors through its debug stream; here, as in NKI's CPU
simulation, they go to stdout when the launch has run. The tile is copied by a DMA into an HBM
tensor of its own (the hardware also moves it out by DMA, so it costs device time), which the
numpy launch prints after the kernel ran: ``<prefix> <values>``.
"""

from __future__ import annotations

from .. import tracing
from ..storage import hbm_storage
from ..tensor import NkiTensor
from .memory_ops import dma_move


def device_print(print_prefix: str, tensor: NkiTensor, mask=None) -> None:
    ctx = tracing.current()
    if not isinstance(print_prefix, str):
        raise ctx.error("device_print.prefix", f"the print prefix is a compile-time string, got {print_prefix!r}")
    if not isinstance(tensor, NkiTensor):
        raise ctx.error("operand.type", f"device_print prints a tensor, got {type(tensor).__name__}")
    if tensor.buffer == "psum":
        raise ctx.error("dma.psum", "device_print moves the tile by DMA, which cannot read PSUM: copy it to SBUF first")
    pid = "_".join(map(str, ctx.program_id))
    target = NkiTensor(hbm_storage(ctx, tensor.shape, tensor.dtype, f"device_print_{pid}_{len(ctx.prints)}", "internal"))
    dma_move(target, tensor)
    ctx.prints.append((print_prefix, target.name))
