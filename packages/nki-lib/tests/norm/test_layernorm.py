"""LayerNorm forward and backward against the numpy reference, fp32 and bf16, any row count."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.norm import layer_norm, layer_norm_backward
from nkilib.norm.layernorm import max_hidden
from nkilib.norm.layernorm_reference import layer_norm_backward_reference, layer_norm_reference
from nkilib_helpers import BF16, DTYPES, SHAPES, assert_close, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(shape, dtype):
    # a mean far from zero: the variance must come from centred values, not E[x^2] - E[x]^2
    x = randn(shape, dtype, seed=1, scale=2.0, shift=3.0)
    w, b = randn(shape[1:], dtype, seed=2), randn(shape[1:], dtype, seed=3)
    y = layer_norm(x, w, b, eps=1e-5)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, layer_norm_reference(x, w, b, 1e-5), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_reference(shape, dtype):
    x, w, dy = randn(shape, dtype, seed=4, shift=1.0), randn(shape[1:], dtype, seed=5), randn(shape, dtype, seed=6)
    dx, dw, db = layer_norm_backward(dy, x, w, eps=1e-5)
    ref_dx, ref_dw, ref_db = layer_norm_backward_reference(dy, x, w, 1e-5)
    assert dx.dtype == np.dtype(dtype) and dw.dtype == db.dtype == np.float32
    assert_close(dx, ref_dx, dtype)
    assert_close(dw, ref_dw, np.float32, rtol=1e-4, atol=1e-5, scale=np.sqrt(shape[0]))
    assert_close(db, ref_db, np.float32, rtol=1e-4, atol=1e-5, scale=np.sqrt(shape[0]))


def test_hidden_size_beyond_sbuf_is_refused_with_the_limit():
    limit = max_hidden("float32", backward=True)
    h = limit + 1
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] layer_norm_backward: hidden size of {h} .* at most {limit}"):
        layer_norm_backward(randn((2, h)), randn((2, h)), randn((h,)))


def test_bad_inputs_name_the_argument():
    x, w = randn((4, 32)), randn((32,))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] bias has shape \[33\], expected \[32\]"):
        layer_norm(x, w, randn((33,)))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] bias has dtype bfloat16, expected float32"):
        layer_norm(x, w, randn((32,), BF16))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] x has dtype int32"):
        layer_norm(x.astype(np.int32), w, w)


def test_mismatched_weight_and_too_wide_forward_rows_are_refused():
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] weight has shape \[31\], expected \[32\]"):
        layer_norm(randn((4, 32)), randn((31,)), randn((32,)))
    limit = max_hidden("bfloat16")
    h = limit + 1
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] layer_norm: hidden size of {h} .* at most {limit}"):
        layer_norm(randn((1, h), BF16), randn((h,), BF16), randn((h,), BF16))
