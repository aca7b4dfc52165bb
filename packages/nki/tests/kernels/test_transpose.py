"""2-D transpose in both API styles (TensorE, VectorE 32x32, DMA), fp32 and bf16: bit-exact."""

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, rand


# --- NKI 0.6: 128x128 blocks through TensorE into PSUM, evacuated by VectorE -----------------
@nki.jit
def transpose_tensor_engine(x):
    M, N = x.shape
    out = nl.ndarray((N, M), dtype=x.dtype, buffer=nl.shared_hbm)
    for i in nl.affine_range(M // 128):
        for j in nl.affine_range(N // 128):
            t = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 128:(i + 1) * 128, j * 128:(j + 1) * 128])
            tp = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.psum)
            nisa.nc_transpose(dst=tp, data=t)
            ts = nl.ndarray((128, 128), dtype=x.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=ts, src=tp)
            nisa.dma_copy(dst=out[j * 128:(j + 1) * 128, i * 128:(i + 1) * 128], src=ts)
    return out


# --- NKI 0.6: 32x32 blocks on VectorE, SBUF to SBUF, into an output parameter -----------------
@nki.jit
def transpose_vector_engine(x, out):
    M, N = x.shape
    for i in range(M // 32):
        for j in range(N // 32):
            t = nl.ndarray((32, 32), dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x[i * 32:(i + 1) * 32, j * 32:(j + 1) * 32])
            tt = nl.ndarray((32, 32), dtype=x.dtype, buffer=nl.sbuf)
            nisa.nc_transpose(dst=tt, data=t, engine=nisa.vector_engine)
            nisa.dma_copy(dst=out[j * 32:(j + 1) * 32, i * 32:(i + 1) * 32], src=tt)


# --- NKI 0.6: the DMA engines transpose on the way in -------------------------------------------
@nki.jit
def transpose_dma(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_transpose(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


# --- NKI 0.6: a transposed HBM view (.T) read by a strided DMA ---------------------------------
@nki.jit
def transpose_strided_view(x):
    out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x.T)
    nisa.dma_copy(dst=out, src=t)
    return out


# --- legacy: nl.transpose (PSUM result), nisa.nc_transpose returning a tile, load_transpose2d --
@legacy_nki.jit
def transpose_legacy(x):
    M, N = x.shape
    out = lnl.ndarray((N, M), dtype=x.dtype, buffer=lnl.shared_hbm)
    i_p, i_f = lnl.mgrid[0:128, 0:128]
    for i in lnl.affine_range(M // 128):
        for j in lnl.affine_range(N // 128):
            t = lnl.load(x[i * 128 + i_p, j * 128 + i_f])
            tp = lnl.transpose(t) if (i + j) % 2 == 0 else lisa.nc_transpose(t)
            lnl.store(out[j * 128 + i_p, i * 128 + i_f], value=lnl.copy(tp))
    return out


@legacy_nki.jit
def load_transposed_legacy(x):
    out = lnl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=lnl.shared_hbm)
    lnl.store(out, value=lnl.load_transpose2d(x))
    return out


def _bits(a):
    return np.asarray(a).view(np.uint32 if a.dtype.itemsize == 4 else np.uint16)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_tensor_engine(dtype):
    x = rand((256, 384), dtype, seed=1)
    np.testing.assert_array_equal(_bits(transpose_tensor_engine(x)), _bits(np.ascontiguousarray(x.T)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_vector_engine(dtype):
    x = rand((64, 96), dtype, seed=2)
    out = np.zeros((96, 64), dtype)
    transpose_vector_engine(x, out)
    np.testing.assert_array_equal(_bits(out), _bits(np.ascontiguousarray(x.T)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("kernel", [transpose_dma, transpose_strided_view], ids=["dma_transpose", "strided_view"])
def test_transpose_dma(kernel, dtype):
    x = rand((100, 128), dtype, seed=3)
    np.testing.assert_array_equal(_bits(kernel(x)), _bits(np.ascontiguousarray(x.T)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_legacy(dtype):
    x = rand((256, 256), dtype, seed=4)
    np.testing.assert_array_equal(_bits(legacy_nki.simulate_kernel(transpose_legacy, x)), _bits(np.ascontiguousarray(x.T)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_load_transpose2d_legacy(dtype):
    x = rand((64, 128), dtype, seed=5)
    np.testing.assert_array_equal(_bits(load_transposed_legacy(x)), _bits(np.ascontiguousarray(x.T)))


def test_transpose_keeps_nan_and_inf_bits():
    x = rand((128, 128), seed=6)
    x[0, 1], x[5, 7], x[9, 2] = np.nan, np.inf, -np.inf
    np.testing.assert_array_equal(_bits(transpose_tensor_engine(x)), _bits(np.ascontiguousarray(x.T)))
