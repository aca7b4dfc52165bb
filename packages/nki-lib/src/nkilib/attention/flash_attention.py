"""Flash attention forward: ``softmax(q k^T * scale [+ causal mask]) v`` without the [S, S]
scores ever leaving the chip, for q [B, Hq, Sq, d] and k, v [B, Hkv, Sk, d] (grouped-query or
multi-query heads when Hkv < Hq), head dim d <= 128, any sequence lengths: Sq == Sk for
prefill, Sq < Sk for decoding against a (contiguous) KV cache, causal bottom-right aligned.

Per (batch, key/value head): K^T [d, S] (row blocks loaded and transposed on TensorE) and V
(keys on partitions, 128 per block) are loaded once and serve every query head of the group. Per 128-query block: q^T [d, n] is the stationary
operand; for each block of up to 512 keys (one PSUM bank of fp32 scores) TensorE computes the
scores, ScalarE scales them out of PSUM, GpSimd masks the diagonal block when causal (blocks
wholly above the diagonal are skipped), and an online softmax keeps the running max m, sum l
and fp32 output accumulator per query row (rescaled by exp(m_old - m_new) when a block raises
the max). The probabilities (I/O dtype) are transposed on TensorE 128 keys at a time and
multiplied into V, accumulating in PSUM. The output is acc / l in the I/O dtype.
"""

from __future__ import annotations

import math

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._matmul import transpose_into
from nkilib._tiling import P, Ring, row_tiles, scratch, store

KEY_BLOCK = 512  # keys per score block: one PSUM bank of fp32
MASKED = -30000.0  # scores the causal mask removes: exp underflows to exactly 0
MAX_HEAD_DIM = 128  # the contraction (partition) dim of q k^T


def _key_blocks(seq, last):
    """(k0, width) of the key blocks up to key ``last`` (exclusive)."""
    return [(k0, min(KEY_BLOCK, last - k0)) for k0 in range(0, last, KEY_BLOCK)]


@nki.jit
def flash_attention_kernel(q, k, v, causal, scale):
    batch, heads, seq_q, dim = q.shape
    kv_heads, seq = k.shape[1], k.shape[2]  # seq: keys
    offset = seq - seq_q  # causal: query i sits at position offset + i (the last query sees every key)
    group = heads // kv_heads
    out = nl.ndarray(q.shape, dtype=q.dtype, buffer=nl.shared_hbm)
    blocks = (seq + P - 1) // P
    kT = scratch((dim, seq), k.dtype)
    vt = scratch((P, blocks * dim), v.dtype)  # key block j's rows on partitions, in columns j*d .. (j+1)*d
    qT_ring = Ring(2, ((dim, P), q.dtype))
    stage_ring = Ring(2, ((P, dim), q.dtype))  # q and k rows as they come from HBM, before the transpose
    s_ring = Ring(2, ((P, KEY_BLOCK), nl.float32), ((P, KEY_BLOCK), q.dtype))
    pT_ring = Ring(2, ((P, KEY_BLOCK), q.dtype))  # a key block's P^T, 128 keys per column group
    row_ring = Ring(2, ((P, dim), nl.float32), *[((P, 1), nl.float32)] * 2)  # acc, -m, l
    blk_ring = Ring(2, ((P, dim), q.dtype), *[((P, 1), nl.float32)] * 5)  # out tile; -block max, -m new, shift, alpha, sum

    def v_block(j, rows):
        return vt[0:rows, j * dim:(j + 1) * dim]

    for b in range(batch):
        for kvh in range(kv_heads):
            for j, (k0, kn) in enumerate(row_tiles(seq)):
                (kt,) = stage_ring.next()
                nisa.dma_copy(dst=kt[0:kn], src=k[b, kvh, k0:k0 + kn, :])
                transpose_into(kT[:, k0:k0 + kn], kt[0:kn], kn, dim)
                nisa.dma_copy(dst=vt[0:kn, j * dim:(j + 1) * dim], src=v[b, kvh, k0:k0 + kn, :])
            for h in range(kvh * group, (kvh + 1) * group):
                for q0, n in row_tiles(seq_q):
                    (qT,) = qT_ring.next()
                    (qt,) = stage_ring.next()
                    nisa.dma_copy(dst=qt[0:n], src=q[b, h, q0:q0 + n, :])
                    transpose_into(qT[:, 0:n], qt[0:n], n, dim)
                    acc, neg_m, l_sum = row_ring.next()
                    nisa.memset(dst=acc[0:n], value=0.0)
                    nisa.memset(dst=neg_m[0:n], value=1e30)  # m = -1e30: the first block's alpha is 0
                    nisa.memset(dst=l_sum[0:n], value=0.0)
                    last = min(seq, offset + q0 + n) if causal else seq
                    # software pipeline: block i+1's scores and probabilities are issued before
                    # block i's P V, so TensorE, ScalarE and VectorE work on different blocks
                    pending = None
                    for k0, kw in _key_blocks(seq, last):
                        mask = _causal_mask(offset + q0, k0, kw) if causal else None
                        probs = _probabilities(qT, kT, n, k0, kw, scale, mask, neg_m, l_sum, s_ring, blk_ring)
                        if pending is not None:
                            _accumulate(*pending, v_block, n, dim, acc, pT_ring)
                        pending = (probs, k0, kw)
                    _accumulate(*pending, v_block, n, dim, acc, pT_ring)
                    ot, inv = blk_ring.next()[0], row_ring.next()[2]  # a free [P, 1] of the other set
                    nisa.reciprocal(dst=inv[0:n], data=l_sum[0:n])
                    nisa.tensor_scalar(dst=ot[0:n], data=acc[0:n], op0=nl.multiply, operand0=inv[0:n])
                    store(out[b, h, q0:q0 + n, :], ot[0:n])
    return out


