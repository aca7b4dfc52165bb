"""nisa DMA instructions: dma_copy between HBM and SBUF (with casts, descriptor modes and
triggering engines) and dma_transpose."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import BF16, f32, rand


@pytest.mark.parametrize("src_dtype,dst_dtype", [(np.float32, BF16), (BF16, np.float32), (np.float32, np.int32),
                                                 (np.int32, np.float32)], ids=["f32-bf16", "bf16-f32", "f32-i32", "i32-f32"])
def test_dma_copy_casts_through_fp32(src_dtype, dst_dtype):
    @nki.jit
    def cast(x):
        out = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=dst_dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = (rand((128, 32), seed=1) * 100).astype(src_dtype)
    expected = f32(x)
    if np.dtype(dst_dtype) == np.int32:
        expected = np.rint(expected)  # round to nearest even, as the engines convert
    np.testing.assert_array_equal(f32(cast(x)), f32(expected.astype(dst_dtype)))


@pytest.mark.parametrize("engine", [nisa.engine.sync, nisa.engine.scalar, nisa.engine.gpsimd], ids=lambda e: e.name)
@pytest.mark.parametrize("dge", [nisa.dge_mode.unknown, nisa.dge_mode.swdge, nisa.dge_mode.hwdge], ids=lambda d: d.name)
def test_dma_copy_modes_and_trigger_engines(engine, dge):
    @nki.jit
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x, engine=engine, dge_mode=dge)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = rand((128, 64), seed=2)
    if dge == nisa.dge_mode.hwdge and engine == nisa.engine.gpsimd:
        with pytest.raises(nki.NkiValidationError, match=r"\[dma.hwdge_trigger\]"):
            copy(x)
    else:
        np.testing.assert_array_equal(copy(x), x)


def test_hwdge_cannot_cast():
    @nki.jit
    def cast(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x, dge_mode=nisa.dge_mode.hwdge)
        return out

    with pytest.raises(nki.NkiValidationError, match=r"\[dma.cast_hwdge\]"):
        cast(rand((16, 16)))


def test_sbuf_to_sbuf_and_hbm_to_hbm():
    @nki.jit
    def shuffle(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=scratch, src=x)
        a = nl.ndarray((64, 32), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=scratch[0:64, :])
        b = nl.ndarray((64, 32), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=b, src=a)  # SBUF -> SBUF
        nisa.dma_copy(dst=out[64:128, :], src=b)
        nisa.dma_copy(dst=out[0:64, :], src=scratch[64:128, :])
        return out

    x = rand((128, 32), seed=3)
    np.testing.assert_array_equal(shuffle(x), np.concatenate([x[64:], x[:64]]))


def test_dma_moves_elements_in_row_major_order_between_shapes():
    @nki.jit
    def regroup(x):
        out = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 64), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)  # [64, 128] -> [128, 64]: same elements, row-major
        nisa.dma_copy(dst=out, src=t)
        return out

    x = rand((64, 128), seed=4)
    np.testing.assert_array_equal(regroup(x), x.reshape(128, 64))


def test_dma_element_count_mismatch():
    @nki.jit
    def mismatch(x):
        t = nl.ndarray((128, 16), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)

    with pytest.raises(nki.NkiValidationError, match=r"\[dma.shape_mismatch\].*4096 elements.*2048 elements"):
        mismatch(rand((128, 32)))


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
def test_dma_transpose(dtype):
    @nki.jit
    def tr(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    x = rand((48, 128), dtype, seed=5)
    np.testing.assert_array_equal(f32(tr(x)), f32(x).T)


def test_legacy_dma_transpose_returns_a_new_tile():
    """nisa.dma_transpose(src) (legacy): the [F, P] transpose in a new SBUF tile."""

    @nki.jit
    def tr(x):
        t = nisa.dma_transpose(x[:, :])
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    x = rand((40, 96), seed=6)
    np.testing.assert_array_equal(tr(x), x.T)


def test_legacy_dma_transpose_of_more_than_two_dims_needs_a_destination():
    @nki.jit
    def tr3(x):
        nisa.dma_transpose(x, axes=(2, 1, 0))
        return x

    with pytest.raises(nki.NkiValidationError, match=r"\[dma_transpose.axes\].*\[2, 4, 8\]"):
        tr3(rand((2, 4, 8)))


def test_dma_time_grows_with_bytes():
    @nki.jit
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=out, src=t)
        return out

    small = copy.compile((rand((128, 64)),), {}).device_time_ns
    large = copy.compile((rand((128, 8192)),), {}).device_time_ns
    assert large > 4 * small
