"""Rotary embedding in both layouts against the numpy reference; the backward is the inverse
rotation, checked against the reference's transpose (rotation by -angle)."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.embeddings import rope, rope_backward
from nkilib.embeddings.rotary_reference import rope_reference, rope_tables
from nkilib_helpers import DTYPES, assert_close, randn

LAYOUTS = ["half", "interleaved"]
# [B, S, H, D] / [S, H, D]: one position, a partial tile, several tiles with batch and heads
SHAPES = [pytest.param((1, 1, 64), id="1x1x64"), pytest.param((2, 130, 3, 64), id="2x130x3x64"),
          pytest.param((257, 4, 128), id="257x4x128")]


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_matches_reference(shape, dtype, layout):
    x = randn(shape, dtype, seed=1)
    cos, sin = rope_tables(shape[-3], shape[-1], dtype=dtype)
    y = rope(x, cos, sin, layout)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    assert_close(y, rope_reference(x, cos, sin, layout), dtype)


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_backward_is_the_transposed_rotation(shape, dtype, layout):
    dy = randn(shape, dtype, seed=2)
    cos, sin = rope_tables(shape[-3], shape[-1], dtype=dtype)
    # rope is linear in x with a rotation matrix R; its gradient is R^T dy = rotation by -angle
    assert_close(rope_backward(dy, cos, sin, layout), rope_reference(dy, cos, -sin, layout), dtype)


def test_layouts_differ():
    x = randn((4, 2, 8), seed=3)
    cos, sin = rope_tables(4, 8)
    assert not np.allclose(rope(x, cos, sin, "half"), rope(x, cos, sin, "interleaved"))


def test_bad_inputs_name_the_argument():
    x = randn((4, 2, 8))
    cos, sin = rope_tables(4, 8)
    with pytest.raises(NkilibError, match=r"\[nkilib.rope.layout\] layout='neox'"):
        rope(x, cos, sin, "neox")
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] cos has shape \[4, 8\], expected \[4, 4\]"):
        rope(x, np.ones((4, 8), np.float32), sin)
    with pytest.raises(NkilibError, match=r"\[nkilib.rope.head_dim\] head dim D=7"):
        rope(randn((4, 2, 7)), cos[:, :3], sin[:, :3])
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] x has shape \[4, 16\]"):
        rope(randn((4, 16)), cos, sin)


def test_bad_dtypes_empty_and_too_wide_rows_are_refused():
    from nkilib.embeddings.rotary import max_heads_x_dim
    from nkilib_helpers import BF16

    cos, sin = rope_tables(4, 8)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] x has dtype int32"):
        rope(randn((4, 2, 8)).astype(np.int32), cos, sin)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] cos has dtype bfloat16, expected float32"):
        rope(randn((4, 2, 8)), cos.astype(BF16), sin)
    with pytest.raises(NkilibError, match=r"no elements"):
        rope(randn((0, 4, 2, 8)), cos, sin)
    limit = max_heads_x_dim("float32")
    heads = limit // 64 + 1
    c, s = rope_tables(2, 64)
    with pytest.raises(NkilibError, match=rf"\[nkilib.sbuf\] rope: heads x head dim of {heads * 64} .* at most {limit}"):
        rope(randn((2, heads, 64)), c, s)
