"""Attention over a KV cache with per-sequence context lengths: decoding (one or a few new
tokens per sequence) and chunked prefill (a chunk of queries attending to the cached context and
to itself, causal), from a contiguous cache or a paged one with a block table (vLLM's layout).

    q            [B, Hq, Sq, d]        the Sq newest tokens of each sequence
    key_cache    [num_blocks, block_size, Hkv, d]   (paged)   or [B, S_max, Hkv, d] (contiguous)
    value_cache  like key_cache
    block_tables [B, max_blocks] int32: sequence b's token t is in block block_tables[b, t // block_size]
    seq_lens     [B] int32: tokens of sequence b in the cache, its Sq new ones included

Query i of sequence b sits at position seq_lens[b] - Sq + i and sees the keys at positions up to
its own (decoding: Sq = 1 sees all seq_lens[b] keys). The new tokens' keys and values must be in
the cache already (vLLM writes them before attention). Hq is a multiple of Hkv (GQA/MQA).

Per sequence the kernel brings every key/value head's K^T and V into SBUF, 128 tokens at a time:
paged, each token's cache row (all heads, one descriptor) is gathered by an indirect DMA whose
row indices are computed on chip - the tile's block-table entries (one small DMA) are broadcast
to their tokens' partitions by a 0/1 matmul on TensorE (slot = entry * block_size + offset in
the block). The query heads of a group share their key/value head, so they are stacked as rows of
one query tile (decoding: Hq/Hkv rows instead of 1 per matmul). Scores, online softmax and P V
are flash_attention's; the mask is computed at run time from seq_lens (positions are not known
when the kernel is traced), and the loop covers the whole block table (max_blocks * block_size
keys, the ones past a sequence's length masked): the kernel's time follows the table's width.

Every block-table entry, used or not, must index the cache (vLLM pads its tables with block 0);
a cache slot past a sequence's length must hold finite values (the masked scores are replaced,
but a NaN value times probability 0 is still NaN).
"""

from __future__ import annotations

import math

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

from nkilib import _checks
from nkilib._matmul import transpose_into
from nkilib._tiling import P, Ring, row_tiles, scratch, store
from nkilib.attention.flash_attention import (
    KEY_BLOCK,
    MASKED,
    MAX_HEAD_DIM,
    _accumulate,
    _key_blocks,
    _probabilities,
)

MAX_SLOTS = 1 << 24  # slot indices are computed in fp32 on chip: exact below 2**24


@nki.jit
def paged_attention_kernel(q, key_cache, value_cache, block_tables, seq_lens, scale):
    return _cached_attention(q, key_cache, value_cache, block_tables, seq_lens, scale)


@nki.jit
def decode_attention_kernel(q, k_cache, v_cache, seq_lens, scale):
    return _cached_attention(q, k_cache, v_cache, None, seq_lens, scale)


