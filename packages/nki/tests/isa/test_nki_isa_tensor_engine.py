"""nisa TensorE instructions: nc_matmul (accumulation rules, shapes, dtypes) and nc_transpose."""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import BF16, assert_close, f32, rand


@nki.jit
def matmul_steps(a, b, flags):
    """Three matmuls into one PSUM tile with the given accumulate flags."""
    out = nl.ndarray((a.shape[1], b.shape[1]), nl.float32, buffer=nl.shared_hbm)
    s, m = nl.load(a), nl.load(b)
    acc = nl.ndarray(out.shape, nl.float32, buffer=nl.psum)
    for flag in flags:
        nisa.nc_matmul(dst=acc, stationary=s, moving=m, accumulate=flag)
    nl.store(out, acc)
    return out


@pytest.mark.parametrize("flags,times", [
    ((None, None, None), 3),  # default: first write overwrites, later ones accumulate
    ((False, None, None), 3),
    ((None, False, None), 2),  # an explicit overwrite starts again
    ((False, True, True), 3),
    ((None, None, False), 1),
])
def test_accumulate_flags(flags, times):
    a, b = rand((64, 32), seed=1), rand((64, 48), seed=2)
    assert_close(matmul_steps(a, b, flags), times * (a.T @ b), rtol=1e-5, atol=1e-5)


def test_two_results_in_two_banks_of_one_tile():
    @nki.jit
    def two_banks(a, b):
        out = nl.ndarray((128, 1024), nl.float32, buffer=nl.shared_hbm)
        s, m = nl.load(a), nl.load(b)
        acc = nl.ndarray((128, 1024), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc[:, 0:512], stationary=s, moving=m)
        nisa.nc_matmul(dst=acc[:, 512:1024], stationary=s, moving=m)
        nisa.nc_matmul(dst=acc[:, 512:1024], stationary=s, moving=m)  # accumulates in the second bank only
        nl.store(out, acc)
        return out

    a, b = rand((128, 128), seed=3), rand((128, 512), seed=4)
    got = two_banks(a, b)
    assert_close(got[:, :512], a.T @ b, rtol=1e-4, atol=1e-4)
    assert_close(got[:, 512:], 2 * (a.T @ b), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, BF16, np.float16, ml_dtypes.float8_e4m3, ml_dtypes.float8_e5m2],
                         ids=["fp32", "bf16", "fp16", "fp8_e4m3", "fp8_e5m2"])
def test_input_dtypes_accumulate_in_fp32(dtype):
    a, b = rand((128, 64), dtype, seed=5), rand((128, 256), dtype, seed=6)
    assert_close(matmul_steps(a, b, (None,)), f32(a).T @ f32(b), rtol=1e-4, atol=1e-4)


def test_fp32_matmul_is_slower_than_bf16_on_tensor_engine():
    a, b = rand((128, 128), seed=7), rand((128, 512), seed=8)
    times = {}
    for dtype in (np.float32, BF16):
        compiled = matmul_steps.compile((a.astype(dtype), b.astype(dtype), (None,) * 3), {})
        times[dtype] = compiled.timing()[0].summary["tensor_active_time_ns"]
    assert times[np.float32] > 2 * times[BF16]


def test_is_transpose_and_nc_transpose():
    @nki.jit
    def transposes(x):
        out = nl.ndarray((2, x.shape[1], x.shape[0]), x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        p1 = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
        nisa.nc_transpose(dst=p1, data=t, engine=nisa.tensor_engine)
        p2 = nl.ndarray((x.shape[1], x.shape[0]), x.dtype, buffer=nl.psum)
        nisa.nc_matmul(dst=p2, stationary=t, moving=t, is_transpose=True)
        nl.store(out[0], p1)
        nl.store(out[1], p2)
        return out

    x = rand((96, 128), BF16, seed=9)
    got = transposes(x)
    np.testing.assert_array_equal(f32(got[0]), f32(x).T)
    np.testing.assert_array_equal(f32(got[1]), f32(x).T)


def test_bf16_psum_result_on_trn3(monkeypatch):
    @nki.jit
    def bf16_psum(a, b):
        out = nl.ndarray((a.shape[1], b.shape[1]), nl.bfloat16, buffer=nl.shared_hbm)
        acc = nl.ndarray(out.shape, nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))
        nl.store(out, acc)
        return out

    a, b = rand((128, 64), BF16, seed=10), rand((128, 128), BF16, seed=11)
    with pytest.raises(nki.NkiValidationError, match=r"\[matmul.psum_dtype\]"):
        bf16_psum(a, b)
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    assert_close(bf16_psum(a, b), f32(a).T @ f32(b), BF16)
