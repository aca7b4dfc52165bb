"""RMSNorm in both API styles, fp32 and bf16, over row counts that are not a multiple of 128."""

import math

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, rand, rmsnorm_ref


# --- NKI 0.6 (after NKIPy's hand-written kernel): valid rows only, sum of squares in PSUM ------
@nki.jit
def rmsnorm_isa(input_tensor, weight, eps):
    output = nl.ndarray(input_tensor.shape, dtype=input_tensor.dtype, buffer=nl.shared_hbm)
    num_rows, hidden = input_tensor.shape
    # the weight row on every partition, straight from HBM (a partition-broadcast DMA)
    g_bcast = nl.ndarray((128, hidden), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_bcast, src=weight.reshape((1, hidden)).broadcast(0, 128))
    for i in nl.affine_range((num_rows + 127) // 128):
        p0 = i * 128
        n = min(128, num_rows - p0)
        a = nl.ndarray((128, hidden), dtype=input_tensor.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a[0:n, :], src=input_tensor[p0:p0 + n, :])
        t = nl.ndarray((128, hidden), dtype=input_tensor.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t[0:n], data1=a[0:n], data2=a[0:n], op=nl.multiply)
        sq_sum = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_reduce(dst=sq_sum[0:n], data=t[0:n], op=nl.add, axis=1)
        s = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=s[0:n], data=sq_sum[0:n], op0=nl.multiply, operand0=1.0 / hidden, op1=nl.add, operand1=eps)
        nisa.activation(dst=s[0:n], data=s[0:n], op=nl.rsqrt)
        nisa.tensor_scalar(dst=t[0:n], data=a[0:n], operand0=s[0:n], op0=nl.multiply)
        nisa.tensor_tensor(dst=t[0:n], data1=t[0:n], data2=g_bcast[0:n], op=nl.multiply)
        nisa.dma_copy(dst=output[p0:p0 + n, :], src=t[0:n, :])
    return output


# --- NKIPy's weight broadcast: nc_stream_shuffle from one partition to each 32-partition quadrant
@nki.jit
def broadcast_by_shuffle(weight):
    hidden = weight.shape[0]
    out = nl.ndarray((128, hidden), dtype=weight.dtype, buffer=nl.shared_hbm)
    g_tile = nl.ndarray((1, hidden), dtype=weight.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_tile, src=weight.reshape((1, hidden)))
    g_bcast = nl.ndarray((128, hidden), dtype=weight.dtype, buffer=nl.sbuf)
    for q in range(4):
        nisa.nc_stream_shuffle(src=g_tile[0:1, :], dst=g_bcast[q * 32:(q + 1) * 32, :], shuffle_mask=[0] * 32)
    nisa.dma_copy(dst=out, src=g_bcast)
    return out


# --- legacy (neuronxcc.nki 2.26 tutorial): arange indexing, mask= for the last partial tile ----
@legacy_nki.jit
def rmsnorm_legacy(a_tensor, g_tensor):
    out_tensor = lnl.ndarray(a_tensor.shape, dtype=a_tensor.dtype, buffer=lnl.shared_hbm)
    assert a_tensor.shape[1] == g_tensor.shape[0]
    ix = lnl.arange(128)[:, None]
    iw = lnl.arange(1)[:, None]
    iy = lnl.arange(a_tensor.shape[1])[None, :]
    num_rows = a_tensor.shape[0]
    g_tile = lnl.load(g_tensor.reshape((1, g_tensor.shape[0]))[iw, iy])
    for i in lnl.affine_range(math.ceil(a_tensor.shape[0] / 128)):
        a_tile = lnl.load(a_tensor[i * 128 + ix, iy], mask=(i * 128 + ix < num_rows))
        in_square = lnl.square(a_tile)
        square_sum = lnl.sum(in_square, axis=[1])
        mean = square_sum / a_tensor.shape[1]
        rms_reciprocal = lnl.rsqrt(mean)
        out_tile = lnl.multiply(a_tile, rms_reciprocal)
        g_bcast = g_tile.broadcast_to((128, g_tensor.shape[0]))
        out_tile[...] = lnl.multiply(out_tile, g_bcast, mask=(i * 128 + ix < num_rows))
        lnl.store(out_tensor[i * 128 + ix, iy], value=out_tile, mask=(i * 128 + ix < num_rows))
    return out_tensor


# --- convenience: nl.rms_norm ----------------------------------------------------------------
@nki.jit
def rmsnorm_nl(x, w):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(x.shape[0] // 128):
        t = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.rms_norm(t, w, axis=1, n=x.shape[1], epsilon=1e-6))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_isa_partial_last_tile(dtype):
    x, g = rand((300, 256), dtype, seed=1), rand((256,), dtype, seed=2)
    assert_close(rmsnorm_isa(x, g, 1e-6), rmsnorm_ref(x, g), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_legacy_masked(dtype):
    x, g = rand((250, 512), dtype, seed=3), rand((512,), dtype, seed=4)
    # the tutorial leaves eps out: rsqrt(mean(x^2))
    assert_close(legacy_nki.simulate_kernel(rmsnorm_legacy, x, g), rmsnorm_ref(x, g, eps=0.0), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_rmsnorm_nl(dtype):
    x, g = rand((256, 384), dtype, seed=5), rand((384,), dtype, seed=6)
    assert_close(rmsnorm_nl(x, g), rmsnorm_ref(x, g), dtype)


def test_rmsnorm_legacy_rows_multiple_of_128_need_no_mask_clipping():
    x, g = rand((256, 128), seed=7), rand((128,), seed=8)
    assert_close(rmsnorm_legacy(x, g), rmsnorm_ref(x, g, eps=0.0))


def test_weight_broadcast_by_stream_shuffle():
    g = rand((256,), seed=9)
    np.testing.assert_array_equal(broadcast_by_shuffle(g), np.broadcast_to(g, (128, 256)))
