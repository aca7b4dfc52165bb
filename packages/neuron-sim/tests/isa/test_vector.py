"""VectorE (and the Vector-family instructions GpSimd/ScalarE share) against numpy references."""

import numpy as np
import pytest
from helpers import BF16, TRN2, assert_bits_equal, execute, ps, rounded, sb
from neuron_sim import AccessPatternError, ValidationError, dtypes
from neuron_sim.isa import (
    BnAggr,
    BnStats,
    CopyPredicated,
    Memset,
    Reciprocal,
    ScalarTensorTensor,
    Select,
    StreamShuffle,
    TensorCopy,
    TensorReduce,
    TensorScalar,
    TensorTensor,
)

RNG = np.random.default_rng(2)
P, F = 16, 24


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


def data(shape=(P, F), scale=4.0, dtype="float32"):
    x = (RNG.standard_normal(shape) * scale).astype(np.float32)
    return x.astype(dtypes.to_numpy(dtype))


def f64(x):
    return np.asarray(x).astype(np.float64)


# Reference ALU in float64 (exactly rounded to fp32 afterwards for + - * / and comparisons).
REFERENCE = {
    "add": lambda a, b: a + b,
    "subtract": lambda a, b: a - b,
    "multiply": lambda a, b: a * b,
    "divide": lambda a, b: a / b,
    "maximum": lambda a, b: np.where(a >= b, a, b),
    "minimum": lambda a, b: np.where(a <= b, a, b),
    "abs_max": lambda a, b: np.where(np.abs(a) >= np.abs(b), np.abs(a), np.abs(b)),
    "abs_min": lambda a, b: np.where(np.abs(a) <= np.abs(b), np.abs(a), np.abs(b)),
    "equal": lambda a, b: (a == b) * 1.0,
    "not_equal": lambda a, b: (a != b) * 1.0,
    "greater": lambda a, b: (a > b) * 1.0,
    "greater_equal": lambda a, b: (a >= b) * 1.0,
    "less": lambda a, b: (a < b) * 1.0,
    "less_equal": lambda a, b: (a <= b) * 1.0,
    "logical_and": lambda a, b: ((a != 0) & (b != 0)) * 1.0,
    "logical_or": lambda a, b: ((a != 0) | (b != 0)) * 1.0,
    "logical_xor": lambda a, b: ((a != 0) ^ (b != 0)) * 1.0,
    "bypass": lambda a, b: a,
    "fmod": lambda a, b: np.fmod(a, b),
}
APPROX = {"power": lambda a, b: np.power(a, b), "mod": lambda a, b: a - np.floor(a / b) * b}


def ref_write(values64, dtype):
    with np.errstate(all="ignore"):
        return rounded(np.asarray(values64, dtype=np.float64).astype(np.float32), dtype)


# --- tensor_tensor --------------------------------------------------------------------------------


@pytest.mark.parametrize("op", sorted(REFERENCE))
@pytest.mark.parametrize("dst_dtype", ["float32", "bfloat16", "int32"])
def test_tensor_tensor_arithmetic(op, dst_dtype):
    a, b = data(), data()
    b[0, :4] = a[0, :4]  # equal values for the comparisons
    b[1, :4] = 0.0  # zeros for division and logic
    in0, in1, dst = sb("float32", P, F), sb("float32", P, F, offset=256), sb(dst_dtype, P, F, offset=512)
    run = execute([TensorTensor(dst=dst, in0=in0, in1=in1, op=op)], preload=[(in0, a), (in1, b)], fetch=[dst])
    with np.errstate(all="ignore"):
        expected = ref_write(REFERENCE[op](f64(a), f64(b)), dst_dtype)
    assert_bits_equal(run[0], expected)


@pytest.mark.parametrize("op", sorted(APPROX))
def test_tensor_tensor_power_and_mod(op):
    a = np.abs(data()) + 0.5
    b = data(scale=2.0) if op == "power" else np.abs(data()) + 0.25
    in0, in1, dst = sb("float32", P, F), sb("float32", P, F, offset=256), sb("float32", P, F, offset=512)
    run = execute([TensorTensor(dst=dst, in0=in0, in1=in1, op=op)], preload=[(in0, a), (in1, b)], fetch=[dst])
    np.testing.assert_allclose(run[0], APPROX[op](f64(a), f64(b)), rtol=1e-5, atol=1e-6)


