"""A properly tiled matmul: C[M, N] = A[M, K] @ B[K, N], with A given transposed (lhsT [K, M]).

Blocking follows the NKI performance guide: a block of B columns (``block_n`` moving tiles of 512)
stays resident in SBUF across all row blocks of A, each A row block is loaded once per column
block, results accumulate over K in PSUM (rotating over the 8 banks) and are evacuated by VectorE
and ScalarE alternately. loads alternate between two DMA queues so they overlap compute.
"""

from __future__ import annotations

from ..arch import Architecture, get_architecture
from ..builder import ProgramBuilder
from ..isa import Activation, DmaCopy, Matmul, TensorCopy
from ..program import Program


def tiled_matmul(
    m: int,
    k: int,
    n: int,
    dtype: str = "bfloat16",
    out_dtype: str | None = None,
    arch: Architecture | None = None,
    block_n: int | None = None,
) -> Program:
    arch = arch or get_architecture()
    out_dtype = out_dtype or dtype
    P = arch.num_partitions
    TM, TK, TN = arch.tensor.cols, P, arch.tensor.moving_fmax
    for name, size, tile in (("M", m, TM), ("K", k, TK), ("N", n, TN)):
        if size % tile:
            raise ValueError(f"{name}={size} must be a multiple of the tile size {tile}")
    nt_m, nt_k, nt_n = m // TM, k // TK, n // TN
    itemsize = 2 if dtype in ("bfloat16", "float16") else 4
    if block_n is None:
        # Keep the B block within ~half of SBUF, leaving room for A row blocks and results.
        budget = arch.sbuf_usable_bytes_per_partition // 2
        block_n = max(1, min(nt_n, budget // (nt_k * TN * itemsize)))
    block_n = min(block_n, nt_n)

    b = ProgramBuilder(f"matmul_{m}x{k}x{n}_{dtype}", arch)
    lhsT = b.input("lhsT", (k, m), dtype)
    rhs = b.input("rhs", (k, n), dtype)
    out = b.output("out", (m, n), out_dtype)

    rhs_block = [b.sbuf((TK, block_n * TN), dtype) for _ in range(nt_k)]
    lhs_bufs = [[b.sbuf((TK, TM), dtype) for _ in range(nt_k)] for _ in range(2)]
    res_bufs = [b.sbuf((TM, TN), out_dtype) for _ in range(4)]
    psum_banks = [b.psum((TM, TN), "float32") for _ in range(arch.psum_banks)]

    # Loads go out on two Sync queues; stores on a GpSimd queue, so a store waiting for its result
    # never blocks the next loads behind it in the Sync engine's in-order stream.
    loads = 0

    def load(dst, src):
        nonlocal loads
        b.emit(DmaCopy(dst=dst, src=src, queue=f"qSyncIO{loads % 2}", engine="sync"))
        loads += 1

    def store(dst, src):
        b.emit(DmaCopy(dst=dst, src=src, queue="qGpSimdIO0", engine="gpsimd"))

    bank = 0
    evac = 0
    row_block = 0
    for nb in range(0, nt_n, block_n):
        cols = min(block_n, nt_n - nb)
        for kt in range(nt_k):
            load(rhs_block[kt][:, : cols * TN], rhs[kt * TK : (kt + 1) * TK, nb * TN : (nb + cols) * TN])
        for mt in range(nt_m):
            lhs = lhs_bufs[row_block % 2]
            row_block += 1
            for kt in range(nt_k):
                load(lhs[kt][:, :], lhsT[kt * TK : (kt + 1) * TK, mt * TM : (mt + 1) * TM])
            for j in range(cols):
                acc = psum_banks[bank % len(psum_banks)]
                bank += 1
                for kt in range(nt_k):
                    b.emit(
                        Matmul(
                            dst=acc[:, :],
                            stationary=lhs[kt][:, :],
                            moving=rhs_block[kt][:, j * TN : (j + 1) * TN],
                            accumulate=kt > 0,
                        )
                    )
                res = res_bufs[evac % len(res_bufs)]
                if evac % 2 == 0:
                    b.emit(TensorCopy(dst=res[:, :], src=acc[:, :], engine="vector"))
                else:
                    b.emit(Activation(dst=res[:, :], src=acc[:, :], func="copy"))
                evac += 1
                col = (nb + j) * TN
                store(out[mt * TM : (mt + 1) * TM, col : col + TN], res[:, :])
    return b.build(metadata={"flops": 2 * m * n * k})
