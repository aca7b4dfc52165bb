"""MoE router: each token's top-k experts from its router logits [T, E], with softmax gating
(probabilities over all experts, Mixtral/Qwen-MoE) or sigmoid gating (independent scores,
DeepSeek-V3), optionally renormalized over the k chosen. Returns (weights [T, k] fp32, expert
indices [T, k] int32), highest weight first; equal scores keep the lower expert first.

Tokens go on the partitions (128 per tile, the next tile's logits prefetched). The scores are
computed in fp32 (softmax: ScalarE's exp with the row sum, times the reciprocal; sigmoid on
ScalarE); VectorE's max8 takes the 8 largest per token and nc_find_index8 their experts, and for
k > 8 nc_match_replace8 removes the ones found before the next round.
"""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl

from nkilib import _checks
from nkilib._tiling import P, Ring, loader, prefetched, store

GATINGS = ("softmax", "sigmoid")
REMOVED = -1.0  # below every score (softmax and sigmoid scores are >= 0)
MAX_EXPERTS = 16_384  # what max8 searches in one instruction


@nki.jit
def router_topk_kernel(logits, k, gating, normalize):
    tokens, experts = logits.shape
    width = max(experts, 8)  # max8 searches at least 8 elements: pad with REMOVED
    rounds = (k + 7) // 8
    weights = nl.ndarray((tokens, k), dtype=nl.float32, buffer=nl.shared_hbm)
    indices = nl.ndarray((tokens, k), dtype=nl.int32, buffer=nl.shared_hbm)
    load = loader(logits)
    ring = Ring(
        2,
        ((P, width), nl.float32),
        ((P, rounds * 8), nl.float32),
        ((P, rounds * 8), nl.uint32),
        ((P, k), nl.int32),
        ((P, k), nl.float32),
        *[((P, 1), nl.float32)] * 3,
    )
    for (p0, n), (x,) in prefetched(tokens, load):
        scores, vals, found, idx, wts, neg_max, total, inv = ring.next()
        if width > experts:
            nisa.memset(dst=scores[0:n, experts:width], value=REMOVED)
        if gating == "softmax":
            nisa.tensor_reduce(dst=neg_max[0:n], op=nl.max, data=x[0:n], axis=1, negate=True)
            nisa.activation(
                dst=scores[0:n, 0:experts], op=nl.exp, data=x[0:n], bias=neg_max[0:n], reduce_op=nl.add, reduce_res=total[0:n]
            )
            nisa.reciprocal(dst=inv[0:n], data=total[0:n])
            nisa.tensor_scalar(dst=scores[0:n, 0:experts], data=scores[0:n, 0:experts], op0=nl.multiply, operand0=inv[0:n])
        else:
            nisa.activation(dst=scores[0:n, 0:experts], op=nl.sigmoid, data=x[0:n])
        for r in range(rounds):
            v8, i8 = vals[0:n, r * 8 : (r + 1) * 8], found[0:n, r * 8 : (r + 1) * 8]
            nisa.max8(dst=v8, src=scores[0:n])
            nisa.nc_find_index8(dst=i8, data=scores[0:n], vals=v8)
            if r + 1 < rounds:
                nisa.nc_match_replace8(dst=scores[0:n], data=scores[0:n], vals=v8, imm=REMOVED)
        nisa.tensor_copy(dst=idx[0:n], src=found[0:n, 0:k])
        if normalize:
            nisa.tensor_reduce(dst=total[0:n], op=nl.add, data=vals[0:n, 0:k], axis=1)
            nisa.reciprocal(dst=inv[0:n], data=total[0:n])
            nisa.tensor_scalar(dst=wts[0:n], data=vals[0:n, 0:k], op0=nl.multiply, operand0=inv[0:n])
        else:
            nisa.tensor_copy(dst=wts[0:n], src=vals[0:n, 0:k])
        store(weights[p0 : p0 + n, :], wts[0:n])
        store(indices[p0 : p0 + n, :], idx[0:n])
    return weights, indices


def check(logits, k, gating="softmax", normalize=False) -> str:
    dt = _checks.check_float("logits", logits)
    if len(logits.shape) != 2:
        raise _checks.NkilibError("shape", f"logits has shape {list(logits.shape)}; expected [tokens, experts]")
    _checks.check_rows("logits", logits)
    experts = int(logits.shape[1])
    if gating not in GATINGS:
        raise _checks.NkilibError("moe.gating", f"gating={gating!r}; expected one of {GATINGS}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise _checks.NkilibError("moe.top_k", f"top_k={k!r}; expected an integer >= 1")
    if k > experts:
        raise _checks.NkilibError("moe.top_k", f"top_k={k} is larger than the {experts} experts")
    if experts > MAX_EXPERTS:
        raise _checks.NkilibError("moe.experts", f"{experts} experts; max8 searches at most {MAX_EXPERTS} per token")
    _checks.check_sbuf("experts", experts, _bytes_per_expert(_checks.DTYPE_BYTES[dt]), "router_topk")
    return dt


def _bytes_per_expert(io):
    return 2 * io + 2 * 4  # two logits tiles (prefetch) and two fp32 score tiles, per expert


def max_experts(dtype) -> int:
    """The most experts router_topk takes for logits of ``dtype``."""
    io = _checks.DTYPE_BYTES[_checks.dtype_name(dtype)]
    return min(MAX_EXPERTS, _checks.max_width(_bytes_per_expert(io)))


def router_topk(logits, k: int, gating: str = "softmax", normalize: bool = False):
    """(weights [T, k] fp32, experts [T, k] int32) of each token's k highest-scoring experts."""
    check(logits, k, gating, normalize)
    return router_topk_kernel(logits, k, gating, bool(normalize))