def test_tensor_tensor_mixed_dtypes_and_psum_input():
    a = data(dtype="bfloat16")
    b = data(dtype="float8_e4m3", scale=1.0)
    in0, in1, dst = sb("bfloat16", P, F), ps("float8_e4m3", P, F), sb("float16", P, F, offset=512)
    run = execute([TensorTensor(dst=dst, in0=in0, in1=in1, op="multiply")], preload=[(in0, a), (in1, b)], fetch=[dst])
    assert_bits_equal(run[0], ref_write(f64(a) * f64(b), "float16"))


def test_tensor_tensor_int_results_round_half_even_and_saturate():
    a = np.array([[5, 7, -5, 2**30, -(2**30), 9]], dtype=np.int32)
    b = np.array([[2, 2, 2, 4, 4, 0]], dtype=np.int32)
    in0, in1, dst = sb("int32", 1, 6), sb("int32", 1, 6, offset=64), sb("int16", 1, 6, offset=128)
    run = execute([TensorTensor(dst=dst, in0=in0, in1=in1, op="divide")], preload=[(in0, a), (in1, b)], fetch=[dst])
    assert run[0].tolist() == [[2, 4, -2, 32767, -32768, 32767]]  # 2.5->2, 3.5->4, -2.5->-2, 9/0=inf


@pytest.mark.parametrize("dtype", ["int32", "uint8", "int16", "uint32"])
def test_tensor_tensor_bitvec_ops_work_on_the_bits(dtype):
    info = np.iinfo(dtypes.to_numpy(dtype))
    a = RNG.integers(info.min, info.max, size=(4, 8), endpoint=True).astype(dtypes.to_numpy(dtype))
    b = RNG.integers(info.min, info.max, size=(4, 8), endpoint=True).astype(dtypes.to_numpy(dtype))
    shifts = RNG.integers(0, 8, size=(4, 8)).astype(dtypes.to_numpy(dtype))
    bits = 8 * a.itemsize
    cases = {
        "bitwise_and": (b, lambda x, y: x & y),
        "bitwise_or": (b, lambda x, y: x | y),
        "bitwise_xor": (b, lambda x, y: x ^ y),
        "left_shift": (shifts, lambda x, y: x << y),
        "right_shift": (shifts, lambda x, y: x >> y),  # arithmetic for signed types (Python ints)
    }
    for op, (other, fn) in cases.items():
        in0, in1, dst = sb(dtype, 4, 8), sb(dtype, 4, 8, offset=64), sb(dtype, 4, 8, offset=128)
        run = execute([TensorTensor(dst=dst, in0=in0, in1=in1, op=op)], preload=[(in0, a), (in1, other)], fetch=[dst])
        expected = []
        for x, y in zip(a.reshape(-1).tolist(), other.reshape(-1).tolist()):
            r = fn(x, y) & ((1 << bits) - 1)
            if info.min < 0 and r >= 1 << (bits - 1):
                r -= 1 << bits
            expected.append(r)
        assert run[0].reshape(-1).tolist() == expected, op


# --- tensor_scalar --------------------------------------------------------------------------------


def test_tensor_scalar_immediates_tiles_reverse_and_two_ops():
    x = data()
    col = data((P, 1))
    src, dst, operand = sb("float32", P, F), sb("bfloat16", P, F, offset=512), sb("float32", P, 1, offset=1024)
    cases = [
        (dict(op0="multiply", operand0=1.5, op1="add", operand1=-0.25), lambda v: np.float32(v * 1.5) + -0.25),
        (dict(op0="subtract", operand0=3.0, reverse0=True), lambda v: 3.0 - v),
        (dict(op0="divide", operand0=operand), lambda v: v / f64(col)),
        (dict(op0="divide", operand0=operand, reverse0=True), lambda v: f64(col) / v),
        (dict(op0="maximum", operand0=0.0, op1="subtract", operand1=operand, reverse1=True), lambda v: f64(col) - np.maximum(v, 0.0)),
    ]
    for kw, ref in cases:
        run = execute([TensorScalar(dst=dst, src=src, **kw)], preload=[(src, x), (operand, col)], fetch=[dst])
        with np.errstate(all="ignore"):
            expected = ref_write(ref(f64(x)), "bfloat16")
        assert_bits_equal(run[0], expected)