def _cached_attention(q, kc, vc, block_tables, seq_lens, scale):
    batch, heads, seq_q, dim = q.shape
    kv_heads = kc.shape[2]
    width = kv_heads * dim  # one token's cache row: every key/value head
    if block_tables is None:
        block, ctx = kc.shape[1], kc.shape[1]
    else:
        block, ctx = kc.shape[1], block_tables.shape[1] * kc.shape[1]
        slots = kc.shape[0] * block
        k_rows, v_rows = kc.reshape((slots, width)), vc.reshape((slots, width))
    group = heads // kv_heads
    rows = group * seq_q  # a kv head's query rows: (head g of the group, query i) at row g * Sq + i
    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    key_tiles = row_tiles(ctx)
    kT = scratch((dim, kv_heads * ctx), kc.dtype)  # head h's key t in column h * ctx + t
    vt = scratch((P, len(key_tiles) * width), vc.dtype)  # key tile j, head h: columns (j * Hkv + h) * d ..
    stage_ring = Ring(2, ((P, width), kc.dtype))
    qstage_ring = Ring(2, ((P, dim), q.dtype))
    qT_ring = Ring(2, ((dim, P), q.dtype))
    s_ring = Ring(2, ((P, KEY_BLOCK), nl.float32), ((P, KEY_BLOCK), q.dtype))
    pT_ring = Ring(2, ((P, KEY_BLOCK), q.dtype))
    row_ring = Ring(2, ((P, dim), nl.float32), *[((P, 1), nl.float32)] * 2)  # acc, -m, l
    blk_ring = Ring(2, ((P, dim), q.dtype), *[((P, 1), nl.float32)] * 5)
    masked = scratch((P, KEY_BLOCK), nl.float32)
    nisa.memset(dst=masked, value=MASKED)
    key_pos = scratch((P, KEY_BLOCK), nl.float32)  # column j holds j
    nisa.iota(dst=key_pos, pattern=[[1, KEY_BLOCK]], offset=0, channel_multiplier=0)
    flags = scratch((P, KEY_BLOCK), nl.float32)
    query_tiles = row_tiles(rows)
    query_index = [_query_index(r0, n, seq_q) for r0, n in query_tiles]
    expand = [_expansion(t0, n, block) for t0, n in key_tiles] if block_tables is not None else None
    limit_ring = Ring(2, ((P, 1), nl.int32), ((P, 1), nl.float32), ((P, 1), nl.float32))
    slot_ring = Ring(2, ((P, 1), nl.int32), ((P, 1), nl.float32), ((P, 1), nl.int32))  # entries, (entry - j) * block, slots
    for b in range(batch):
        # this sequence's length on every partition, then position(query i) = len - Sq + i
        len_i, len_f, limit = limit_ring.next()
        nisa.dma_copy(dst=len_i, src=seq_lens.ap([[0, P], [1, 1]], offset=b))
        nisa.tensor_scalar(dst=len_f, data=len_i, op0=nl.add, operand0=float(-seq_q))
        for j, (t0, n) in enumerate(key_tiles):
            (kst,) = stage_ring.next()
            vcols = vt[0:n, j * width : (j + 1) * width]
            if block_tables is None:
                nisa.dma_copy(dst=kst[0:n], src=kc[b, t0 : t0 + n])
                nisa.dma_copy(dst=vcols, src=vc[b, t0 : t0 + n])
            else:
                slot = _slots(block_tables, b, t0, n, block, expand[j], slot_ring)
                nisa.dma_copy(dst=kst[0:n], src=k_rows[slot[0:n], :])
                nisa.dma_copy(dst=vcols, src=v_rows[slot[0:n], :])
            _transpose_heads(kT, kst, t0, n, ctx, kv_heads, dim)
        for h in range(kv_heads):
            kT_h = kT[:, h * ctx : (h + 1) * ctx]

            def v_block(j, cw, h=h):
                return vt[0:cw, (j * kv_heads + h) * dim : (j * kv_heads + h + 1) * dim]

            for (r0, n), qidx in zip(query_tiles, query_index):
                (qt,) = qstage_ring.next()
                for g, i0, i1, p0 in _head_segments(r0, n, seq_q):
                    nisa.dma_copy(dst=qt[p0 : p0 + i1 - i0], src=q[b, h * group + g, i0:i1, :])
                (qT,) = qT_ring.next()
                transpose_into(qT[:, 0:n], qt[0:n], n, dim)
                nisa.tensor_tensor(dst=limit[0:n], data1=qidx[0:n], data2=len_f[0:n], op=nl.add)
                acc, neg_m, l_sum = row_ring.next()
                nisa.memset(dst=acc[0:n], value=0.0)
                nisa.memset(dst=neg_m[0:n], value=1e30)
                nisa.memset(dst=l_sum[0:n], value=0.0)
                pending = None
                for k0, kw in _key_blocks(ctx, ctx):
                    mask = _position_mask(k0, kw, limit, key_pos, flags, masked)
                    probs = _probabilities(qT, kT_h, n, k0, kw, scale, mask, neg_m, l_sum, s_ring, blk_ring)
                    if pending is not None:
                        _accumulate(*pending, v_block, n, dim, acc, pT_ring)
                    pending = (probs, k0, kw)
                _accumulate(*pending, v_block, n, dim, acc, pT_ring)
                ot, inv = blk_ring.next()[0], row_ring.next()[2]
                nisa.reciprocal(dst=inv[0:n], data=l_sum[0:n])
                nisa.tensor_scalar(dst=ot[0:n], data=acc[0:n], op0=nl.multiply, operand0=inv[0:n])
                for g, i0, i1, p0 in _head_segments(r0, n, seq_q):
                    store(out[b, h * group + g, i0:i1, :], ot[p0 : p0 + i1 - i0])
    return out


