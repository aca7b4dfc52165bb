"""Row softmax in both API styles, fp32 and bf16, against numpy."""

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, rand, softmax_ref


# --- NKI 0.6: max on VectorE, exp(x - max) with a fused row sum on ScalarE, 1/sum on VectorE ---
@nki.jit
def softmax_isa(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    R, C = x.shape
    for r in nl.affine_range(R // 128):
        rows = slice(r * 128, (r + 1) * 128)
        t = nl.ndarray((128, C), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[rows, :])
        neg_max = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=neg_max, op=nl.max, data=t, axis=1, negate=True)
        exps = nl.ndarray((128, C), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=exps, op=nl.exp, data=t, bias=neg_max, reduce_op=nl.add, reduce_res=total)
        inv = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=inv, data=total)
        res = nl.ndarray((128, C), x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=res, data=exps, op0=nl.multiply, operand0=inv)
        nisa.dma_copy(dst=out[rows, :], src=res)
    return out


# --- NKI 0.6 with the two-pass form: tensor_scalar subtract, exp, tensor_reduce add -------------
@nki.jit
def softmax_two_pass(x, out):
    C = x.shape[1]
    t = nl.ndarray((x.shape[0], C), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)  # the DMA casts to fp32
    row_max = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=t, axis=(1,))
    shifted = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=shifted, data=t, op0=nl.subtract, operand0=row_max, engine=nisa.vector_engine)
    exps = nl.ndarray(t.shape, nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=exps, op=nl.exp, data=shifted)
    total = nl.ndarray((x.shape[0], 1), nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=exps, axis=1)
    res = nl.ndarray(t.shape, out.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=res, data=exps, op0=nl.divide, operand0=total)
    nisa.dma_copy(dst=out, src=res)


# --- legacy: ops return tiles, rows not a multiple of 128 handled with mask= --------------------
@legacy_nki.jit
def softmax_legacy(x):
    out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
    R, C = x.shape
    ix, iy = lnl.arange(128)[:, None], lnl.arange(C)[None, :]
    for r in lnl.affine_range((R + 127) // 128):
        valid = r * 128 + ix < R
        t = lnl.load(x[r * 128 + ix, iy], mask=valid)
        m = lnl.max(t, axis=1, keepdims=True)
        e = lnl.exp(t - m)
        s = lnl.sum(e, axis=[1], keepdims=True)
        lnl.store(out[r * 128 + ix, iy], value=e / s, mask=valid)
    return out


# --- convenience: nl.softmax -------------------------------------------------------------------
@nki.jit
def softmax_nl(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.softmax(nl.load(x), axis=-1))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_isa(dtype):
    x = rand((256, 384), dtype, seed=1, low=-4, high=4)
    assert_close(softmax_isa(x), softmax_ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_two_pass_into_output(dtype):
    x = rand((100, 200), dtype, seed=2, low=-4, high=4)
    out = np.zeros_like(x)
    softmax_two_pass(x, out)
    assert_close(out, softmax_ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_legacy_masked_rows(dtype):
    x = rand((300, 128), dtype, seed=3, low=-4, high=4)
    assert_close(legacy_nki.simulate_kernel(softmax_legacy, x), softmax_ref(x), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_softmax_nl(dtype):
    x = rand((128, 1000), dtype, seed=4, low=-8, high=8)
    assert_close(softmax_nl(x), softmax_ref(x), dtype)


def test_softmax_large_logits_are_stable():
    x = rand((128, 64), seed=5, low=-1, high=1) * np.float32(500)
    assert_close(softmax_isa(np.concatenate([x, x])), softmax_ref(np.concatenate([x, x])))
