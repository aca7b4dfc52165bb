"""Gated MLP forward against the numpy reference: SiLU, GELU and tanh-GELU, fp32/bf16, one token,
partial 128-token tiles, H and I not multiples of 128 (and I above one 512-column bank)."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.mlp import gated_mlp
from nkilib.mlp.gated_mlp_reference import gated_mlp_reference
from nkilib_helpers import BF16, DTYPES, assert_close, randn

# (tokens, H, I)
SHAPES = [
    pytest.param((1, 64, 96), id="1x64-I96"),
    pytest.param((130, 200, 600), id="130x200-I600"),
    pytest.param((257, 256, 700), id="257x256-I700"),
]


@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_matches_reference(shape, dtype, activation):
    tokens, hidden, inter = shape
    x = randn((tokens, hidden), dtype)
    wg, wu = randn((hidden, inter), dtype, seed=1, scale=0.1), randn((hidden, inter), dtype, seed=2, scale=0.1)
    wd = randn((inter, hidden), dtype, seed=3, scale=0.1)
    y = gated_mlp(x, wg, wu, wd, activation)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    ref = gated_mlp_reference(x, wg, wu, wd, activation)
    # bf16: the hidden activations are rounded once before the down projection, the output once
    assert_close(y, ref, dtype, atol=2e-2 * np.abs(ref).max() if dtype is BF16 else 2e-5 * np.abs(ref).max())


def test_bad_arguments_name_the_rule_and_the_limit():
    x, wg, wd = np.zeros((4, 64), np.float32), np.zeros((64, 96), np.float32), np.zeros((96, 64), np.float32)
    with pytest.raises(NkilibError, match=r"\[nkilib.mlp.activation\] activation='relu'"):
        gated_mlp(x, wg, wg, wd, "relu")
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] w_gate has shape \[32, 96\]; expected \[64, I\]"):
        gated_mlp(x, wg[:32], wg, wd)
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] w_down has shape \[64, 96\], expected \[96, 64\]"):
        gated_mlp(x, wg, wg, wd.T)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] w_up has dtype bfloat16, expected float32"):
        gated_mlp(x, wg, wg.astype(BF16), wd)
    big = np.broadcast_to(np.zeros((), np.float32), (4096, 14336))
    with pytest.raises(NkilibError, match=r"\[nkilib.sbuf\] gated_mlp: H=4096, I=14336 need \d+ bytes per SBUF partition"):
        gated_mlp(np.zeros((4, 4096), np.float32), big, big, big.T)