@pytest.mark.parametrize(
    "op, ref",
    [
        ("abs", np.abs),
        ("square", np.square),
        ("relu", lambda v: np.maximum(v, 0.0)),
        ("reciprocal", lambda v: 1.0 / v),
        ("rsqrt", lambda v: 1.0 / np.sqrt(v)),
    ],
)
def test_tensor_scalar_unary_ops(op, ref):
    x = data()
    x[0, 0] = 0.0
    if op == "rsqrt":
        x = np.abs(x) + 0.1
    src, dst = sb("float32", P, F), sb("float32", P, F, offset=512)
    run = execute([TensorScalar(dst=dst, src=src, op0=op)], preload=[(src, x)], fetch=[dst])
    with np.errstate(all="ignore"):
        np.testing.assert_allclose(run[0], ref(f64(x)), rtol=2e-7 if op != "rsqrt" else 1e-6)


def test_tensor_scalar_bitvec_keeps_every_bit_of_immediates():
    x = np.array([[0x7FFFFFFF, -1, 0x40000000, 12345]], dtype=np.int32)
    src, dst = sb("int32", 1, 4), sb("int32", 1, 4, offset=64)

    def run(**kw):
        return execute([TensorScalar(dst=dst, src=src, **kw)], preload=[(src, x)], fetch=[dst])[0][0].tolist()

    def s32(v):
        v &= 0xFFFFFFFF
        return v - (1 << 32) if v >= 1 << 31 else v

    assert run(op0="bitwise_and", operand0=0x7FFFFFF0) == [s32(v & 0x7FFFFFF0) for v in x[0].tolist()]
    assert run(op0="bitwise_xor", operand0=0xFFFFFFFF) == [s32(~v) for v in x[0].tolist()]
    assert run(op0="left_shift", operand0=1) == [s32(v << 1) for v in x[0].tolist()]
    assert run(op0="right_shift", operand0=4, op1="bitwise_or", operand1=1) == [s32((v >> 4) | 1) for v in x[0].tolist()]


def test_tensor_scalar_bitvec_tile_operand_is_exact():
    x = np.array([[0x7FFFFFFF, 0x7FFFFF7F]], dtype=np.int32).T.copy()  # [2, 1]
    mask = np.array([[0x7FFFFFF1], [0x0F0F0F0F]], dtype=np.int32)
    src, dst, operand = sb("int32", 2, 1), sb("int32", 2, 1, offset=64), sb("int32", 2, 1, offset=128)
    run = execute([TensorScalar(dst=dst, src=src, op0="bitwise_and", operand0=operand)], preload=[(src, x), (operand, mask)], fetch=[dst])
    assert run[0].reshape(-1).tolist() == [0x7FFFFFF1, 0x7FFFFF7F & 0x0F0F0F0F]


@pytest.mark.parametrize("engine", ["scalar", "gpsimd"])
def test_tensor_scalar_on_other_engines(engine):
    x = data()
    src, dst = sb("float32", P, F), sb("float32", P, F, offset=512)
    run = execute([TensorScalar(dst=dst, src=src, op0="multiply", operand0=2.0, op1="add", operand1=1.0, engine=engine)], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], ref_write(np.float32(f64(x) * 2.0).astype(np.float64) + 1.0, "float32"))


# --- scalar_tensor_tensor -------------------------------------------------------------------------


def test_scalar_tensor_tensor():
    x, y, col = data(), data(), data((P, 1))
    src, in1, dst, operand = sb("float32", P, F), sb("float32", P, F, offset=256), sb("float32", P, F, offset=512), sb("float32", P, 1, offset=1024)
    pre = [(src, x), (in1, y), (operand, col)]
    run = execute([ScalarTensorTensor(dst=dst, src=src, op0="multiply", operand0=operand, op1="add", in1=in1)], preload=pre, fetch=[dst])
    first = f64(np.float32(f64(x) * f64(col)))
    assert_bits_equal(run[0], ref_write(first + f64(y), "float32"))
    run = execute(
        [ScalarTensorTensor(dst=dst, src=src, op0="subtract", operand0=1.0, reverse0=True, op1="divide", in1=in1, reverse1=True)],
        preload=pre,
        fetch=[dst],
    )
    first = f64(np.float32(1.0 - f64(x)))
    assert_bits_equal(run[0], ref_write(f64(y) / first, "float32"))


