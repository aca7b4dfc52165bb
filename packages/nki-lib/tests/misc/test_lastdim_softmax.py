"""Softmax over the last dim, forward and backward, against the numpy reference."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.misc import softmax, softmax_backward
from nkilib.misc.lastdim_softmax import max_cols
from nkilib.misc.lastdim_softmax_reference import softmax_backward_reference, softmax_reference
from nkilib_helpers import BF16, DTYPES, SHAPES, assert_close, f32, randn


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(shape, dtype):
    x = randn(shape, dtype, seed=1, scale=4.0)
    y = softmax(x)
    assert y.dtype == np.dtype(dtype)
    assert_close(y, softmax_reference(x), dtype, atol=2e-3 if dtype is not np.float32 else None)
    np.testing.assert_allclose(f32(y).sum(axis=-1), 1.0, rtol=1e-2 if dtype is not np.float32 else 1e-5)


def test_large_logits_do_not_overflow():
    x = np.array([[1000.0, 999.0, -1000.0]], np.float32)
    assert_close(softmax(x), softmax_reference(x), np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_reference(shape, dtype):
    y = softmax(randn(shape, dtype, seed=2, scale=3.0))
    dy = randn(shape, dtype, seed=3)
    assert_close(softmax_backward(dy, y), softmax_backward_reference(dy, y), dtype,
                 atol=2e-3 if dtype is not np.float32 else None)


def test_rows_wider_than_sbuf_are_refused():
    limit = max_cols("float32")
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] softmax: last dim of {limit + 1} .* at most {limit}"):
        softmax(randn((1, limit + 1)))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] dy has shape \[2, 3\], expected \[2, 4\]"):
        softmax_backward(randn((2, 3)), randn((2, 4)))


def test_bad_dtypes_are_refused():
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] x has dtype float64"):
        softmax(randn((2, 4)).astype(np.float64))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] dy has dtype float32, expected bfloat16"):
        softmax_backward(randn((2, 4)), randn((2, 4)).astype(BF16))
