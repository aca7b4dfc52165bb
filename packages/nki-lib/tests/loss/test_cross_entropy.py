"""Cross-entropy forward and backward against the numpy reference, fp32 and bf16, vocabularies
narrower than one chunk, of several chunks with a partial last one, and of any row count."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.loss import cross_entropy, cross_entropy_backward
from nkilib.loss.cross_entropy import CHUNK
from nkilib.loss.cross_entropy_reference import cross_entropy_backward_reference, cross_entropy_reference
from nkilib_helpers import BF16, DTYPES, assert_close, randn

# [rows, classes]: one row; a partial tile in one chunk; three tiles over 2 full chunks + a partial one
SHAPES = [pytest.param((1, 64), id="1x64"), pytest.param((130, 200), id="130x200"),
          pytest.param((257, 2 * CHUNK + 808), id=f"257x{2 * CHUNK + 808}")]


def _labels(rows, classes, seed=0):
    labels = np.random.default_rng(seed).integers(0, classes, rows)
    labels[0] = classes - 1  # the last column of the last (partial) chunk
    return labels


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(shape, dtype):
    # a large spread: the chunk holding the row max changes from row to row
    x = randn(shape, dtype, seed=1, scale=6.0)
    labels = _labels(*shape)
    loss, lse = cross_entropy(x, labels)
    ref_loss, ref_lse = cross_entropy_reference(x, labels)
    assert loss.dtype == lse.dtype == np.float32 and loss.shape == (shape[0],)
    assert_close(lse, ref_lse, np.float32, rtol=1e-5, atol=1e-5)
    assert_close(loss, ref_loss, np.float32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_matches_reference(shape, dtype):
    x = randn(shape, dtype, seed=2, scale=3.0)
    labels = _labels(*shape, seed=3)
    dloss = randn((shape[0],), seed=4)
    _, lse = cross_entropy(x, labels)
    dx = cross_entropy_backward(x, labels, lse, dloss)
    assert dx.dtype == np.dtype(dtype) and dx.shape == shape
    assert_close(dx, cross_entropy_backward_reference(x, labels, dloss), dtype, atol=1e-2 if dtype is BF16 else None)


def test_max_in_a_later_chunk_and_large_logits_do_not_overflow():
    x = np.full((2, 2 * CHUNK + 3), -50.0, np.float32)
    x[0, 2 * CHUNK + 1] = 1000.0  # the max only in the last chunk: the running sum is rescaled
    x[1, 5] = 900.0
    labels = np.array([2 * CHUNK + 1, 7])
    loss, _ = cross_entropy(x, labels)
    assert_close(loss, cross_entropy_reference(x, labels)[0], np.float32)


def test_bad_inputs_name_the_argument():
    x = randn((4, 10))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] labels has dtype float32; class indices are an integer dtype"):
        cross_entropy(x, np.zeros(4, np.float32))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] labels has shape \[3\], expected \[4\]"):
        cross_entropy(x, np.zeros(3, np.int64))
    with pytest.raises(NkilibError, match=r"\[nkilib.cross_entropy.label\] label 10 outside \[0, 10\)"):
        cross_entropy(x, np.array([0, 1, 10, 2]))
    with pytest.raises(NkilibError, match=r"\[nkilib.cross_entropy.label\] label -1"):
        cross_entropy(x, np.array([0, -1, 3, 2]))
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] logits has shape \[2, 2, 10\]"):
        cross_entropy(randn((2, 2, 10)), np.zeros(2, np.int64))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] logits has dtype int32"):
        cross_entropy(x.astype(np.int32), np.zeros(4, np.int64))
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] lse has dtype bfloat16, expected float32"):
        cross_entropy_backward(x, np.zeros(4, np.int64), randn((4,), BF16), randn((4,)))