HEADS_PER_BANK = 4  # key tiles of 128 keys x 2-byte K^T per PSUM bank (2 KiB a partition)


def _transpose_heads(kT, kst, t0, n, ctx, kv_heads, dim):
    """K^T of every key/value head of one key tile: the heads' TensorE transposes into one PSUM bank
    and one copy out of it per HEADS_PER_BANK heads (each PSUM-to-SBUF copy pays a fixed cost)."""
    heads = kT.reshape((dim, kv_heads, ctx))
    for h0 in range(0, kv_heads, HEADS_PER_BANK):
        hn = min(HEADS_PER_BANK, kv_heads - h0)
        t = nl.ndarray((P, HEADS_PER_BANK * P), dtype=kst.dtype, buffer=nl.psum)
        for hh in range(hn):
            h = h0 + hh
            nisa.nc_transpose(dst=t[0:dim, hh * P : hh * P + n], data=kst[0:n, h * dim : (h + 1) * dim])
        src = t.reshape((P, HEADS_PER_BANK, P))[0:dim, 0:hn, 0:n]
        nisa.tensor_copy(dst=heads[:, h0 : h0 + hn, t0 : t0 + n], src=src)


def _head_segments(r0, n, seq_q):
    """(head g of the group, first query, end query, first row in the tile) of rows r0 .. r0 + n."""
    segments = []
    r = r0
    while r < r0 + n:
        g, i0 = divmod(r, seq_q)
        i1 = min(seq_q, i0 + r0 + n - r)
        segments.append((g, i0, i1, r - r0))
        r += i1 - i0
    return segments


