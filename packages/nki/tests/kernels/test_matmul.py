"""Tiled matmul accumulating over K in PSUM, both API styles, fp32 and bf16 inputs."""

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.isa as lisa
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, f32, rand


# --- NKI 0.6: lhsT[K, M] x rhs[K, N]; nc_matmul's accumulate=None overwrites on the first
# write to a PSUM tile and accumulates afterwards, so the K loop sums into one bank. -----------
@nki.jit
def matmul_tiled(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    TILE_K, TILE_M, TILE_N = nl.tile_size.pmax, nl.tile_size.gemm_stationary_fmax, nl.tile_size.gemm_moving_fmax
    result = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            res_psum = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(K // TILE_K):
                lhsT_tile = nl.ndarray((TILE_K, TILE_M), dtype=lhsT.dtype, buffer=nl.sbuf)
                rhs_tile = nl.ndarray((TILE_K, TILE_N), dtype=rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhsT_tile, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=rhs_tile, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=res_psum, stationary=lhsT_tile, moving=rhs_tile)
            res_sb = nl.ndarray((TILE_M, TILE_N), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res_sb, src=res_psum)
            nisa.dma_copy(dst=result[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=res_sb)
    return result


# --- NKI 0.6, explicit accumulate flags, output parameter, result cast to the output dtype -----
@nki.jit
def matmul_explicit_accumulate(lhsT, rhs, out):
    K, M = lhsT.shape
    N = rhs.shape[1]
    acc = nl.ndarray((M, N), nl.float32, buffer=nl.psum)
    for k in range(K // 128):
        a = nl.ndarray((128, M), lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b, accumulate=k > 0)
    res = nl.ndarray((M, N), out.dtype, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)


# --- legacy: psum[...] += nl.matmul(a, b, transpose_x=True), block loops, nl.par_dim ---------
@legacy_nki.jit
def matmul_legacy(lhsT, rhs):
    K, M = lhsT.shape
    _, N = rhs.shape
    result = lnl.ndarray((M, N), dtype=lhsT.dtype, buffer=lnl.shared_hbm)
    for m in lnl.affine_range(M // 128):
        for n in lnl.affine_range(N // 512):
            res_psum = lnl.zeros((lnl.par_dim(128), 512), lnl.float32, buffer=lnl.psum)
            for k in lnl.affine_range(K // 128):
                lhsT_tile = lnl.load(lhsT[k * 128:(k + 1) * 128, m * 128:(m + 1) * 128])
                rhs_tile = lnl.load(rhs[k * 128:(k + 1) * 128, n * 512:(n + 1) * 512])
                res_psum[...] += lnl.matmul(lhsT_tile, rhs_tile, transpose_x=True)
            res_sb = lnl.copy(res_psum, dtype=result.dtype)
            lnl.store(result[m * 128:(m + 1) * 128, n * 512:(n + 1) * 512], value=res_sb)
    return result


# --- legacy: x[M, K] @ y[K, N] with nl.matmul transposing x on TensorE itself ------------------
@legacy_nki.jit
def matmul_legacy_untransposed(x, y):
    out = lnl.ndarray((x.shape[0], y.shape[1]), dtype=lnl.float32, buffer=lnl.shared_hbm)
    acc = lnl.zeros((x.shape[0], y.shape[1]), lnl.float32, buffer=lnl.psum)
    for k in lnl.sequential_range(x.shape[1] // 128):
        xt = lnl.load(x[:, k * 128:(k + 1) * 128])
        yt = lnl.load(y[k * 128:(k + 1) * 128, :])
        acc += lnl.matmul(xt, yt)
    lnl.store(out, value=acc)
    return out


# --- legacy ISA style: nisa.nc_matmul returns a PSUM tile -----------------------------------------
@legacy_nki.jit
def matmul_legacy_isa(lhsT, rhs):
    out = lnl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=lnl.float32, buffer=lnl.shared_hbm)
    a = lnl.load(lhsT)
    b = lnl.load(rhs)
    res = lisa.nc_matmul(a, b)
    lnl.store(out, value=lnl.copy(res))
    return out


def _ref(lhsT, rhs):
    return f32(lhsT).T @ f32(rhs)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_tiled_accumulates_over_k(dtype):
    lhsT, rhs = rand((512, 256), dtype, seed=1), rand((512, 1024), dtype, seed=2)
    # PSUM accumulates in fp32: the result is the fp32 product of the (rounded) inputs.
    assert_close(matmul_tiled(lhsT, rhs), _ref(lhsT, rhs), np.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_explicit_accumulate_into_output(dtype):
    lhsT, rhs = rand((384, 128), dtype, seed=3), rand((384, 256), dtype, seed=4)
    out = np.zeros((128, 256), dtype)
    matmul_explicit_accumulate(lhsT, rhs, out)
    assert_close(out, _ref(lhsT, rhs), dtype, rtol=1e-4 if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_legacy_psum_plus_equals(dtype):
    lhsT, rhs = rand((256, 256), dtype, seed=5), rand((256, 512), dtype, seed=6)
    out = legacy_nki.simulate_kernel(matmul_legacy, lhsT, rhs)
    assert out.dtype == np.dtype(dtype)
    assert_close(out, _ref(lhsT, rhs), dtype, rtol=1e-4 if dtype == np.float32 else None)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_legacy_transposes_x_itself(dtype):
    x, y = rand((128, 256), dtype, seed=7), rand((256, 384), dtype, seed=8)
    assert_close(matmul_legacy_untransposed(x, y), f32(x) @ f32(y), np.float32, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", DTYPES)
def test_matmul_legacy_isa_returns_tile(dtype):
    lhsT, rhs = rand((128, 64), dtype, seed=9), rand((128, 200), dtype, seed=10)
    assert_close(matmul_legacy_isa(lhsT, rhs), _ref(lhsT, rhs), np.float32, rtol=1e-4, atol=1e-4)


def test_matmul_counts_flops_in_timing():
    lhsT, rhs = rand((256, 128), seed=11), rand((256, 512), seed=12)
    matmul_tiled(lhsT, rhs)
    summary = matmul_tiled.last_timing[0].summary
    assert summary["model_flops"] == 2 * 256 * 128 * 512
    assert summary["tensor_instruction_count"] >= 2
