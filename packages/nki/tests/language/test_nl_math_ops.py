"""nki.language elementwise math and reductions against numpy (fp32 and bf16)."""

import math
import zlib

import nki
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import BF16, DTYPES, assert_close, f32, rand


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


UNARY = {
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)), "relu": lambda x: np.maximum(x, 0),
    "gelu": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_apprx_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x / (1 + np.exp(-x)), "softplus": lambda x: np.log1p(np.exp(x)),
    "mish": lambda x: x * np.tanh(np.log1p(np.exp(x))), "erf": _erf, "sin": np.sin, "cos": np.cos,
    "arctan": np.arctan, "square": np.square, "sign": np.sign, "reciprocal": lambda x: 1 / x, "abs": np.abs,
    "negative": np.negative, "trunc": np.trunc, "floor": np.floor, "ceil": np.ceil, "tan": np.tan,
}
_SIG = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
UNARY.update({  # built from several instructions (not in neuron-sim's activation table)
    "gelu_apprx_sigmoid": lambda x: x * _SIG(1.702 * x),
    "gelu_apprx_sigmoid_dx": lambda x: _SIG(1.702 * x) * (1 + 1.702 * x * (1 - _SIG(1.702 * x))),
    "gelu_dx": lambda x: 0.5 * (1 + _erf(x / np.sqrt(2))) + x * np.exp(-x * x / 2) / np.sqrt(2 * np.pi),
    "silu_dx": lambda x: _SIG(x) * (1 + x * (1 - _SIG(x))),
    "erf_dx": lambda x: 2 / np.sqrt(np.pi) * np.exp(-x * x),
})
POSITIVE = {"log", "sqrt", "rsqrt"}


def _unary_kernel(name):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, name)(nl.load(x)))
        return out

    return kernel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary(name, dtype):
    low, high = (0.1, 4.0) if name in POSITIVE else (-1.4, 1.4) if name == "tan" else (-3.0, 3.0)
    x = rand((128, 96), dtype, seed=zlib.crc32(name.encode()), low=low, high=high)
    expected = UNARY[name](f32(x).astype(np.float64))
    assert_close(_unary_kernel(name)(x), expected, dtype, **({"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {}))


BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": np.divide, "maximum": np.maximum,
    "minimum": np.minimum, "power": np.power, "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater,
    "greater_equal": np.greater_equal, "less": np.less, "less_equal": np.less_equal,
    "abs_max": lambda a, b: np.maximum(np.abs(a), np.abs(b)), "abs_min": lambda a, b: np.minimum(np.abs(a), np.abs(b)),
    "fmod": np.fmod, "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
}


def _binary_kernel(name):
    @nki.jit
    def kernel(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, name)(nl.load(a), nl.load(b)))
        return out

    return kernel


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_fp32(name):
    a = rand((128, 64), seed=1, low=0.5, high=3.0)
    b = rand((128, 64), seed=2, low=0.5, high=3.0)
    b[:, ::4] = a[:, ::4]  # some equal elements for the comparisons
    assert_close(_binary_kernel(name)(a, b), BINARY[name](a, b).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_bitwise_ops_on_integers():
    @nki.jit
    def bits(a, b):
        out = nl.ndarray((5,) + a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        for i, t in enumerate([nl.bitwise_and(x, y), nl.bitwise_or(x, y), nl.bitwise_xor(x, y), nl.invert(x),
                               nl.left_shift(x, 3)]):
            nl.store(out[i], t)
        return out

    rng = np.random.default_rng(3)
    a, b = rng.integers(0, 1 << 20, (128, 16), dtype=np.int32), rng.integers(0, 1 << 20, (128, 16), dtype=np.int32)
    got = bits(a, b)
    for g, e in zip(got, [a & b, a | b, a ^ b, ~a, a << 3]):
        np.testing.assert_array_equal(g, e)


@pytest.mark.parametrize("dtype", DTYPES)
def test_scalars_and_per_partition_operands(dtype):
    @nki.jit
    def mix(x, col):
        out = nl.ndarray((4,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t, c = nl.load(x), nl.load(col)
        for i, r in enumerate([nl.add(t, 2.5), nl.subtract(1.0, t), nl.multiply(t, c), nl.divide(c, t)]):
            nl.store(out[i], r)
        return out

    x, col = rand((128, 32), dtype, seed=4, low=0.5, high=2), rand((128, 1), dtype, seed=5, low=0.5, high=2)
    xf, cf = f32(x), f32(col)
    got = mix(x, col)
    for g, e in zip(got, [xf + 2.5, 1 - xf, xf * cf, cf / xf]):
        assert_close(g, e, dtype)


def test_row_operand_broadcasts_across_partitions():
    @nki.jit
    def add_row(x, row):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(x), nl.load(row)))
        return out

    x, row = rand((128, 700), seed=6), rand((1, 700), seed=7)
    assert_close(add_row(x, row), x + row)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean),
                                      ("prod", np.prod), ("var", np.var)])