def _query_index(r0, n, seq_q):
    """[P, 1] fp32: the query index i of each row r0 + p (row g * Sq + i): the row's number less
    Sq for every head boundary at or below it (GpSimd selects, once per kernel)."""
    idx = scratch((P, 1), nl.float32)
    nisa.iota(dst=idx[0:n], pattern=[[0, 1]], offset=r0, channel_multiplier=1)
    step = scratch((P, 1), nl.float32)
    for g in range(r0 // seq_q + 1, (r0 + n - 1) // seq_q + 1):
        # step = -Sq where r0 + p >= g * Sq, else 0
        nisa.memset(dst=step[0:n], value=float(-seq_q))
        nisa.affine_select(
            dst=step[0:n],
            pattern=[[0, 1]],
            channel_multiplier=1,
            on_true_tile=step[0:n],
            on_false_value=0.0,
            cmp_op=nl.greater_equal,
            offset=r0 - g * seq_q,
        )
        nisa.tensor_tensor(dst=idx[0:n], data1=idx[0:n], data2=step[0:n], op=nl.add)
    if r0 // seq_q:
        nisa.tensor_scalar(dst=idx[0:n], data=idx[0:n], op0=nl.add, operand0=float(-(r0 // seq_q) * seq_q))
    return idx


def _position_mask(k0, kw, limit, key_pos, flags, masked):
    """mask(s, n): key k0 + j is kept for row p when k0 + j <= limit[p] (the query's position)."""

    def mask(s, n):
        nisa.tensor_scalar(
            dst=flags[0:n, 0:kw], data=key_pos[0:n, 0:kw], op0=nl.add, operand0=float(k0), op1=nl.greater, operand1=limit[0:n]
        )
        nisa.tensor_copy_predicated(dst=s[0:n, 0:kw], src=masked[0:n, 0:kw], predicate=flags[0:n, 0:kw])

    return mask


def _expansion(t0, n, block):
    """The 0/1 matrix [blocks, n] (fp32) taking the key tile's block-table entries to its tokens:
    E[j, p] = 1 when token t0 + p is in the tile's j-th block; with the entries' (j0 + j), the
    tile's first block j0 and the tokens' positions (see _slots)."""
    j0, j1 = t0 // block, (t0 + n - 1) // block
    nb = j1 - j0 + 1
    e = scratch((P, n), nl.float32)
    nisa.memset(dst=e[0:nb], value=1.0)
    # keep t0 + p - (j0 + j) * block >= 0 and (j0 + j + 1) * block - 1 - (t0 + p) >= 0
    nisa.affine_select(
        dst=e[0:nb],
        pattern=[[1, n]],
        channel_multiplier=-block,
        on_true_tile=e[0:nb],
        on_false_value=0.0,
        cmp_op=nl.greater_equal,
        offset=t0 - j0 * block,
    )
    nisa.affine_select(
        dst=e[0:nb],
        pattern=[[-1, n]],
        channel_multiplier=block,
        on_true_tile=e[0:nb],
        on_false_value=0.0,
        cmp_op=nl.greater_equal,
        offset=(j0 + 1) * block - 1 - t0,
    )
    first = scratch((P, 1), nl.float32)
    nisa.iota(dst=first[0:nb], pattern=[[0, 1]], offset=j0, channel_multiplier=1)
    pos = scratch((P, 1), nl.float32)
    nisa.iota(dst=pos[0:n], pattern=[[0, 1]], offset=t0, channel_multiplier=1)
    return e, first, pos, j0, nb


def _slots(block_tables, b, t0, n, block, expansion, slot_ring):
    """[P, 1] int32 cache rows of sequence b's tokens t0 .. t0 + n: entry * block + (t - block's first token)."""
    e, first, pos, j0, nb = expansion
    entries, moving, slot = slot_ring.next()
    maxb = block_tables.shape[1]
    nisa.dma_copy(dst=entries[0:nb], src=block_tables.ap([[1, nb], [1, 1]], offset=b * maxb + j0))
    # moving = (entry - block number) * block
    nisa.tensor_scalar(
        dst=moving[0:nb], data=entries[0:nb], op0=nl.subtract, operand0=first[0:nb], op1=nl.multiply, operand1=float(block)
    )
    spread = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=spread[0:n], stationary=e[0:nb, 0:n], moving=moving[0:nb])
    nisa.tensor_tensor(dst=slot[0:n], data1=spread[0:n], data2=pos[0:n], op=nl.add)
    return slot


# ---- argument checks -------------------------------------------------------------------------


def _int_vector(name, array, shape):
    dt = _checks.dtype_name(array.dtype)
    if dt != "int32":
        raise _checks.NkilibError("dtype", f"{name} has dtype {dt}; the kernel takes int32")
    _checks.check_shape(name, array, shape)


def check(q, key_cache, value_cache, block_tables, seq_lens, scale=None) -> str:
    """The I/O dtype of arguments paged_attention (block_tables given) or decode_attention (None)
    takes; NkilibError for any it refuses. Host block tables and lengths are checked value by value."""
    dt = _checks.check_float("q", q)
    if len(q.shape) != 4:
        raise _checks.NkilibError("shape", f"q has shape {list(q.shape)}; expected [B, Hq, Sq, d]")
    _checks.check_rows("q", q)
    batch, heads, seq_q, dim = (int(s) for s in q.shape)
    if dim > MAX_HEAD_DIM:
        raise _checks.NkilibError("attention.head_dim", f"head dim {dim} of q; the kernel contracts over at most {MAX_HEAD_DIM}")
    paged = block_tables is not None
    name = "key_cache" if paged else "k_cache"
    layout = "[num_blocks, block_size, Hkv, d]" if paged else f"[{batch}, S_max, Hkv, d]"
    if (
        len(key_cache.shape) != 4
        or key_cache.shape[3] != dim
        or 0 in tuple(key_cache.shape)
        or (not paged and key_cache.shape[0] != batch)
    ):
        raise _checks.NkilibError("shape", f"{name} has shape {list(key_cache.shape)}; expected {layout} with d = {dim}")
    blocks, block, kv_heads = (int(s) for s in key_cache.shape[:3])
    if heads % kv_heads:
        raise _checks.NkilibError(
            "attention.heads", f"{heads} query heads over {kv_heads} key/value heads; Hq must be a multiple of Hkv"
        )
    _checks.check_shape("value_cache" if paged else "v_cache", value_cache, key_cache.shape)
    _checks.check_same_dtype(name, key_cache, dt)
    _checks.check_same_dtype("value_cache" if paged else "v_cache", value_cache, dt)
    _int_vector("seq_lens", seq_lens, (batch,))
    if paged:
        if len(block_tables.shape) != 2 or block_tables.shape[0] != batch or block_tables.shape[1] == 0:
            raise _checks.NkilibError(
                "shape", f"block_tables has shape {list(block_tables.shape)}; expected [{batch}, max_blocks]"
            )
        _int_vector("block_tables", block_tables, tuple(block_tables.shape))
        if blocks * block > MAX_SLOTS:
            raise _checks.NkilibError(
                "attention.cache",
                f"a cache of {blocks} blocks of {block} tokens has {blocks * block} "
                f"slots; the kernel indexes at most {MAX_SLOTS}",
            )
        ctx = int(block_tables.shape[1]) * block
    else:
        ctx = block
    io = _checks.DTYPE_BYTES[dt]
    tiles = (ctx + P - 1) // P
    # per partition: K^T of every kv head (ctx keys each), V (a row of every head per key tile),
    # staging, scores and probabilities, the mask's constants, acc and output
    need = (
        kv_heads * ctx * io
        + tiles * kv_heads * dim * io
        + 2 * kv_heads * dim * io
        + 2 * P * io * 2
        + KEY_BLOCK * (2 * (4 + 2 * io) + 12)
        + 2 * dim * (4 + io)
        + (tiles * P * 4 if paged else 0)
        + 2048
    )
    if need > _checks.sbuf_budget():
        raise _checks.NkilibError(
            "sbuf",
            f"{'paged' if paged else 'decode'}_attention: a context of {ctx} tokens with {kv_heads} "
            f"key/value heads of dim {dim} needs {need} bytes per SBUF partition, over the "
            f"{_checks.sbuf_budget()} available (K and V of one sequence stay on chip)",
        )
    lens = _checks.host_values(seq_lens)
    if lens is not None and len(lens) and (lens.min() < seq_q or lens.max() > ctx):
        bad = int(np.flatnonzero((lens < seq_q) | (lens > ctx))[0])
        raise _checks.NkilibError(
            "attention.seq_lens",
            f"seq_lens[{bad}] = {int(lens[bad])}; each length must be in "
            f"[Sq, {ctx}] = [{seq_q}, {ctx}] (its {seq_q} queries are in the cache, "
            f"which holds {ctx} tokens per sequence)",
        )
    table = _checks.host_values(block_tables) if paged else None
    if table is not None and (table.min() < 0 or table.max() >= blocks):
        b, j = (int(v[0]) for v in np.nonzero((table < 0) | (table >= blocks)))
        raise _checks.NkilibError(
            "attention.block_table",
            f"block_tables[{b}, {j}] = {int(table[b, j])} is outside the cache's "
            f"{blocks} blocks: every entry must be in [0, {blocks})",
        )
    return dt


def resolve_scale(q, scale) -> float:
    """The softmax scale: 1/sqrt(d) unless given."""
    return 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)


def paged_attention(q, key_cache, value_cache, block_tables, seq_lens, scale: float | None = None):
    """softmax(q k^T * scale, causal by position) v over a paged KV cache (layout in the module
    docstring); scale defaults to 1/sqrt(d). Returns [B, Hq, Sq, d] in q's dtype."""
    check(q, key_cache, value_cache, block_tables, seq_lens, scale)
    return paged_attention_kernel(q, key_cache, value_cache, block_tables, seq_lens, resolve_scale(q, scale))


def decode_attention(q, k_cache, v_cache, seq_lens, scale: float | None = None):
    """As paged_attention over a contiguous cache k_cache/v_cache [B, S_max, Hkv, d] (sequence b's
    token t at [b, t])."""
    check(q, k_cache, v_cache, None, seq_lens, scale)
    return decode_attention_kernel(q, k_cache, v_cache, seq_lens, resolve_scale(q, scale))
