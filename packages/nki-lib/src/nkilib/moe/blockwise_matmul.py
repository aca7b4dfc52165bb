"""Blockwise expert matmul (grouped GEMM), dropless: the tokens routed to each expert are grouped
into blocks of ``block`` rows, each block computed against its expert's weight.

    x             [T, K]          token activations
    weight        [E, K, N]       one [K, N] matrix per expert
    token_ids     [R] int32       R = num_blocks * block: the token of each row; -1 = a padding row
    block_experts [num_blocks] int32: the expert of each block
    out           [R, N]          out[r] = x[token_ids[r]] @ weight[block_experts[r // block]] (0 for padding)

``block_layout`` builds token_ids/block_experts from the router's choices (each expert's rows
padded to whole blocks, so no token is dropped); the backward kernel returns dx [T, K] (each
token's rows summed) and dweight [E, K, N] fp32.

Per block: the expert's [K, N] weight comes in by one DMA per 128 rows of K whose start is read
from block_experts at run time (a scalar_offset), into the other of two buffers while the
previous block computes; each 128-row tile of the block gathers its tokens' rows of x (an
indirect DMA; padding rows skipped, left 0), transposes them on TensorE (K on partitions), and
accumulates x^T W in PSUM over K, 512 output columns at a time.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkilib import _checks
from nkilib._matmul import N_CHUNK, chunks, project, project_out, transpose_groups, transpose_into
from nkilib._tiling import P, Ring, row_tiles, scratch, store


@nki.jit
def blockwise_matmul_kernel(x, weight, token_ids, block_experts):
    tokens, kdim = x.shape
    experts, _, ndim = weight.shape
    rows, nblocks = token_ids.shape[0], block_experts.shape[0]
    block = rows // nblocks
    out = nl.ndarray((rows, ndim), dtype=x.dtype, buffer=nl.shared_hbm)
    kchunks = chunks(kdim, P)
    w_ring = Ring(2, ((P, len(kchunks) * ndim), weight.dtype), ((1, 1), nl.int32))
    x_ring = Ring(2, ((P, 1), nl.int32), ((P, kdim), x.dtype), ((P, len(kchunks) * P), x.dtype))
    o_ring = Ring(2, ((P, N_CHUNK), x.dtype))
    # (block, first row, rows) of every 128-row tile; tile i + 1's rows are gathered and
    # transposed before tile i's matmuls, so VectorE copies its x^T out of PSUM while TensorE
    # multiplies (TensorE runs in order: otherwise each tile's matmuls wait for its own copies)
    work = [(bi, bi * block + r0, n) for bi in range(nblocks) for r0, n in row_tiles(block)]

    def prepare(bi, row0, n):
        idx, xs, xT = x_ring.next()
        _gather_rows(idx, xs, x, token_ids, row0, n)
        transpose_groups(xT, xs, kchunks, n)
        return xT

    weights = {}
    pending = prepare(*work[0])
    for i, (bi, row0, n) in enumerate(work):
        if bi not in weights:
            wt, expert = w_ring.next()
            _load_expert(wt, expert, weight, block_experts, bi, kchunks, ndim)
            weights = {bi: wt}
        xT = pending
        if i + 1 < len(work):
            pending = prepare(*work[i + 1])
        project_out(out, row0, xT, weights[bi], kchunks, n, ndim, o_ring, store)
    return out


def _load_expert(wt, expert, weight, block_experts, bi, kchunks, ndim):
    """wt[p, c * N + j] = weight[e, c * 128 + p, j] for the block's expert e (read at run time)."""
    nisa.dma_copy(dst=expert, src=block_experts[bi : bi + 1].reshape((1, 1)))
    for c, (k0, kw) in enumerate(kchunks):
        src = weight.ap([[ndim, kw], [1, ndim]], offset=k0 * ndim, scalar_offset=expert, indirect_dim=0)
        nisa.dma_copy(dst=wt[0:kw, c * ndim : (c + 1) * ndim], src=src)


