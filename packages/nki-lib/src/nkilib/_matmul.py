"""TensorE building blocks shared by the matmul kernels (MoE, MLP, attention): transposes through
PSUM, and projections contracting over 128-row chunks with the operands laid out in column
groups (chunk c of a [K, W] matrix at columns c * W .. of a [128, chunks * W] SBUF tile)."""

from __future__ import annotations

import nki.isa as nisa
import nki.language as nl

from nkilib._tiling import P

N_CHUNK = 512  # output columns of one PSUM bank (fp32)


def chunks(size: int, step: int) -> list[tuple[int, int]]:
    """(start, width) of the pieces of ``size`` at most ``step`` wide."""
    return [(s0, min(step, size - s0)) for s0 in range(0, size, step)]


def transpose_into(dst, src, n, width):
    """dst [width, n] (SBUF) = src [n, width]^T through TensorE and PSUM: a strided (transposing)
    DMA would move one element per descriptor, ~80x slower than row loads."""
    t = nl.ndarray((P, P), dtype=src.dtype, buffer=nl.psum)
    nisa.nc_transpose(dst=t[0:width, 0:n], data=src)
    nisa.tensor_copy(dst=dst, src=t[0:width, 0:n])


def project(dst, lhsT, rhs, parts, n, rhs_width, col0, cols):
    """dst[0:n, 0:cols] (PSUM) = sum over chunks c of lhsT_c^T @ rhs_c[:, col0:col0 + cols], where
    lhsT_c = lhsT[0:kw, c * 128:c * 128 + n] and rhs_c = rhs[0:kw, c * rhs_width:(c + 1) * rhs_width]
    for the (k0, kw) chunks ``parts`` of the contracted dim."""
    for c, (_k0, kw) in enumerate(parts):
        nisa.nc_matmul(
            dst=dst[0:n, 0:cols],
            stationary=lhsT[0:kw, c * P : c * P + n],
            moving=rhs[0:kw, c * rhs_width + col0 : c * rhs_width + col0 + cols],
        )


def transpose_groups(dst, src, parts, n):
    """dst's column group c = src[0:n, k0:k0 + kw]^T for the (k0, kw) chunks ``parts`` of src's
    columns: src's columns on the partitions, in the layout ``project`` contracts."""
    for c, (k0, kw) in enumerate(parts):
        transpose_into(dst[0:kw, c * P : c * P + n], src[0:n, k0 : k0 + kw], n, kw)


def project_out(out, row0, lhsT, rhs, parts, n, width, out_ring, store):
    """out[row0:row0 + n, :] = the projection of lhsT by rhs (``project``), 512 columns at a time
    through a PSUM bank and a tile of ``out_ring`` (the output's dtype), stored by ``store``."""
    for c0, cw in chunks(width, N_CHUNK):
        ps = nl.ndarray((P, N_CHUNK), dtype=nl.float32, buffer=nl.psum)
        project(ps, lhsT, rhs, parts, n, width, c0, cw)
        (ot,) = out_ring.next()
        nisa.tensor_copy(dst=ot[0:n, 0:cw], src=ps[0:n, 0:cw])
        store(out[row0 : row0 + n, c0 : c0 + cw], ot[0:n, 0:cw])
