"""Causal attention for one head, both API styles, fp32 and bf16, against numpy.

q, k, v are [S, d] with the sequence on rows. Scores for a 128-query block are one matmul
(K = d on partitions), the causal mask is an affine select on GpSimd, softmax runs on
Vector/Scalar, and probabilities are transposed on TensorE for the second matmul, which
accumulates over 128-key blocks in PSUM.
"""

import math

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, causal_attention_ref, rand

NEG = -30000.0  # masked scores: exp underflows to exactly 0


# --- NKI 0.6 -----------------------------------------------------------------------------------
@nki.jit
def causal_attention(q, k, v):
    S, d = q.shape
    out = nl.ndarray((S, d), dtype=q.dtype, buffer=nl.shared_hbm)
    scale = 1.0 / math.sqrt(d)
    qT = nl.ndarray((d, S), dtype=q.dtype, buffer=nl.sbuf)
    kT = nl.ndarray((d, S), dtype=k.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=qT, src=q.T)
    nisa.dma_copy(dst=kT, src=k.T)
    for i in nl.affine_range(S // 128):
        keys = (i + 1) * 128  # causal: query block i sees keys [0, keys)
        scores = nl.ndarray((128, keys), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=scores, stationary=qT[:, i * 128:(i + 1) * 128], moving=kT[:, 0:keys])
        scaled = nl.ndarray((128, keys), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=scaled, op=nl.copy, data=scores, scale=scale)
        # keep key j for query p of this block when (i * 128 + p) - j >= 0
        masked = nl.ndarray((128, keys), dtype=nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=masked, pattern=[[-1, keys]], channel_multiplier=1, on_true_tile=scaled,
                           on_false_value=NEG, cmp_op=nl.greater_equal, offset=i * 128)
        neg_max = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.max, data=masked, axis=1, negate=True)
        probs = nl.ndarray((128, keys), dtype=q.dtype, buffer=nl.sbuf)
        row_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=probs, op=nl.exp, data=masked, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
        acc = nl.ndarray((128, d), dtype=nl.float32, buffer=nl.psum)
        for j in nl.affine_range(i + 1):
            pT_psum = nl.ndarray((128, 128), dtype=q.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=pT_psum, data=probs[:, j * 128:(j + 1) * 128])
            pT = nl.ndarray((128, 128), dtype=q.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=pT, src=pT_psum)
            v_tile = nl.ndarray((128, d), dtype=v.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=v_tile, src=v[j * 128:(j + 1) * 128, :])
            nisa.nc_matmul(dst=acc, stationary=pT, moving=v_tile)
        inv = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=row_sum)
        res = nl.ndarray((128, d), dtype=q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=acc, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[i * 128:(i + 1) * 128, :], src=res)
    return out


# --- legacy: nl.matmul, affine_select with an index predicate, psum += over key blocks ---------
@legacy_nki.jit
def causal_attention_legacy(q, k, v):
    S, d = q.shape
    out = lnl.ndarray((S, d), dtype=q.dtype, buffer=lnl.shared_hbm)
    i_d, i_s = lnl.mgrid[0:d, 0:S]
    qT = lnl.load_transpose2d(q)
    kT = lnl.load_transpose2d(k)
    i_q, i_k = lnl.mgrid[0:128, 0:S]
    for i in lnl.affine_range(S // 128):
        scores = lnl.matmul(qT[i_d, i * 128 + lnl.arange(128)[None, :]], kT[i_d, i_s], transpose_x=True)
        scaled = lnl.multiply(scores, 1.0 / math.sqrt(d), dtype=lnl.float32)
        masked = lisa.affine_select(pred=(i * 128 + i_q >= i_k), on_true_tile=scaled, on_false_value=NEG)
        row_max = lnl.max(masked, axis=[1], keepdims=True)
        e = lnl.exp(masked - row_max)
        probs = lnl.multiply(e, lnl.reciprocal(lnl.sum(e, axis=[1], keepdims=True)), dtype=q.dtype)
        acc = lnl.zeros((128, d), dtype=lnl.float32, buffer=lnl.psum)
        for j in lnl.affine_range(S // 128):
            v_tile = lnl.load(v[j * 128:(j + 1) * 128, :])
            acc += lnl.matmul(probs[:, j * 128:(j + 1) * 128], v_tile)
        lnl.store(out[i * 128:(i + 1) * 128, :], value=acc)
    return out


def _tol(dtype):
    # bf16 probabilities and values: each product carries bf16 input roundings.
    return {} if dtype == np.float32 else {"rtol": 4e-2, "atol": 4e-2}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("S,d", [(256, 64), (384, 128)])
def test_causal_attention(S, d, dtype):
    q, k, v = (rand((S, d), dtype, seed=s) for s in (1, 2, 3))
    assert_close(causal_attention(q, k, v), causal_attention_ref(q, k, v), dtype, **_tol(dtype))


@pytest.mark.parametrize("dtype", DTYPES)
def test_causal_attention_legacy(dtype):
    q, k, v = (rand((256, 64), dtype, seed=s) for s in (4, 5, 6))
    assert_close(legacy_nki.simulate_kernel(causal_attention_legacy, q, k, v), causal_attention_ref(q, k, v), dtype,
                 **_tol(dtype))


def test_first_query_sees_only_the_first_key():
    q, k, v = (rand((128, 32), seed=s) for s in (7, 8, 9))
    out = causal_attention(q, k, v)
    np.testing.assert_allclose(out[0], v[0], rtol=1e-6, atol=1e-6)