def _gather_rows(idx, xs, x, token_ids, row0, n):
    """xs[p] = x[token_ids[row0 + p]], 0 for a padding row (-1: the gather skips it)."""
    nisa.dma_copy(dst=idx[0:n], src=token_ids[row0 : row0 + n].reshape((n, 1)))
    nisa.memset(dst=xs[0:n], value=0.0)
    nisa.dma_copy(dst=xs[0:n], src=x[idx[0:n], :], oob_mode=nisa.oob_mode.skip)


@nki.jit
def blockwise_matmul_backward_kernel(dout, x, weight, token_ids, block_experts):
    """(dx [T, K] fp32, dweight [E, K, N] fp32) of out = blockwise_matmul(x, weight, ...) for dout [R, N].

    Both are sums over blocks, accumulated in HBM by DMA (indirect scatters with accumulate, the
    DMA engines' read-add-write): dx's rows at each row's token, dweight's at the block's expert.
    Per block: W^T (N on partitions) by TensorE transposes of the expert's weight; per 128-row
    tile the rows' dx = dout W^T (contracting N); per 128 rows of K the block's dweight = x^T dout
    (contracting the block's rows) accumulated in PSUM over its tiles."""
    tokens, kdim = x.shape
    experts, _, ndim = weight.shape
    rows, nblocks = token_ids.shape[0], block_experts.shape[0]
    block = rows // nblocks
    dx = nl.ndarray((tokens, kdim), dtype=nl.float32, buffer=nl.shared_hbm)
    dweight = nl.ndarray((experts, kdim, ndim), dtype=nl.float32, buffer=nl.shared_hbm)
    dw_rows = dweight.reshape((experts * kdim, ndim))
    kchunks, nchunks = chunks(kdim, P), chunks(ndim, P)
    zero = scratch((P, max(kdim, ndim)), nl.float32)
    nisa.memset(dst=zero, value=0.0)
    for r0, n in row_tiles(tokens):
        store(dx[r0 : r0 + n, :], zero[0:n, 0:kdim])
    for r0, n in row_tiles(experts * kdim):
        store(dw_rows[r0 : r0 + n, :], zero[0:n, 0:ndim])
    tiles = row_tiles(block)
    w_ring = Ring(
        2,
        ((P, len(kchunks) * ndim), weight.dtype),
        ((1, 1), nl.int32),
        ((P, len(nchunks) * kdim), weight.dtype),
        ((P, 1), nl.int32),
        ((P, 1), nl.float32),
    )
    t_ring = Ring(
        2, *[((P, 1), nl.int32), ((P, kdim), x.dtype), ((P, ndim), dout.dtype), ((P, len(nchunks) * P), dout.dtype)] * len(tiles)
    )
    o_ring = Ring(2, ((P, N_CHUNK), nl.float32), ((P, 1), nl.int32))
    part = scratch((P, 1), nl.float32)
    nisa.iota(dst=part, pattern=[[0, 1]], offset=0, channel_multiplier=1)
    for bi in range(nblocks):
        wt, expert, wT, e_col, e_base = w_ring.next()
        _load_expert(wt, expert, weight, block_experts, bi, kchunks, ndim)
        for c, (k0, kw) in enumerate(kchunks):
            for cn, (m0, mw) in enumerate(nchunks):
                transpose_into(
                    wT[0:mw, cn * kdim + k0 : cn * kdim + k0 + kw], wt[0:kw, c * ndim + m0 : c * ndim + m0 + mw], kw, mw
                )
        # dweight row of (expert, k) = expert * K + k: the expert on every partition, times K
        nisa.dma_copy(dst=e_col, src=block_experts.ap([[0, P], [1, 1]], offset=bi))
        nisa.tensor_scalar(dst=e_base, data=e_col, op0=nl.multiply, operand0=float(kdim), op1=nl.add, operand1=part)
        tile_sets = t_ring.next()
        held = []
        for t, (r0, n) in enumerate(tiles):
            idx, xs, ds, dsT = tile_sets[4 * t : 4 * t + 4]
            row0 = bi * block + r0
            _gather_rows(idx, xs, x, token_ids, row0, n)
            nisa.dma_copy(dst=ds[0:n], src=dout[row0 : row0 + n, :])
            transpose_groups(dsT, ds, nchunks, n)
            for k0, kw in chunks(kdim, N_CHUNK):
                ps = nl.ndarray((P, N_CHUNK), dtype=nl.float32, buffer=nl.psum)
                project(ps, dsT, wT, nchunks, n, kdim, k0, kw)
                drows, _ = o_ring.next()
                nisa.tensor_copy(dst=drows[0:n, 0:kw], src=ps[0:n, 0:kw])
                _scatter_add(dx[:, k0 : k0 + kw], idx[0:n], drows[0:n, 0:kw])
            held.append((n, xs, ds))
        for k0, kw in kchunks:
            for n0, nw in chunks(ndim, N_CHUNK):
                ps = nl.ndarray((P, N_CHUNK), dtype=nl.float32, buffer=nl.psum)
                for n, xs, ds in held:
                    nisa.nc_matmul(dst=ps[0:kw, 0:nw], stationary=xs[0:n, k0 : k0 + kw], moving=ds[0:n, n0 : n0 + nw])
                dw, widx = o_ring.next()
                nisa.tensor_copy(dst=dw[0:kw, 0:nw], src=ps[0:kw, 0:nw])
                nisa.tensor_scalar(dst=widx[0:kw], data=e_base[0:kw], op0=nl.add, operand0=float(k0))
                _scatter_add(dw_rows[:, n0 : n0 + nw], widx[0:kw], dw[0:kw, 0:nw])
    return dx, dweight


