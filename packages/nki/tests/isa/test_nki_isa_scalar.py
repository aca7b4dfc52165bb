"""nisa ScalarE: activation with scale/bias (immediate or per-partition) and its fused reduction."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import assert_close, rand

FUNCS = {
    "exp": np.exp, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "silu": lambda x: x / (1 + np.exp(-x)), "square": np.square, "copy": lambda x: x, "sin": np.sin,
    "abs": np.abs, "softplus": lambda x: np.log1p(np.exp(x)),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_activation_scale_and_bias(name):
    @nki.jit
    def act(x, bias):
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=dst, op=getattr(nl, name), data=t, bias=nl.load(bias), scale=0.5)
        nl.store(out, dst)
        return out

    x, bias = rand((128, 64), seed=1, low=-2, high=2), rand((128, 1), seed=2)
    assert_close(act(x, bias), FUNCS[name](0.5 * x + bias), rtol=1e-5, atol=1e-5)


def test_activation_per_partition_scale_immediate_bias_and_reduce():
    @nki.jit
    def act(x, scale):
        out = nl.ndarray((128, x.shape[1] + 1), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        dst = nl.ndarray((128, x.shape[1] + 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=dst[:, 0:x.shape[1]], op=nl.exp, data=t, scale=nl.load(scale), bias=-1.0,
                        reduce_op=nl.add, reduce_res=dst[:, x.shape[1]:])
        nl.store(out, dst)
        return out

    x, scale = rand((128, 32), seed=3), rand((128, 1), seed=4)
    got = act(x, scale)
    e = np.exp(x * scale - 1)
    assert_close(got[:, :32], e)
    assert_close(got[:, 32:], e.sum(1, keepdims=True), rtol=1e-5)


def test_activation_reduce_and_psum_io():
    @nki.jit
    def act(x):
        out = nl.ndarray((128, 2), dtype=nl.float32, buffer=nl.shared_hbm)
        p = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(x))
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        sums = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.activation_reduce(dst=dst, op=nl.square, data=p, reduce_op=nl.add, reduce_res=sums[:, 0:1])
        nisa.activation(dst=dst, op=nl.relu, data=p, reduce_op=nl.max, reduce_res=sums[:, 1:2])
        nl.store(out, sums)
        return out

    x = rand((128, 40), seed=5)
    got = act(x)
    assert_close(got[:, 0], (x * x).sum(1), rtol=1e-5)
    assert_close(got[:, 1], np.maximum(x, 0).max(1))


def test_activation_reduce_ops_are_limited():
    @nki.jit
    def act(x):
        t = nl.load(x)
        r = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=t, op=nl.exp, data=t, reduce_op=nl.multiply, reduce_res=r)

    with pytest.raises(nki.NkiValidationError, match=r"\[activation.reduce\].*multiply"):
        act(rand((128, 8)))


def test_activation_legacy_form_returns_a_tile():
    @nki.jit
    def act(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nl.store(out, nisa.activation(op=nl.tanh, data=nl.load(x), dtype=nl.bfloat16))
        return out

    x = rand((128, 16), seed=6)
    got = act(x)
    assert got.dtype == np.dtype("bfloat16")
    assert_close(got, np.tanh(x), np.dtype("bfloat16"))
