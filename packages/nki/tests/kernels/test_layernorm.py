"""LayerNorm in both API styles, fp32 and bf16, against numpy."""

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, layernorm_ref, rand

EPS = 1e-5


# --- NKI 0.6: bn_stats per 512-element chunk, one bn_aggr, then (x - mean) * rstd * gamma + beta
@nki.jit
def layernorm_isa(x, gamma, beta):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    R, H = x.shape
    FMAX = nl.tile_size.bn_stats_fmax
    chunks = (H + FMAX - 1) // FMAX
    g = nl.ndarray((128, H), dtype=gamma.dtype, buffer=nl.sbuf)
    b = nl.ndarray((128, H), dtype=beta.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g, src=gamma.reshape((1, H)).broadcast(0, 128))
    nisa.dma_copy(dst=b, src=beta.reshape((1, H)).broadcast(0, 128))
    for r in nl.affine_range(R // 128):
        t = nl.ndarray((128, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x[r * 128:(r + 1) * 128, :])
        stats = nl.ndarray((128, 6 * chunks), dtype=nl.float32, buffer=nl.sbuf)
        for c in nl.affine_range(chunks):
            hi = min(H, (c + 1) * FMAX)
            nisa.bn_stats(dst=stats[:, c * 6:(c + 1) * 6], data=t[:, c * FMAX:hi])
        mean_var = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mean_var, data=stats)
        rstd = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=rstd, op=nl.rsqrt, data=mean_var[:, 1:2], bias=EPS)
        norm = nl.ndarray((128, H), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=norm, data=t, op0=nl.subtract, operand0=mean_var[:, 0:1], op1=nl.multiply, operand1=rstd)
        res = nl.ndarray((128, H), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=norm, data1=norm, data2=g, op=nl.multiply)
        nisa.tensor_tensor(dst=res, data1=norm, data2=b, op=nl.add)
        nisa.dma_copy(dst=out[r * 128:(r + 1) * 128, :], src=res)
    return out


# --- NKI 0.6 convenience: nl.mean / nl.var / nl.rsqrt and a [1, H] row broadcast --------------
@nki.jit
def layernorm_nl(x, gamma, beta, out):
    g = nl.load(gamma.reshape((1, x.shape[1])))
    b = nl.load(beta.reshape((1, x.shape[1])))
    for r in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[r * 128:(r + 1) * 128, :])
        mean = nl.mean(t, axis=1, keepdims=True)
        var = nl.var(t, axis=1, keepdims=True)
        rstd = nl.rsqrt(nl.add(var, EPS))
        y = nl.multiply(nl.subtract(t, mean), rstd)
        y = nl.add(nl.multiply(y, nl.broadcast_to(g, (128, x.shape[1]))), nl.broadcast_to(b, (128, x.shape[1])))
        nl.store(out[r * 128:(r + 1) * 128, :], value=y)


# --- legacy: nisa.bn_stats / bn_aggr returning tiles, operators, mgrid indexing ---------------
@legacy_nki.jit
def layernorm_legacy(x, gamma, beta):
    out = lnl.ndarray(x.shape, dtype=x.dtype, buffer=lnl.shared_hbm)
    R, H = x.shape
    i_p, i_f = lnl.mgrid[0:128, 0:H]
    i_w = lnl.arange(1)[:, None]
    g = lnl.load(gamma.reshape((1, H))[i_w, i_f]).broadcast_to((128, H))
    b = lnl.load(beta.reshape((1, H))[i_w, i_f]).broadcast_to((128, H))
    for r in lnl.affine_range(R // 128):
        t = lnl.load(x[r * 128 + i_p, i_f])
        stats = lisa.bn_stats(t, dtype=lnl.float32)
        mean_var = lisa.bn_aggr(stats)
        mean = mean_var[:, 0:1]
        rstd = lnl.rsqrt(mean_var[:, 1:2] + EPS)
        y = (t - mean) * rstd * g + b
        lnl.store(out[r * 128 + i_p, i_f], value=y)
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_isa_bn_stats_chunks(dtype):
    x, g, b = rand((256, 1000), dtype, seed=1, low=-3, high=5), rand((1000,), dtype, seed=2), rand((1000,), dtype, seed=3)
    assert_close(layernorm_isa(x, g, b), layernorm_ref(x, g, b, EPS), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_nl_into_output(dtype):
    x, g, b = rand((128, 320), dtype, seed=4, low=-2, high=3), rand((320,), dtype, seed=5), rand((320,), dtype, seed=6)
    out = np.empty_like(x)
    layernorm_nl(x, g, b, out)
    assert_close(out, layernorm_ref(x, g, b, EPS), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_layernorm_legacy(dtype):
    x, g, b = rand((256, 512), dtype, seed=7, low=-1, high=2), rand((512,), dtype, seed=8), rand((512,), dtype, seed=9)
    assert_close(legacy_nki.simulate_kernel(layernorm_legacy, x, g, b), layernorm_ref(x, g, b, EPS), dtype)
