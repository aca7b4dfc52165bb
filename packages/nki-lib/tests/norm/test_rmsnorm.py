"""RMSNorm forward and backward against the numpy reference, fp32 and bf16, any row count."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.norm import rms_norm, rms_norm_backward
from nkilib.norm.rmsnorm import max_hidden, rms_norm_kernel
from nkilib.norm.rmsnorm_reference import rms_norm_backward_reference, rms_norm_reference
from nkilib_helpers import BF16, DTYPES, SHAPES, assert_close, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(shape, dtype):
    x, w = randn(shape, dtype, seed=1, scale=2.0, shift=0.5), randn(shape[1:], dtype, seed=2)
    y = rms_norm(x, w, eps=1e-6)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, rms_norm_reference(x, w, 1e-6), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_reference(shape, dtype):
    x, w, dy = randn(shape, dtype, seed=3), randn(shape[1:], dtype, seed=4), randn(shape, dtype, seed=5)
    dx, dw = rms_norm_backward(dy, x, w, eps=1e-5)
    ref_dx, ref_dw = rms_norm_backward_reference(dy, x, w, 1e-5)
    assert dx.dtype == np.dtype(dtype) and dw.dtype == np.float32
    assert_close(dx, ref_dx, dtype)
    # dweight sums over the rows in fp32: its error grows with sqrt(rows)
    assert_close(dw, ref_dw, np.float32, rtol=1e-4, atol=1e-5, scale=np.sqrt(shape[0]))


def test_leading_dims_are_rows():
    x, w = randn((3, 5, 96), seed=6), randn((96,), seed=7)
    assert_close(rms_norm(x, w), rms_norm_reference(x, w), np.float32)


def test_widest_hidden_size_fits_and_one_more_is_refused():
    limit = max_hidden("bfloat16")
    x, w = randn((2, limit), BF16, seed=8), randn((limit,), BF16, seed=9)
    assert_close(rms_norm(x, w), rms_norm_reference(x, w), BF16)
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] rms_norm: hidden size of {limit + 1} elements .* at most {limit}"):
        rms_norm(randn((2, limit + 1), BF16), randn((limit + 1,), BF16))


def test_bad_inputs_name_the_argument():
    x = randn((4, 32))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] weight has shape \[31\], expected \[32\]"):
        rms_norm(x, randn((31,)))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] x has dtype float64"):
        rms_norm(x.astype(np.float64), randn((32,)))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] weight has dtype bfloat16, expected float32"):
        rms_norm(x, randn((32,), BF16))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] dy has shape \[4, 16\]"):
        rms_norm_backward(randn((4, 16)), x, randn((32,)))
    with pytest.raises(NkilibError, match=r"no elements"):
        rms_norm(randn((0, 32)), randn((32,)))


def test_next_tile_is_loaded_while_the_current_one_is_computed():
    """Prefetching overlaps DMA with the engines: the launch takes less than its DMA and compute
    busy times one after the other."""
    rms_norm(randn((1024, 2048), BF16), randn((2048,), BF16))  # 8 tiles: the first load and last store are a small part
    s = rms_norm_kernel.last_timing[0].summary
    busy = s["dma_active_time_ns"] + s["scalar_active_time_ns"] + s["vector_active_time_ns"]
    assert s["total_time_ns"] < 0.8 * busy
