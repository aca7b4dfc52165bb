"""Fused residual add + RMSNorm against the numpy reference (the sum rounded to the I/O dtype)."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.norm import residual_rms_norm, rms_norm
from nkilib.norm.rmsnorm_reference import residual_rms_norm_reference
from nkilib_helpers import DTYPES, SHAPES, assert_close, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference(shape, dtype):
    x, res, w = randn(shape, dtype, seed=1), randn(shape, dtype, seed=2), randn(shape[1:], dtype, seed=3)
    y, h = residual_rms_norm(x, res, w, eps=1e-6)
    ref_y, ref_h = residual_rms_norm_reference(x, res, w, 1e-6)
    assert y.dtype == h.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(h, ref_h)  # one fp32 add, one rounding: exactly numpy's
    assert_close(y, ref_y, dtype)


def test_same_as_add_then_rms_norm():
    x, res, w = randn((130, 200), seed=4), randn((130, 200), seed=5), randn((200,), seed=6)
    y, h = residual_rms_norm(x, res, w)
    np.testing.assert_array_equal(y, rms_norm(x + res, w))


def test_mismatched_residual_is_refused():
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] residual has shape \[4, 31\], expected \[4, 32\]"):
        residual_rms_norm(randn((4, 32)), randn((4, 31)), randn((32,)))


def test_bad_dtypes_and_too_wide_rows_are_refused():
    from nkilib.norm.residual_rmsnorm import max_hidden
    from nkilib_helpers import BF16

    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] residual has dtype bfloat16, expected float32"):
        residual_rms_norm(randn((4, 32)), randn((4, 32), BF16), randn((32,)))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] weight has shape \[16\], expected \[32\]"):
        residual_rms_norm(randn((4, 32)), randn((4, 32)), randn((16,)))
    h = max_hidden("float32") + 1
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] residual_rms_norm: hidden size of {h} .* at most {h - 1}"):
        residual_rms_norm(randn((1, h)), randn((1, h)), randn((h,)))
