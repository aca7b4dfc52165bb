"""How a DMA instruction spreads over the 16 DMA engines, and what each engine's share costs.

Each DMA engine serves 8 of the 128 SBUF partitions, so an SBUF-side transfer of P partitions uses
ceil(P / 8) engines; HBM-to-HBM copies spread their rows over all engines. A transfer is a list of
contiguous chunks (descriptors); each engine pays bytes / bandwidth plus a fixed cost per chunk,
which is what makes small, fragmented transfers slow (nki-dma-bandwidth-guide.rst).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture
from ..isa import DmaCopy, DmaIndirect, DmaTranspose
from ..memory.access_pattern import HBM, SBUF, AccessPattern


@dataclass(slots=True)
class DmaPlan:
    first_engine: int
    engines: int  # consecutive engines used
    bytes_per_engine: float
    chunks_per_engine: float
    total_bytes: int
    hbm_read_bytes: int
    hbm_write_bytes: int
    sbuf_read_bytes: int
    sbuf_write_bytes: int

    def engine_time_ns(self, arch: Architecture, efficiency: float = 1.0) -> float:
        dma = arch.dma
        return self.bytes_per_engine / (dma.bytes_per_ns_per_engine * efficiency) + self.chunks_per_engine * dma.descriptor_overhead_ns


def _label(ap: AccessPattern) -> str:
    return ap.tensor if ap.memory == HBM else ap.memory.upper()


def plan_dma(inst, arch: Architecture) -> DmaPlan:
    dma = arch.dma
    if isinstance(inst, DmaIndirect):
        if inst.direction == "gather":
            src, dst = inst.table, inst.onchip
        else:
            src, dst = inst.onchip, inst.table
        rows = inst.onchip.partition_count
        nbytes = inst.onchip.free_size * max(src.itemsize, dst.itemsize) * rows
        runs = rows * max(1, (inst.onchip.free_size * src.itemsize) // max(1, inst.table.contiguous_run_bytes()))
        onchip = inst.onchip
    else:
        src, dst = inst.src, inst.dst
        nbytes = src.num_elements * max(src.itemsize, dst.itemsize)
        run = min(src.contiguous_run_bytes(), dst.contiguous_run_bytes())
        if isinstance(inst, DmaTranspose):
            run = src.itemsize  # element-wise scatter through the DMA transpose unit
        runs = max(1, nbytes // max(1, run)) if run else 1
        # Row boundaries split runs too.
        runs = max(runs, src.partition_count, dst.partition_count)
        onchip = dst if dst.memory == SBUF else src if src.memory == SBUF else None

    per = dma.partitions_per_engine
    if onchip is not None:
        first = onchip.partition_start // per
        last = (onchip.partition_start + onchip.partition_count - 1) // per
        engines = last - first + 1
    else:
        first, engines = 0, min(dma.engines, max(1, runs))
    hbm_read = src.num_elements * src.itemsize if src.memory == HBM else 0
    hbm_write = dst.num_elements * dst.itemsize if dst.memory == HBM else 0
    if isinstance(inst, DmaIndirect) and inst.direction == "gather":
        hbm_read = inst.onchip.free_size * inst.table.itemsize * inst.onchip.partition_count
    if isinstance(inst, DmaIndirect) and inst.direction == "scatter":
        hbm_write = inst.onchip.free_size * inst.table.itemsize * inst.onchip.partition_count
        hbm_read = hbm_write if inst.accumulate else 0
    return DmaPlan(
        first_engine=first,
        engines=engines,
        bytes_per_engine=nbytes / engines,
        chunks_per_engine=runs / engines,
        total_bytes=nbytes,
        hbm_read_bytes=hbm_read,
        hbm_write_bytes=hbm_write,
        sbuf_read_bytes=src.num_elements * src.itemsize if src.memory == SBUF else 0,
        sbuf_write_bytes=dst.num_elements * dst.itemsize if dst.memory == SBUF else 0,
    )


def endpoints(inst) -> tuple[str, str]:
    """(source, destination) labels of a DMA: an HBM tensor's name, or SBUF."""
    if isinstance(inst, DmaIndirect):
        table, onchip = _label(inst.table), _label(inst.onchip)
        return (table, onchip) if inst.direction == "gather" else (onchip, table)
    return _label(inst.src), _label(inst.dst)


TRANSPOSE_EFFICIENCY = {HBM: 0.9, SBUF: 0.5}  # DMA transpose vs plain copy (nki-dma-bandwidth-guide.rst)


def efficiency(inst) -> float:
    if isinstance(inst, DmaTranspose):
        return TRANSPOSE_EFFICIENCY[inst.src.memory]
    return 1.0


__all__ = ["DmaPlan", "plan_dma", "efficiency", "DmaCopy"]