def _causal_mask(q0, k0, kw):
    """mask(s, n) for _probabilities: removes the keys after each query's position (queries from position q0)."""
    if k0 + kw <= q0 + 1:  # the block reaches past no query's own position
        return None

    def mask(s, n):
        # keep key k0 + j for query q0 + p when (q0 + p) - (k0 + j) >= 0
        nisa.affine_select(dst=s[0:n, 0:kw], pattern=[[-1, kw]], channel_multiplier=1, on_true_tile=s[0:n, 0:kw],
                           on_false_value=MASKED, cmp_op=nl.greater_equal, offset=q0 - k0)

    return mask


def _probabilities(qT, kT, n, k0, kw, scale, mask, neg_m, l_sum, s_ring, blk_ring):
    """Scores of kw keys from k0 for the n queries of qT (``mask(s, n)``, if given, removes keys from the
    scaled scores s), and the online-softmax update of the running max and sum; returns (probabilities
    tile, alpha = exp(m_old - m_new)) for _accumulate."""
    s, p = s_ring.next()
    _, neg_bmax, neg_new, shift, alpha, part = blk_ring.next()
    scores = nl.ndarray((P, KEY_BLOCK), dtype=nl.float32, buffer=nl.psum)
    nisa.nc_matmul(dst=scores[0:n, 0:kw], stationary=qT[:, 0:n], moving=kT[:, k0:k0 + kw])
    nisa.activation(dst=s[0:n, 0:kw], op=nl.copy, data=scores[0:n, 0:kw], scale=float(scale))
    if mask is not None:
        mask(s, n)
    nisa.tensor_reduce(dst=neg_bmax[0:n], op=nl.max, data=s[0:n, 0:kw], axis=1, negate=True)
    nisa.tensor_tensor(dst=neg_new[0:n], data1=neg_m[0:n], data2=neg_bmax[0:n], op=nl.minimum)
    nisa.tensor_tensor(dst=shift[0:n], data1=neg_new[0:n], data2=neg_m[0:n], op=nl.subtract)
    nisa.tensor_copy(dst=neg_m[0:n], src=neg_new[0:n])
    nisa.activation(dst=alpha[0:n], op=nl.exp, data=shift[0:n])
    nisa.activation(dst=p[0:n, 0:kw], op=nl.exp, data=s[0:n, 0:kw], bias=neg_new[0:n], reduce_op=nl.add,
                    reduce_res=part[0:n])
    nisa.activation(dst=l_sum[0:n], op=nl.copy, data=l_sum[0:n], scale=alpha[0:n], bias=part[0:n])
    return p, alpha


