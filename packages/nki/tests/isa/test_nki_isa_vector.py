"""nisa VectorE (and shared Vector/Scalar/GpSimd) instructions against numpy, dst-first (NKI 0.6)."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, f32, rand


def _kernel(body, out_shape, out_dtype=nl.float32):
    """A kernel loading every argument to SBUF, running ``body(*tiles) -> tile`` and storing it."""

    @nki.jit
    def kernel(*args):
        out = nl.ndarray(out_shape, dtype=out_dtype, buffer=nl.shared_hbm)
        tiles = [nl.load(a) for a in args]
        nl.store(out, body(*tiles))
        return out

    return kernel


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("engine", [nisa.vector_engine, nisa.gpsimd_engine], ids=["vector", "gpsimd"])
def test_tensor_tensor(engine, dtype):
    def body(a, b):
        dst = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=dst, data1=a, data2=b, op=nl.subtract, engine=engine)
        return dst

    a, b = rand((128, 64), dtype, seed=1), rand((128, 64), dtype, seed=2)
    assert_close(_kernel(body, a.shape, a.dtype)(a, b), f32(a) - f32(b), dtype)


@pytest.mark.parametrize("engine", [nisa.vector_engine, nisa.scalar_engine, nisa.gpsimd_engine],
                         ids=["vector", "scalar", "gpsimd"])
def test_tensor_scalar_two_ops(engine):
    def body(x, col):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dst, data=x, op0=nl.multiply, operand0=col, op1=nl.add, operand1=0.25, engine=engine)
        return dst

    x, col = rand((128, 32), seed=3), rand((128, 1), seed=4)
    assert_close(_kernel(body, x.shape)(x, col), x * col + 0.25)


def test_tensor_scalar_reverse_and_unary():
    def body(x):
        a = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=a, data=x, op0=nl.subtract, operand0=1.0, reverse0=True, op1=nl.abs)  # |1 - x|
        b = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=b, data=a, op0=nl.divide, operand0=2.0, reverse0=True)  # 2 / |1 - x|
        return b

    x = rand((128, 16), seed=5, low=2, high=3)
    assert_close(_kernel(body, x.shape)(x), 2 / np.abs(1 - x))


def test_scalar_engine_tensor_scalar_op_subset():
    def body(x):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=dst, data=x, op0=nl.maximum, operand0=0.0, engine=nisa.scalar_engine)
        return dst

    with pytest.raises(nki.NkiValidationError, match=r"\[tensor_scalar.scalar_engine_op\].*maximum"):
        _kernel(body, (128, 8))(rand((128, 8)))


def test_scalar_tensor_tensor():
    def body(x, col, y):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=dst, data=x, op0=nl.subtract, operand0=col, op1=nl.multiply, operand1=y)
        return dst

    x, col, y = rand((128, 32), seed=6), rand((128, 1), seed=7), rand((128, 32), seed=8)
    assert_close(_kernel(body, x.shape)(x, col, y), (x - col) * y)


@pytest.mark.parametrize("op,ref", [(nl.add, np.sum), (nl.max, np.max), (nl.minimum, np.min), (nl.multiply, np.prod)],
                         ids=["add", "max", "min", "multiply"])
def test_tensor_reduce(op, ref):
    def body(x):
        dst = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=dst, op=op, data=x, axis=1)
        return dst

    x = rand((128, 24), seed=9, low=0.5, high=1.5)
    assert_close(_kernel(body, (128, 1))(x), ref(x, axis=1, keepdims=True), rtol=1e-5)


def test_tensor_reduce_negate_keepdims_and_trailing_axes():
    def body(x):
        t = x.reshape((128, 4, 2, 8))
        dst = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=dst, op=nl.add, data=t, axis=(2, 3), negate=True)
        return dst

    x = rand((128, 64), seed=10)
    assert_close(_kernel(body, (128, 4))(x), -x.reshape(128, 4, 16).sum(2), rtol=1e-5)


def test_tensor_reduce_into_psum():
    def body(x):
        dst = nl.ndarray((128, 1), nl.float32, buffer=nl.psum)
        nisa.tensor_reduce(dst=dst, op=nl.add, data=x, axis=1)
        return dst

    x = rand((128, 24), seed=11)
    assert_close(_kernel(body, (128, 1))(x), x.sum(1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("reduce_op,ref", [(nl.add, np.sum), (nl.max, np.max)], ids=["add", "max"])
def test_tensor_scalar_reduce(reduce_op, ref):
    def body(x):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        res = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=dst, data=x, op0=nl.multiply, operand0=3.0, reduce_op=reduce_op, reduce_res=res)
        both = nl.ndarray((128, x.shape[1] + 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=both[:, 0:x.shape[1]], src=dst)
        nisa.tensor_copy(dst=both[:, x.shape[1]:], src=res)
        return both

    x = rand((128, 16), seed=12)
    got = _kernel(body, (128, 17))(x)
    assert_close(got[:, :16], 3 * x)
    assert_close(got[:, 16:], ref(3 * x, axis=1, keepdims=True), rtol=1e-5)


def test_tensor_scalar_reduce_load_reduce_and_negate():
    def body(x, init):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        res = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=dst, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=res,
                                  reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=init, reduce_res_negate=True)
        return res

    x, init = rand((128, 16), seed=13), rand((128, 1), seed=14)
    assert_close(_kernel(body, (128, 1))(x, init), -((x + 1).sum(1, keepdims=True) + init), rtol=1e-5)


def test_tensor_scalar_reduce_accumulator_modes_are_refused():
    def body(x):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=dst, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=None,
                                  reduce_cmd=nisa.reduce_cmd.reduce)
        return dst

    with pytest.raises(nki.NkiValidationError, match=r"\[tensor_scalar_reduce.accumulator\]"):
        _kernel(body, (128, 4))(rand((128, 4)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_tensor_copy_casts_and_is_bit_exact_for_equal_dtypes(dtype):
    def body(x):
        same = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=same, src=x)
        wide = nl.ndarray(x.shape, nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=wide, src=same, engine=nisa.scalar_engine)
        back = nl.ndarray(x.shape, x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=back, src=wide)
        return back

    x = rand((128, 32), dtype, seed=15)
    x[0, 0] = np.nan
    got = _kernel(body, x.shape, x.dtype)(x)
    np.testing.assert_array_equal(got.view(np.uint8), x.view(np.uint8))


def test_memset_and_predicated_copy():
    def body(x, pred):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=dst, value=-1.0)
        nisa.tensor_copy_predicated(dst=dst, src=x, predicate=pred)
        return dst

    x = rand((128, 32), seed=16)
    pred = (rand((128, 32), seed=17) > 0).astype(np.float32)
    np.testing.assert_array_equal(_kernel(body, x.shape)(x, pred), np.where(pred != 0, x, -1))


def test_reciprocal():
    def body(x):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.reciprocal(dst=dst, data=x)
        return dst

    x = rand((128, 32), seed=18, low=0.5, high=4)
    assert_close(_kernel(body, x.shape)(x), 1 / x)


@pytest.mark.parametrize("width", [300, 512, 1000])
def test_bn_stats_and_bn_aggr(width):
    def body(x):
        chunks = (width + 511) // 512
        stats = nl.ndarray((128, 6 * chunks), nl.float32, buffer=nl.sbuf)
        for c in range(chunks):
            nisa.bn_stats(dst=stats[:, 6 * c:6 * (c + 1)], data=x[:, 512 * c:min(width, 512 * (c + 1))])
        mv = nl.ndarray((128, 2), nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=mv, data=stats)
        return mv

    x = rand((128, width), seed=19, low=-2, high=5)
    got = _kernel(body, (128, 2))(x)
    assert_close(got[:, 0], x.mean(1), rtol=1e-5, atol=1e-5)
    assert_close(got[:, 1], x.var(1), rtol=1e-4, atol=1e-5)


def test_nc_stream_shuffle_within_quadrants():
    def body(x):
        dst = nl.ndarray(x.shape, nl.float32, buffer=nl.sbuf)
        nisa.nc_stream_shuffle(dst=dst, src=x, shuffle_mask=list(reversed(range(32))))
        return dst

    x = rand((128, 8), seed=20)
    expected = x.reshape(4, 32, 8)[:, ::-1].reshape(128, 8)
    np.testing.assert_array_equal(_kernel(body, x.shape)(x), expected)


def test_vector_transpose_32x32():
    def body(x):
        dst = nl.ndarray((32, 32), nl.float32, buffer=nl.sbuf)
        nisa.nc_transpose(dst=dst, data=x, engine=nisa.vector_engine)
        return dst

    x = rand((32, 32), seed=21)
    np.testing.assert_array_equal(_kernel(body, (32, 32))(x), x.T)