def test_reductions_over_the_free_axis(name, ref, dtype):
    @nki.jit
    def reduce(x):
        out = nl.ndarray((x.shape[0], 1), dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, getattr(nl, name)(nl.load(x), axis=1, dtype=nl.float32, keepdims=True))
        return out

    x = rand((128, 40), dtype, seed=8, low=0.5, high=1.5)
    assert_close(reduce(x), ref(f32(x), axis=1, keepdims=True), np.float32, rtol=1e-5, atol=1e-5)


def test_reduction_over_trailing_axes_of_a_3d_tile():
    @nki.jit
    def reduce3(x):
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x).reshape((128, 4, 8))
        nl.store(out, nl.sum(t, axis=2))
        return out

    x = rand((128, 32), seed=9)
    assert_close(reduce3(x), x.reshape(128, 4, 8).sum(2), rtol=1e-5)


@pytest.mark.parametrize("keepdims", [False, True])
def test_reduction_over_free_axes_that_are_not_trailing(keepdims):
    """nl.sum(t, axis=[2, 4]) of a [P, a, w, b, w] tile (a pooling window): the access pattern walks
    the kept dims first and the reduced ones last."""

    @nki.jit
    def window_sums(x):
        out_shape = (x.shape[0], x.shape[1], 1, x.shape[3], 1) if keepdims else (x.shape[0], x.shape[1], x.shape[3])
        out = nl.ndarray(out_shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.sum(nl.load(x), axis=[2, 4], keepdims=keepdims))
        return out

    x = rand((128, 3, 2, 5, 2), seed=9)
    np.testing.assert_allclose(window_sums(x), f32(x).sum(axis=(2, 4), keepdims=keepdims), rtol=1e-5, atol=1e-6)


def test_reduction_across_partitions():
    @nki.jit
    def column_max(x):
        out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.max(nl.load(x), axis=0))
        return out

    x = rand((128, 64), seed=10)
    np.testing.assert_array_equal(column_max(x), x.max(0, keepdims=True))


def test_all_and_where():
    @nki.jit
    def all_where(x):
        out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        positive = nl.greater(t, 0.0)
        nl.store(out[0], nl.where(positive, t, 0.0))
        nl.store(out[1], nl.broadcast_to(nl.all(positive, axis=1), x.shape))
        return out

    x = rand((128, 16), seed=11)
    x[:64] = np.abs(x[:64]) + 0.1
    got = all_where(x)
    np.testing.assert_array_equal(got[0], np.where(x > 0, x, 0))
    np.testing.assert_array_equal(got[1], np.broadcast_to((x > 0).all(1, keepdims=True), x.shape).astype(np.float32))


def test_softmax_and_rms_norm_wrappers():
    @nki.jit
    def composite(x, w):
        out = nl.ndarray((2,) + x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out[0], nl.softmax(t, axis=1))
        nl.store(out[1], nl.rms_norm(t, w, axis=1, n=x.shape[1]))
        return out

    x, w = rand((128, 64), seed=12), rand((64,), seed=13)
    got = composite(x, w)
    e = np.exp(x - x.max(1, keepdims=True))
    assert_close(got[0], e / e.sum(1, keepdims=True))
    assert_close(got[1], x / np.sqrt((x * x).mean(1, keepdims=True) + 1e-6) * w)


def test_result_dtype_follows_inputs_or_dtype_argument():
    @nki.jit
    def casts(a, b):
        out = nl.ndarray((3,) + a.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        x, y = nl.load(a), nl.load(b)
        same = nl.add(x, x)  # bf16 + bf16 -> bf16
        mixed = nl.add(x, y)  # bf16 + fp32 -> fp32
        forced = nl.add(y, y, dtype=nl.bfloat16)
        assert (same.dtype, mixed.dtype, forced.dtype) == ("bfloat16", "float32", "bfloat16")
        for i, t in enumerate([same, mixed, forced]):
            nl.store(out[i], t)
        return out

    a, b = rand((128, 8), BF16, seed=14), rand((128, 8), seed=15)
    got = casts(a, b)
    np.testing.assert_array_equal(got[0], f32((f32(a) * 2).astype(BF16)))
    np.testing.assert_array_equal(got[1], f32(a) + b)
    np.testing.assert_array_equal(got[2], f32((b * 2).astype(BF16)))


def test_where_broadcasts_a_one_partition_row_across_partitions():
    @nki.jit
    def pick_row_where_positive(x, row):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        r = nl.load(row)  # [1, F]: NKI broadcasts it along the partition dimension
        nl.store(out, nl.where(nl.greater(t, 0.0), r, t))
        return out

    x, row = rand((128, 16), seed=21), rand((1, 16), seed=22)
    np.testing.assert_array_equal(pick_row_where_positive(x, row), np.where(x > 0, np.broadcast_to(row, x.shape), x))


def test_numpy_scalar_operands_are_immediates():
    # nki-samples' adaptive average pooling divides by a count computed with numpy (np.int32(49))
    @nki.jit
    def scaled(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nl.store(out, nl.add(nl.divide(t, np.int32(4)), np.float32(0.5)))
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_allclose(scaled(x), x / 4 + 0.5, rtol=1e-6)