def _accumulate(probs, k0, kw, v_block, n, dim, acc, pT_ring):
    """acc = acc * alpha + P V for one key block (``v_block(j, rows)``: key tile j's V rows, keys on
    partitions). P is transposed on TensorE 128 keys at a time,
    all transposes first into one PSUM bank, brought to SBUF in one copy when the block is whole,
    then the matmuls: alternating transpose / copy / matmul would pay an engine-to-engine
    hand-off (~0.2 us) at every step."""
    p, alpha = probs
    subs = [(c0, min(P, kw - c0)) for c0 in range(0, kw, P)]
    pT_psum = nl.ndarray((P, KEY_BLOCK), dtype=p.dtype, buffer=nl.psum)
    (pT,) = pT_ring.next()
    for c0, cw in subs:
        nisa.nc_transpose(dst=pT_psum[0:cw, c0:c0 + n], data=p[0:n, c0:c0 + cw])
    if n == P and all(cw == P for _, cw in subs):
        nisa.tensor_copy(dst=pT[:, 0:kw], src=pT_psum[:, 0:kw])
    else:
        for c0, cw in subs:
            nisa.tensor_copy(dst=pT[0:cw, c0:c0 + n], src=pT_psum[0:cw, c0:c0 + n])
    pv = nl.ndarray((P, dim), dtype=nl.float32, buffer=nl.psum)
    for c0, cw in subs:
        j = (k0 + c0) // P
        nisa.nc_matmul(dst=pv[0:n, :], stationary=pT[0:cw, c0:c0 + n], moving=v_block(j, cw))
    nisa.scalar_tensor_tensor(dst=acc[0:n], data=acc[0:n], op0=nl.multiply, operand0=alpha[0:n], op1=nl.add,
                              operand1=pv[0:n, :])


def check(q, k, v, causal=False, scale=None) -> str:
    """The dtype of arguments flash_attention takes; NkilibError for any it refuses."""
    dt = _checks.check_float("q", q)
    if len(q.shape) != 4:
        raise _checks.NkilibError("shape", f"q has shape {list(q.shape)}; expected [B, Hq, S, d]")
    batch, heads, seq_q, dim = (int(s) for s in q.shape)
    _checks.check_rows("q", q)
    if dim > MAX_HEAD_DIM:
        raise _checks.NkilibError("attention.head_dim", f"head dim {dim} of q; the kernel contracts over at most {MAX_HEAD_DIM}")
    if len(k.shape) != 4 or k.shape[0] != batch or k.shape[3] != dim or k.shape[2] == 0:
        raise _checks.NkilibError("shape", f"k has shape {list(k.shape)}; expected [{batch}, Hkv, Sk, {dim}]")
    seq = int(k.shape[2])
    if causal and seq_q > seq:
        raise _checks.NkilibError("attention.causal", f"causal with {seq_q} queries over {seq} keys: query i sits at "
                                                      "position Sk - Sq + i, so the first queries would see no key")
    kv_heads = int(k.shape[1])
    if kv_heads == 0 or heads % kv_heads:
        raise _checks.NkilibError("attention.heads", f"{heads} query heads over {kv_heads} key/value heads; Hq must be a multiple of Hkv")
    _checks.check_shape("v", v, k.shape)
    _checks.check_same_dtype("k", k, dt)
    _checks.check_same_dtype("v", v, dt)
    io = _checks.DTYPE_BYTES[dt]
    blocks = (seq + P - 1) // P
    # per partition: K^T (S keys), V (d per key block), q^T, scores and probabilities, acc, output
    need = seq * io + blocks * dim * io + 2 * (P * io + KEY_BLOCK * (4 + 2 * io) + dim * (4 + io)) + 1024
    if need > _checks.sbuf_budget():
        raise _checks.NkilibError("sbuf", f"flash_attention: sequence {seq} with head dim {dim} needs {need} bytes per SBUF "
                                          f"partition for K and V, over the {_checks.sbuf_budget()} available")
    return dt


def flash_attention(q, k, v, causal: bool = False, scale: float | None = None):
    """softmax(q k^T * scale) v per head (scale defaults to 1/sqrt(d)). q [B, Hq, Sq, d], k/v
    [B, Hkv, Sk, d] in the same dtype. causal masks keys after each query's position, query i
    sitting at position Sk - Sq + i (the queries are the last Sq positions: prefill when
    Sq == Sk, decoding or chunked prefill against a KV cache when Sq < Sk)."""
    check(q, k, v, causal, scale)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale)
    return flash_attention_kernel(q, k, v, bool(causal), scale)