def test_scalar_tensor_tensor_bitvec():
    x = np.array([[0x7FFFFFFF, 6]], dtype=np.int32)
    y = np.array([[0x10, 3]], dtype=np.int32)
    src, in1, dst = sb("int32", 1, 2), sb("int32", 1, 2, offset=64), sb("int32", 1, 2, offset=128)
    run = execute(
        [ScalarTensorTensor(dst=dst, src=src, op0="bitwise_and", operand0=0x7FFFFFF0, op1="bitwise_or", in1=in1)],
        preload=[(src, x), (in1, y)],
        fetch=[dst],
    )
    assert run[0].tolist() == [[(0x7FFFFFFF & 0x7FFFFFF0) | 0x10, (6 & 0x7FFFFFF0) | 3]]


# --- tensor_reduce --------------------------------------------------------------------------------


def _subtract_ref(v, ax):
    flat = v.reshape(v.shape[: v.ndim - len(ax)] + (-1,))
    return flat[..., 0] - flat[..., 1:].sum(axis=-1)


@pytest.mark.parametrize(
    "op, ref",
    [
        ("add", lambda v, ax: v.sum(axis=ax)),
        ("maximum", lambda v, ax: v.max(axis=ax)),
        ("minimum", lambda v, ax: v.min(axis=ax)),
        ("multiply", lambda v, ax: v.prod(axis=ax)),
        ("subtract", _subtract_ref),
        ("logical_or", lambda v, ax: (v != 0).any(axis=ax) * 1.0),
        ("logical_and", lambda v, ax: (v != 0).all(axis=ax) * 1.0),
        ("logical_xor", lambda v, ax: (v != 0).sum(axis=ax) % 2 * 1.0),
    ],
)
@pytest.mark.parametrize("free, axes", [((15,), (1,)), ((3, 5), (2,)), ((3, 5), (1, 2)), ((2, 3, 5), (2, 3))])
@pytest.mark.parametrize("negate", [False, True])
def test_tensor_reduce(op, ref, free, axes, negate):
    x = data((P,) + free, scale=1.5)
    x.reshape(P, -1)[0, :] = 0.0  # a row of zeros for the logical ops
    x.reshape(P, -1)[1, ::2] = 0.0
    src = sb("float32", P, free)
    kept_shape = free[: len(free) - len(axes)]
    dst = sb("float32", P, kept_shape or (1,), offset=512)
    run = execute([TensorReduce(dst=dst, src=src, op=op, axes=axes, negate=negate)], preload=[(src, x)], fetch=[dst])
    expected = ref(f64(x), tuple(axes)).reshape(run[0].shape)
    if negate:
        expected = -expected
    np.testing.assert_allclose(run[0], expected, rtol=1e-5, atol=1e-5)


def test_tensor_reduce_bitvec_on_integers():
    x = RNG.integers(0, 2**31 - 1, size=(4, 6)).astype(np.int32)
    src, dst = sb("int32", 4, 6), sb("int32", 4, 1, offset=64)
    for op, fn in (("bitwise_or", np.bitwise_or), ("bitwise_and", np.bitwise_and), ("bitwise_xor", np.bitwise_xor)):
        run = execute([TensorReduce(dst=dst, src=src, op=op)], preload=[(src, x)], fetch=[dst])
        assert run[0].reshape(-1).tolist() == fn.reduce(x, axis=1).tolist()


def test_tensor_reduce_rounds_the_result_to_dst():
    x = np.full((2, 3), 1.0 / 3.0, dtype=np.float32)
    src, dst = sb("float32", 2, 3), sb("bfloat16", 2, 1, offset=64)
    run = execute([TensorReduce(dst=dst, src=src, op="add")], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], ref_write(np.float32(np.float32(x[0, 0] + x[0, 1]) + x[0, 2]) * np.ones((2, 1)), "bfloat16"))


# --- copies, predicated copies, select ------------------------------------------------------------


