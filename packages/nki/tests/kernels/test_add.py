"""Tiled tensor add in both API styles, fp32 and bf16, against numpy."""

import neuronxcc.nki as legacy_nki
import neuronxcc.nki.language as lnl
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import BF16, DTYPES, assert_close, f32, rand


# --- NKI 0.6: explicit tiles, dst-first ISA calls, a returned shared_hbm tensor ---------------
@nki.jit
def add_tiled(a_input, b_input):
    c_output = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    M, N = a_input.shape
    TILE_M, TILE_N = nl.tile_size.pmax, 512
    for m in nl.affine_range(M // TILE_M):
        for n in nl.affine_range(N // TILE_N):
            a = nl.ndarray((TILE_M, TILE_N), a_input.dtype, buffer=nl.sbuf)
            b = nl.ndarray((TILE_M, TILE_N), a_input.dtype, buffer=nl.sbuf)
            c = nl.ndarray((TILE_M, TILE_N), a_input.dtype, buffer=nl.sbuf)
            rows, cols = slice(m * TILE_M, (m + 1) * TILE_M), slice(n * TILE_N, (n + 1) * TILE_N)
            nisa.dma_copy(dst=a, src=a_input[rows, cols])
            nisa.dma_copy(dst=b, src=b_input[rows, cols])
            nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
            nisa.dma_copy(dst=c_output[rows, cols], src=c)
    return c_output


# --- NKI 0.6, the other output style: write into an output tensor passed as a parameter -------
@nki.jit
def add_into(a_input, b_input, c_output):
    M, N = a_input.shape
    for m in nl.affine_range(M // 128):
        a = nl.ndarray((128, N), a_input.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, N), b_input.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=a_input[m * 128:(m + 1) * 128, :])
        nisa.dma_copy(dst=b, src=b_input[m * 128:(m + 1) * 128, :])
        c = nl.ndarray((128, N), c_output.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=c, data1=a, data2=b, op=nl.add)
        nisa.dma_copy(dst=c_output[m * 128:(m + 1) * 128, :], src=c)


# --- legacy neuronxcc.nki: SPMD grid, nl.arange index expressions, ops returning tiles --------
@legacy_nki.jit
def add_spmd_legacy(a_input, b_input):
    c_output = lnl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=lnl.shared_hbm)
    ix = lnl.program_id(0) * 128 + lnl.arange(128)[:, None]
    iy = lnl.program_id(1) * 512 + lnl.arange(512)[None, :]
    a_tile = lnl.load(a_input[ix, iy])
    b_tile = lnl.load(b_input[ix, iy])
    c_tile = a_tile + b_tile
    lnl.store(c_output[ix, iy], value=c_tile)
    return c_output


# --- NKI 0.6 convenience wrappers: nl.load / nl.add / nl.store -------------------------------
@nki.jit
def add_convenience(a_input, b_input):
    out = nl.ndarray(a_input.shape, dtype=a_input.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(a_input.shape[0] // 128):
        a = nl.load(a_input[m * 128:(m + 1) * 128, :])
        b = nl.load(b_input[m * 128:(m + 1) * 128, :])
        nl.store(out[m * 128:(m + 1) * 128, :], value=nl.add(a, b))
    return out


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_tiled_returns_shared_hbm(dtype):
    a, b = rand((256, 1024), dtype, seed=1), rand((256, 1024), dtype, seed=2)
    c = add_tiled(a, b)
    assert c.dtype == np.dtype(dtype) and c.shape == a.shape
    assert_close(c, f32(a) + f32(b), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_into_output_parameter(dtype):
    a, b = rand((384, 200), dtype, seed=3), rand((384, 200), dtype, seed=4)
    c = np.zeros_like(a)
    assert add_into(a, b, c) is None
    assert_close(c, f32(a) + f32(b), dtype)
    # the inputs are untouched
    assert_close(a, rand((384, 200), dtype, seed=3), dtype, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_convenience(dtype):
    a, b = rand((256, 300), dtype, seed=5), rand((256, 300), dtype, seed=6)
    assert_close(add_convenience(a, b), f32(a) + f32(b), dtype)


def test_bf16_add_rounds_once_like_hardware():
    # fp32 math then one round-to-nearest-even on write: bit-identical to numpy's bf16 rounding.
    a, b = rand((128, 512), BF16, seed=7), rand((128, 512), BF16, seed=8)
    expected = (f32(a) + f32(b)).astype(a.dtype)
    np.testing.assert_array_equal(add_tiled(a, b).view(np.uint16), expected.view(np.uint16))


def test_simulate_matches_direct_call():
    a, b = rand((128, 512), seed=9), rand((128, 512), seed=10)
    np.testing.assert_array_equal(nki.simulate(add_tiled)(a, b), add_tiled(a, b))


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_legacy_spmd_grid(dtype):
    a, b = rand((256, 1024), dtype, seed=11), rand((256, 1024), dtype, seed=12)
    c = add_spmd_legacy[2, 2](a, b)
    assert_close(c, f32(a) + f32(b), dtype)
    # the legacy entry point gives the same result
    np.testing.assert_array_equal(legacy_nki.simulate_kernel(add_spmd_legacy[2, 2], a, b), c)