def _scatter_add(table, idx, src):
    """table[idx[p]] += src[p] by DMA read-add-write (rows with an index outside the table - padding - skipped)."""
    nisa.dma_copy(dst=table[idx, :], src=src, oob_mode=nisa.oob_mode.skip, dst_rmw_op=nl.add)


# ---- layout and argument checks --------------------------------------------------------------


def layout_blocks(tokens: int, top_k: int, experts: int, block: int) -> int:
    """Blocks of a dropless layout for any routing: each expert's rows padded to whole blocks,
    at most (T * k + E * (block - 1)) // block of them."""
    return max(1, (tokens * top_k + experts * (block - 1)) // block)


def block_layout(expert_ids, num_experts: int, block: int):
    """(token_ids [R] int32, block_experts [num_blocks] int32, rows [T, k] int32) for the router's
    expert_ids [T, k]: each expert's (token, choice) pairs in token order, padded with -1 to whole
    blocks (dropless); rows[t, j] is the row holding token t's j-th choice. num_blocks is
    layout_blocks(T, k, E, block) whatever the routing (a static shape); the blocks left over are
    all padding (expert 0)."""
    ids = np.asarray(expert_ids)
    tokens, top_k = ids.shape
    if block < 1:
        raise _checks.NkilibError("moe.block", f"block={block}; a block holds at least one row")
    if ids.size and (ids.min() < 0 or ids.max() >= num_experts):
        t, j = (int(v[0]) for v in np.nonzero((ids < 0) | (ids >= num_experts)))
        raise _checks.NkilibError(
            "moe.experts", f"expert_ids[{t}, {j}] = {int(ids[t, j])} is not one of the {num_experts} experts"
        )
    nblocks = layout_blocks(tokens, top_k, num_experts, block)
    token_ids = np.full(nblocks * block, -1, np.int32)
    block_experts = np.zeros(nblocks, np.int32)
    rows = np.zeros((tokens, top_k), np.int32)
    flat = ids.reshape(-1)
    order = np.argsort(flat, kind="stable")  # by expert, then token
    start = 0
    for e in range(num_experts):
        picks = order[flat[order] == e]
        if not len(picks):
            continue
        token_ids[start : start + len(picks)] = picks // top_k
        rows.reshape(-1)[picks] = start + np.arange(len(picks))
        used = -(-len(picks) // block)
        block_experts[start // block : start // block + used] = e
        start += used * block
    return token_ids, block_experts, rows


def _check_ids(name, array, length, low, high):
    dt = _checks.dtype_name(array.dtype)
    if dt != "int32":
        raise _checks.NkilibError("dtype", f"{name} has dtype {dt}; the kernel takes int32")
    if len(array.shape) != 1 or int(array.shape[0]) != length:
        raise _checks.NkilibError("shape", f"{name} has shape {list(array.shape)}; expected [{length}]")
    values = _checks.host_values(array)
    if values is not None and values.size and (values.min() < low or values.max() >= high):
        i = int(np.flatnonzero((values < low) | (values >= high))[0])
        raise _checks.NkilibError(f"moe.{name}", f"{name}[{i}] = {int(values[i])} is outside [{low}, {high})")


def check(x, weight, token_ids, block_experts, backward=False) -> str:
    """The I/O dtype of arguments blockwise_matmul (and, with backward, its backward) takes."""
    dt = _checks.check_float("x", x)
    if len(x.shape) != 2:
        raise _checks.NkilibError("shape", f"x has shape {list(x.shape)}; expected [tokens, K]")
    tokens, kdim = _checks.check_rows("x", x)
    if len(weight.shape) != 3 or int(weight.shape[1]) != kdim or 0 in tuple(weight.shape):
        raise _checks.NkilibError("shape", f"weight has shape {list(weight.shape)}; expected [experts, {kdim}, N]")
    _checks.check_same_dtype("weight", weight, dt)
    experts, _, ndim = (int(s) for s in weight.shape)
    if len(block_experts.shape) != 1 or int(block_experts.shape[0]) == 0:
        raise _checks.NkilibError("shape", f"block_experts has shape {list(block_experts.shape)}; expected [num_blocks]")
    nblocks = int(block_experts.shape[0])
    rows = int(token_ids.shape[0]) if len(token_ids.shape) == 1 else -1
    if rows <= 0 or rows % nblocks:
        raise _checks.NkilibError(
            "shape", f"token_ids has shape {list(token_ids.shape)}; expected [num_blocks * block] with num_blocks = {nblocks}"
        )
    _check_ids("token_ids", token_ids, rows, -1, tokens)
    _check_ids("block_experts", block_experts, nblocks, 0, experts)
    if experts * kdim >= 1 << 24:
        raise _checks.NkilibError(
            "moe.experts", f"{experts} experts x K={kdim} rows of weight; the kernel indexes fewer than 2**24"
        )
    io = _checks.DTYPE_BYTES[dt]
    kc = -(-kdim // P)
    # per partition: two expert weights (128 rows of K each), x rows and x^T, output chunks
    need = 2 * (kc * ndim * io + kdim * io + kc * P * io + N_CHUNK * io) + 1024
    if backward:
        nc, tiles = -(-ndim // P), -(-(rows // nblocks) // P)
        need += 2 * (nc * kdim * io + tiles * (kdim * io + ndim * io + nc * P * io) + N_CHUNK * 4) + max(kdim, ndim) * 4
    if need > _checks.sbuf_budget():
        raise _checks.NkilibError(
            "sbuf",
            f"blockwise_matmul{'_backward' if backward else ''}: K={kdim}, N={ndim} with blocks of "
            f"{rows // nblocks} rows need {need} bytes per SBUF partition, over the "
            f"{_checks.sbuf_budget()} available (two experts' weights stay on chip)",
        )
    return dt


def blockwise_matmul(x, weight, token_ids, block_experts):
    """out [R, N]: row r is x[token_ids[r]] @ weight[block_experts[r // block]] (0 where token_ids is -1)."""
    check(x, weight, token_ids, block_experts)
    return blockwise_matmul_kernel(x, weight, token_ids, block_experts)


def blockwise_matmul_backward(dout, x, weight, token_ids, block_experts):
    """(dx [T, K] fp32, dweight [E, K, N] fp32) for dout [R, N] of blockwise_matmul."""
    dt = check(x, weight, token_ids, block_experts, backward=True)
    _checks.check_shape("dout", dout, (token_ids.shape[0], weight.shape[2]))
    _checks.check_same_dtype("dout", dout, dt)
    return blockwise_matmul_backward_kernel(dout, x, weight, token_ids, block_experts)