@pytest.mark.parametrize("dst_dtype", ["bfloat16", "float16", "float8_e4m3fn", "float8_e5m2", "int8", "uint16", "int32"])
def test_tensor_copy_casts_like_the_write_port(dst_dtype):
    x = data(scale=300.0)
    x[0, :6] = [np.nan, np.inf, -np.inf, 2.5, -2.5, 1e20]
    src, dst = sb("float32", P, F), sb(dst_dtype, P, F, offset=512)
    run = execute([TensorCopy(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], rounded(x, dst_dtype))


def test_tensor_copy_same_dtype_is_bit_exact():
    x = np.array([[0x7FC00001, 0xFFBADBAD, 0x00000001, 0x80000000]], dtype=np.uint32).view(np.float32)
    src, dst = ps("float32", 1, 4), sb("float32", 1, 4, offset=64)
    for engine in ("vector", "scalar"):
        run = execute([TensorCopy(dst=dst, src=src, engine=engine)], preload=[(src, x)], fetch=[dst])
        assert_bits_equal(run[0], x)


def test_int_to_narrow_float_goes_through_fp32():
    x = np.array([[2**24 + 2**16 + 1, 3]], dtype=np.int32)
    src, dst = sb("int32", 1, 2), sb("bfloat16", 1, 2, offset=64)
    run = execute([TensorCopy(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    assert run[0].astype(np.float64).tolist() == [[2.0**24, 3.0]]  # fp32 ties to 2^24+2^16, then bf16 ties to even


def test_copy_predicated_keeps_dst_bits_where_false():
    old = np.array([[16777217, -1, 2**31 - 1, 5]], dtype=np.int32)
    src = np.array([[1, 2, 3, 4]], dtype=np.int32)
    pred = np.array([[0.0, 1.0, 0.0, -2.0]], dtype=np.float32)
    d, s, p = sb("int32", 1, 4), sb("int32", 1, 4, offset=64), sb("float32", 1, 4, offset=128)
    pre = [(d, old), (s, src), (p, pred)]
    run = execute([CopyPredicated(dst=d, src=s, predicate=p)], preload=pre, fetch=[d])
    assert run[0].tolist() == [[16777217, 2, 2**31 - 1, 4]]
    run = execute([CopyPredicated(dst=d, src=s, predicate=p, reverse=True)], preload=pre, fetch=[d])
    assert run[0].tolist() == [[1, -1, 3, 5]]


def test_copy_predicated_casts_src():
    old = np.zeros((1, 3), dtype=BF16)
    src = np.array([[1 + 2**-8, 2.0, 3.0]], dtype=np.float32)
    d, s, p = sb("bfloat16", 1, 3), sb("float32", 1, 3, offset=64), sb("uint8", 1, 3, offset=128)
    run = execute([CopyPredicated(dst=d, src=s, predicate=p)], preload=[(d, old), (s, src), (p, np.array([[1, 0, 1]], np.uint8))], fetch=[d])
    assert run[0].astype(np.float32).tolist() == [[1.0, 0.0, 3.0]]


def test_select_with_tile_and_immediate():
    pred = (RNG.random((P, F)) > 0.5).astype(np.float32)
    a, b = data(), data()
    pr, on_t, on_f, dst = sb("float32", P, F), sb("float32", P, F, offset=256), sb("float32", P, F, offset=512), sb("bfloat16", P, F, offset=768)
    pre = [(pr, pred), (on_t, a), (on_f, b)]
    run = execute([Select(dst=dst, predicate=pr, on_true=on_t, on_false=on_f)], preload=pre, fetch=[dst])
    assert_bits_equal(run[0], rounded(np.where(pred != 0, a, b), "bfloat16"))
    run = execute([Select(dst=dst, predicate=pr, on_true=on_t, on_false=-7.5, engine="gpsimd")], preload=pre, fetch=[dst])
    assert_bits_equal(run[0], rounded(np.where(pred != 0, a, -7.5), "bfloat16"))


# --- memset, reciprocal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "dtype, value, expected",
    [
        ("float32", 0.1, np.float32(0.1)),
        ("bfloat16", 1.0 / 3.0, np.float32(1 / 3).astype(BF16)),
        ("bfloat16", 1 + 2**-8 + 2**-30, 1.0),  # an fp32 immediate: rounds to the tie, then to even
        ("float8_e4m3fn", 1000.0, 448.0),
        ("float8_e5m2", -1e9, -57344.0),
        ("int32", 16777217, 16777217),
        ("int32", 2**40, 2**31 - 1),
        ("uint8", 300, 255),
        ("uint8", -5, 0),
        ("int16", -3.0, -3),
    ],
)
def test_memset(dtype, value, expected):
    dst = sb(dtype, 4, 5)
    run = execute([Memset(dst=dst, value=value)], fetch=[dst])
    np.testing.assert_array_equal(run[0].astype(np.float64), np.full((4, 5), float(expected)))


def test_memset_on_psum_and_other_engines():
    for engine in ("gpsimd", "scalar"):
        dst = sb("float32", 2, 2)
        assert execute([Memset(dst=dst, value=2.0, engine=engine)], fetch=[dst])[0].tolist() == [[2.0, 2.0], [2.0, 2.0]]
    dst = ps("float32", 2, 2)
    assert execute([Memset(dst=dst, value=-1.0)], fetch=[dst])[0].tolist() == [[-1.0, -1.0], [-1.0, -1.0]]


def test_reciprocal():
    x = data()
    x[0, 0], x[0, 1] = 0.0, -0.0
    src, dst = sb("float32", P, F), sb("float32", P, F, offset=512)
    run = execute([Reciprocal(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    with np.errstate(divide="ignore"):
        assert_bits_equal(run[0], ref_write(1.0 / f64(x), "float32"))
    assert run[0][0, 0] == np.inf and run[0][0, 1] == -np.inf


# --- bn_stats / bn_aggr ---------------------------------------------------------------------------


def test_bn_stats_layout():
    x = data((4, 10))
    src, dst = sb("float32", 4, 10), sb("float32", 4, 6, offset=512)
    run = execute([BnStats(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    for half, off in ((f64(x)[:, 0::2], 0), (f64(x)[:, 1::2], 3)):
        np.testing.assert_allclose(run[0][:, off], 5.0)
        np.testing.assert_allclose(run[0][:, off + 1], half.mean(axis=1), rtol=1e-6)
        np.testing.assert_allclose(run[0][:, off + 2], ((half - half.mean(axis=1, keepdims=True)) ** 2).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize("sizes", [(512,), (512, 512, 100), (1,), (3, 7)])
def test_bn_stats_then_aggr_give_mean_and_population_variance(sizes):
    chunks = [data((8, s), scale=3.0) + 1.0 for s in sizes]
    stats = sb("float32", 8, (len(sizes), 6), offset=8192)
    insts, pre, offset = [], [], 0
    for i, chunk in enumerate(chunks):
        src = sb("float32", 8, chunk.shape[1], offset=offset)
        pre.append((src, chunk))
        offset += chunk.size // 8 * 4
        insts.append(BnStats(dst=sb("float32", 8, 6, offset=8192 + 24 * i), src=src))
    out = sb("float32", 8, 2, offset=9000)
    insts.append(BnAggr(dst=out, src=stats))
    run = execute(insts, preload=pre, fetch=[out])
    everything = np.concatenate([f64(c) for c in chunks], axis=1)
    np.testing.assert_allclose(run[0][:, 0], everything.mean(axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run[0][:, 1], everything.var(axis=1), rtol=1e-5, atol=1e-6)


# --- stream shuffle -------------------------------------------------------------------------------


def test_stream_shuffle_within_quadrants():
    x = data((64, 4))
    mask = tuple(reversed(range(32)))
    src, dst = sb("float32", 64, 4), sb("float32", 64, 4, offset=256)
    run = execute([StreamShuffle(dst=dst, src=src, mask=mask)], preload=[(src, x)], fetch=[dst])
    expected = np.stack([x[(r // 32) * 32 + mask[r % 32]] for r in range(64)])
    assert_bits_equal(run[0], expected)


def test_stream_shuffle_255_keeps_dst_and_broadcast():
    x, old = data((32, 4)), data((32, 4))
    mask = (0,) * 16 + (255,) * 16
    src, dst = sb("float32", 32, 4), sb("bfloat16", 32, 4, offset=256)
    run = execute([StreamShuffle(dst=dst, src=src, mask=mask)], preload=[(src, x), (dst, old.astype(BF16))], fetch=[dst])
    expected = np.concatenate([np.repeat(x[:1], 16, 0).astype(BF16), old[16:].astype(BF16)])
    assert_bits_equal(run[0], expected)


def test_stream_shuffle_source_outside_the_pattern():
    mask = (20,) + (0,) * 31
    src, dst = sb("float32", 16, 4), sb("float32", 16, 4, offset=256)
    with pytest.raises(ValidationError) as info:  # found when the instruction is validated
        execute([StreamShuffle(dst=dst, src=src, mask=mask)], preload=[(src, data((16, 4)))])
    assert info.value.rule == "shuffle.source" and "partition 20" in str(info.value)
    with pytest.raises(AccessPatternError) as info:  # and by the executor when run unvalidated
        execute([StreamShuffle(dst=dst, src=src, mask=mask)], preload=[(src, data((16, 4)))], validate=False)
    assert info.value.rule == "shuffle.source" and "partition 20" in str(info.value)


def test_stream_shuffle_broadcasts_one_partition_into_a_quadrant():
    src, dst = sb("float32", 1, 4), sb("float32", 32, 4, start=32, offset=256)
    row = data((1, 4))
    run = execute([StreamShuffle(dst=dst, src=src, mask=(0,) * 32)], preload=[(src, row)], fetch=[dst])
    np.testing.assert_array_equal(run[0], np.broadcast_to(row, (32, 4)))


# --- validation rules -----------------------------------------------------------------------------

A = sb("float32", P, F)
B = sb("float32", P, F, offset=256)
D = sb("float32", P, F, offset=512)


@pytest.mark.parametrize(
    "inst, rule, value",
    [
        (TensorTensor(dst=D, in0=ps("float32", P, F), in1=ps("float32", P, F, offset=256), op="add"), "tensor_tensor.both_psum", "PSUM"),
        (TensorTensor(dst=D, in0=A, in1=sb("float32", 8, F, offset=256), op="add"), "shape.partition_mismatch", "8"),
        (TensorTensor(dst=D, in0=A, in1=sb("float32", P, F + 1, offset=256), op="add"), "shape.free_mismatch", str(F + 1)),
        (TensorTensor(dst=D, in0=A, in1=B, op="bitwise_and"), "alu.bitvec_dtype", "float32"),
        (TensorTensor(dst=D, in0=A, in1=B, op="frobnicate"), "op.unknown", "'frobnicate'"),
        (TensorTensor(dst=D, in0=ps("float32", P, F), in1=B, op="add", engine="gpsimd"), "engine.memory_access", "PSUM"),
        (TensorTensor(dst=D, in0=A, in1=B, op="add", engine="scalar"), "engine.unsupported", "scalar"),
        (TensorTensor(dst=sb("float32", 64, 4, start=32), in0=sb("float32", 64, 4), in1=sb("float32", 64, 4, offset=64), op="add"), "partition.start", "got 32"),
        (TensorScalar(dst=D, src=A, op0="add"), "tensor_scalar.operand", "operand0"),
        (TensorScalar(dst=D, src=A, op0="add", operand0=1.0, operand1=2.0), "tensor_scalar.operand", "operand1"),
        (TensorScalar(dst=D, src=A, op0="maximum", operand0=1.0, engine="scalar"), "tensor_scalar.scalar_engine_op", "maximum"),
        (TensorScalar(dst=sb("int32", P, F), src=sb("int32", P, F, offset=256), op0="bitwise_and", operand0=1, engine="gpsimd"), "alu.bitvec_engine", "bitwise_and"),
        (TensorScalar(dst=D, src=A, op0="add", operand0="one"), "operand.type", "str"),
        (TensorScalar(dst=D, src=A, op0="add", operand0=sb("float32", P, 2, offset=1024)), "operand.shape", "[16, 2]"),
        (TensorScalar(dst=D, src=A, op0="add", operand0=sb("float32", 8, 1, offset=1024)), "shape.partition_mismatch", "8"),
        (TensorScalar(dst=D, src=A, op0="abs", operand0=1.0), "op.unknown", "'abs'"),
        (ScalarTensorTensor(dst=D, src=A, op0="add", operand0=1.0, op1="bitwise_or", in1=B), "alu.bitvec_dtype", "float32"),
        (TensorReduce(dst=sb("float32", P, 1), src=sb("float32", P, (3, 4), offset=256), op="add", axes=(1,)), "reduce.axes", "[1]"),
        (TensorReduce(dst=sb("float32", P, 2), src=sb("float32", P, (3, 4), offset=256), op="add", axes=(2,)), "reduce.dst_shape", "3"),
        (TensorReduce(dst=sb("float32", P, 1), src=A, op="bitwise_or"), "alu.bitvec_dtype", "float32"),
        (TensorReduce(dst=sb("float32", P, 1), src=A, op="divide"), "op.unknown", "'divide'"),
        (TensorReduce(dst=sb("float32", 8, 1), src=A, op="add"), "shape.partition_mismatch", "8"),
        (Memset(dst=sb("int32", P, F), value=2.5), "memset.value", "2.5"),
        (Memset(dst=sb("int32", P, F), value=float("nan")), "memset.value", "nan"),
        (Memset(dst=sb("uint8", P, F), value=float("inf")), "memset.value", "inf"),
        (Memset(dst=ps("float32", P, F), value=1.0, engine="gpsimd"), "engine.memory_access", "PSUM"),
        (CopyPredicated(dst=D, src=A, predicate=B, engine="gpsimd"), "engine.unsupported", "gpsimd"),
        (CopyPredicated(dst=D, src=A, predicate=sb("float32", P, 3, offset=256)), "shape.free_mismatch", "3"),
        (Select(dst=D, predicate=A, on_true=B, on_false=sb("float32", P, 5, offset=1024)), "shape.free_mismatch", "5"),
        (TensorCopy(dst=D, src=ps("float32", P, F), engine="gpsimd"), "engine.memory_access", "PSUM"),
        (TensorCopy(dst=sb("float64", P, F), src=A), "dtype.unsupported_on_chip", "float64"),
        (Reciprocal(dst=D, src=sb("float32", P, 2)), "shape.free_mismatch", "2"),
        (BnStats(dst=sb("float32", P, 6, offset=4096), src=sb("float32", P, 513)), "bn_stats.fmax", "513"),
        (BnStats(dst=sb("float32", P, 4, offset=4096), src=A), "bn_stats.dst", "[[1, 4]]"),
        (BnStats(dst=sb("int32", P, 6, offset=4096), src=A), "bn_stats.dst", "int32"),
        (BnAggr(dst=sb("float32", P, 2, offset=4096), src=sb("float32", P, 7)), "bn_aggr.src", "7"),
        (BnAggr(dst=sb("float32", P, 3, offset=4096), src=sb("float32", P, 6)), "bn_aggr.dst", "[[1, 3]]"),
        (StreamShuffle(dst=D, src=A, mask=(0,) * 31), "shuffle.mask", "[0, 0"),
        (StreamShuffle(dst=D, src=A, mask=(0,) * 31 + (40,)), "shuffle.mask", "40"),
        (TensorTensor(dst=sb("float32", P, F, offset=224 * 1024 - 16), in0=A, in1=B, op="add"), "ap.free_bounds", str(224 * 1024)),
    ],
    ids=lambda v: v if isinstance(v, str) and "." in v else None,
)
def test_rules(inst, rule, value):
    err = rule_of(inst)
    assert err.rule == rule, err
    assert value in str(err), str(err)


def test_reversed_bypass_broadcasts_the_operand():
    x, col = data((4, 6)), data((4, 1))
    src, dst, operand = sb("float32", 4, 6), sb("float32", 4, 6, offset=256), sb("float32", 4, 1, offset=512)
    run = execute([TensorScalar(dst=dst, src=src, op0="bypass", operand0=operand, reverse0=True)], preload=[(src, x), (operand, col)], fetch=[dst])
    np.testing.assert_array_equal(run[0], np.repeat(col, 6, axis=1))
    run = execute([ScalarTensorTensor(dst=dst, src=src, op0="bypass", operand0=2.5, reverse0=True, op1="add", in1=src)], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], ref_write(2.5 + f64(x), "float32"))


def test_engine_access_patterns_have_int16_strides_and_uint16_counts():
    from neuron_sim.isa import DmaCopy
    from neuron_sim.memory.access_pattern import AccessPattern

    wide = sb("uint8", 2, 70000)
    err = rule_of(TensorCopy(dst=wide, src=sb("uint8", 2, 70000, offset=100000)))
    assert err.rule == "ap.pattern_limits" and "count 70000" in str(err)
    strided = AccessPattern("sbuf", "bfloat16", 0, 2, ((40000, 2), (1, 4)))
    err = rule_of(TensorCopy(dst=sb("bfloat16", 2, 8, offset=200000), src=strided))
    assert err.rule == "ap.pattern_limits" and "stride 40000" in str(err)
    TensorCopy(dst=sb("uint8", 2, 65535), src=sb("uint8", 2, 65535, offset=100000)).validate(TRN2)
    DmaCopy(dst=wide, src=sb("uint8", 2, 70000, offset=100000)).validate(TRN2)  # DMA descriptors are not limited
