"""Small reference programs for the DMA and fixed-overhead parts of the timing model."""

from __future__ import annotations

from ..arch import Architecture, get_architecture
from ..builder import ProgramBuilder
from ..isa import DmaCopy, TensorScalar
from ..program import Program


def hbm_to_sbuf_copy(nbytes_per_partition: int = 64 * 1024, chunks: int = 4, arch: Architecture | None = None) -> Program:
    """Move ``nbytes_per_partition`` x 128 partitions from HBM to SBUF in ``chunks`` DMAs."""
    arch = arch or get_architecture()
    P = arch.num_partitions
    cols = nbytes_per_partition // 4
    b = ProgramBuilder(f"copy_{nbytes_per_partition * P}", arch)
    src = b.input("src", (P, cols), "float32")
    dst = b.sbuf((P, cols), "float32")
    step = cols // chunks
    for c in range(chunks):
        b.emit(DmaCopy(dst=dst[:, c * step : (c + 1) * step], src=src[:, c * step : (c + 1) * step], queue=f"qSyncIO{c % 4}"))
    return b.build(metadata={"bytes": nbytes_per_partition * P})


def dependent_chain(length: int = 100, arch: Architecture | None = None) -> Program:
    """``length`` one-element VectorE instructions, each reading the previous one's result."""
    arch = arch or get_architecture()
    b = ProgramBuilder(f"chain_{length}", arch)
    x = b.inout("x", (1, 1), "float32")
    t = b.sbuf((1, 1), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    for _ in range(length):
        b.emit(TensorScalar(dst=t[:, :], src=t[:, :], op0="add", operand0=1.0))
    b.emit(DmaCopy(dst=x[:, :], src=t[:, :]))
    return b.build()
