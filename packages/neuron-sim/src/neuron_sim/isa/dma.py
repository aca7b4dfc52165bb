"""DMA instructions: data movement between HBM and SBUF (and within each), run by the DMA engines.

A DMA is triggered by an engine's sequencer (``engine``, Sync by default) on a DMA queue and runs on
up to 16 DMA engines. PSUM is not reachable by DMA (NKI 0.3+). Element order: both patterns are
walked in row-major order and the i-th element of ``src`` lands in the i-th element of ``dst``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..arch import Architecture
from ..errors import ValidationError
from ..memory.access_pattern import HBM, PSUM, SBUF, AccessPattern
from .base import Instruction, check_onchip

DMA_TRIGGER_ENGINES = ("sync", "scalar", "gpsimd", "vector", "tensor")
DGE_MODES = ("none", "hwdge", "swdge")
OOB_MODES = ("error", "skip")


def _check_dma_operand(ap: AccessPattern, arch: Architecture, role: str) -> None:
    if ap.memory == PSUM:
        raise ValidationError("dma.psum", f"DMA cannot access PSUM ({role} is {ap.describe()}); copy to SBUF first")
    if ap.memory == SBUF:
        check_onchip(ap, arch, role, compute=False)


@dataclass(kw_only=True, eq=False)
class DmaInstruction(Instruction):
    engines = DMA_TRIGGER_ENGINES
    queue: str = ""  # DMA queue name, e.g. "qSyncIO0"; default derived from the trigger engine
    dge: str = "none"

    def __post_init__(self):
        super().__post_init__()
        if not self.queue:
            self.queue = f"q{self.engine.capitalize()}IO0"

    def _check_dge(self) -> None:
        if self.dge not in DGE_MODES:
            raise ValidationError("dma.dge_mode", f"unknown descriptor mode {self.dge!r}; choose {DGE_MODES}")
        if self.dge == "hwdge" and self.engine not in ("sync", "scalar"):
            raise ValidationError("dma.hwdge_trigger", f"hardware DGE is triggered from Sync or Scalar, not {self.engine}")


@dataclass(kw_only=True, eq=False)
class DmaCopy(DmaInstruction):
    """Copy (and optionally cast, through fp32) between HBM and SBUF, SBUF and SBUF, or HBM and HBM."""

    opcode = "DMA_COPY"
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_dge()
        _check_dma_operand(self.dst, arch, "dst")
        _check_dma_operand(self.src, arch, "src")
        if self.dst.num_elements != self.src.num_elements:
            raise ValidationError(
                "dma.shape_mismatch",
                f"DMA moves {self.src.num_elements} elements {list(self.src.shape)} into "
                f"{self.dst.num_elements} elements {list(self.dst.shape)}",
            )
        if self.dst.dtype != self.src.dtype and self.dge == "hwdge":
            raise ValidationError("dma.cast_hwdge", f"hardware DGE cannot cast {self.src.dtype} to {self.dst.dtype}")


@dataclass(kw_only=True, eq=False)
class DmaIndirect(DmaInstruction):
    """Row gather or scatter through a per-partition index tile (software DGE on GpSimd).

    ``table`` is an HBM pattern whose dim 0 enumerates the rows (``partition_count`` rows,
    ``partition_stride`` elements apart) and whose free dims describe one row. ``index`` is an
    int32 [P, 1] SBUF tile. Gather: ``dst[p] = table[index[p]]``. Scatter: ``table[index[p]] = src[p]``
    (``accumulate`` adds instead, as DMA compute does). Out-of-range indices raise (``oob_mode="error"``)
    or skip the row (``"skip"``).
    """

    opcode = "DMA_INDIRECT"
    engines = ("gpsimd", "sync", "scalar")
    direction: str  # "gather" | "scatter"
    onchip: AccessPattern  # dst of a gather, src of a scatter
    table: AccessPattern
    index: AccessPattern
    accumulate: bool = False
    oob_mode: str = "error"
    dge: str = "swdge"

    def reads(self):
        if self.direction == "gather":
            return [self.index, self.table]
        return [self.index, self.onchip] + ([self.table] if self.accumulate else [])

    def writes(self):
        return [self.onchip] if self.direction == "gather" else [self.table]

    def _validate(self, arch):
        if self.direction not in ("gather", "scatter"):
            raise ValidationError("dma.indirect_direction", f"direction must be 'gather' or 'scatter', got {self.direction!r}")
        if self.accumulate and self.direction != "scatter":
            # DMA compute accumulates into the HBM table; a gather has no accumulating form.
            raise ValidationError("dma.indirect_accumulate", f"accumulate=True needs direction 'scatter', got {self.direction!r}")
        if self.oob_mode not in OOB_MODES:
            raise ValidationError("dma.oob_mode", f"oob_mode must be one of {OOB_MODES}, got {self.oob_mode!r}")
        if self.dge not in DGE_MODES:
            raise ValidationError("dma.dge_mode", f"unknown descriptor mode {self.dge!r}; choose {DGE_MODES}")
        if self.dge == "hwdge":
            raise ValidationError("dma.indirect_hwdge", "indirect DMA needs descriptors generated in software (swdge)")
        if self.table.memory != HBM:
            raise ValidationError("dma.indirect_table", f"the indexed tensor must be in HBM, got {self.table.describe()}")
        _check_dma_operand(self.onchip, arch, "onchip")
        if self.onchip.memory != SBUF:
            # vector_offset gathers/scatters move rows between an HBM tensor and SBUF partitions.
            raise ValidationError("dma.indirect_onchip", f"the gathered/scattered tile must be in SBUF, got {self.onchip.describe()}")
        check_onchip(self.index, arch, "index", compute=False)
        if self.index.memory != SBUF or not dtypes.is_int(self.index.dtype) or self.index.free_size != 1:
            raise ValidationError(
                "dma.indirect_index", f"index must be an integer [P, 1] SBUF tile, got {self.index.describe()}"
            )
        if self.index.partition_count != self.onchip.partition_count:
            raise ValidationError(
                "dma.indirect_rows",
                f"index has {self.index.partition_count} rows but the on-chip tile has {self.onchip.partition_count}",
            )
        if self.onchip.free_size != self.table.free_size:
            raise ValidationError(
                "dma.shape_mismatch",
                f"a table row has {self.table.free_size} elements but an on-chip row has {self.onchip.free_size}",
            )


@dataclass(kw_only=True, eq=False)
class DmaTranspose(DmaInstruction):
    """2-D transpose in the DMA engines: ``dst[j, i] = src[i, j]`` (HBM->SBUF or SBUF->SBUF)."""

    opcode = "DMA_TRANSPOSE"
    dst: AccessPattern
    src: AccessPattern

    def reads(self):
        return [self.src]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_dge()
        _check_dma_operand(self.dst, arch, "dst")
        _check_dma_operand(self.src, arch, "src")
        if self.dst.memory != SBUF:
            raise ValidationError("dma.transpose_dst", f"DMA transpose writes SBUF, got {self.dst.describe()}")
        if self.src.itemsize not in (2, 4) or self.src.dtype != self.dst.dtype:
            raise ValidationError(
                "dma.transpose_dtype",
                f"DMA transpose moves 2- or 4-byte elements without casting, got {self.src.dtype} -> {self.dst.dtype}",
            )
        rows, cols = self.src.partition_count, self.src.free_size
        if (self.dst.partition_count, self.dst.free_size) != (cols, rows):
            raise ValidationError(
                "dma.transpose_shape",
                f"transposing [{rows}, {cols}] needs a [{cols}, {rows}] destination, got {list(self.dst.shape)}",
            )
