"""TensorE: matmul (fp32 accumulation in PSUM, every input dtype, double_row FP8) and transposes."""

import numpy as np
import pytest
from helpers import BF16, TRN2, TRN3, assert_bits_equal, execute, ps, sb
from neuron_sim import ValidationError, dtypes
from neuron_sim.isa import Matmul, Transpose
from neuron_sim.memory.access_pattern import AccessPattern

RNG = np.random.default_rng(1)


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


def representable(shape, dtype, scale=1.0):
    """Random values exactly representable in ``dtype`` (so the reference sees the same inputs)."""
    x = (RNG.standard_normal(shape) * scale).astype(np.float32)
    return x.astype(dtypes.to_numpy(dtype))


def tf32_reference(x: np.ndarray) -> np.ndarray:
    """Round to 10 fraction bits, half to even, with frexp/ldexp (no bit tricks)."""
    m, e = np.frexp(x.astype(np.float64))  # x = m * 2**e, 0.5 <= |m| < 1
    return np.ldexp(np.round(m * 2.0**11) / 2.0**11, e)


def check_matmul(a_t, b, got, extra=None):
    """``got`` vs float64 ``a_t.T @ b`` within fp32 accumulation error."""
    a64, b64 = a_t.astype(np.float64), b.astype(np.float64)
    exact = a64.T @ b64 + (0 if extra is None else extra)
    bound = (np.abs(a64).T @ np.abs(b64) + (0 if extra is None else np.abs(extra))) * (a_t.shape[0] + 2) * 2.0**-24
    assert got.dtype == np.float32
    assert (np.abs(got.astype(np.float64) - exact) <= bound + 1e-30).all()


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2"])
@pytest.mark.parametrize("k,m,n", [(128, 128, 512), (32, 16, 8), (64, 1, 1)])
def test_matmul_matches_float64_reference(dtype, k, m, n):
    a_t = representable((k, m), dtype)
    b = representable((k, n), dtype)
    stationary, moving, dst = sb(dtype, k, m), sb(dtype, k, n, offset=1024), ps("float32", m, n)
    run = execute(
        [Matmul(dst=dst, stationary=stationary, moving=moving)],
        preload=[(stationary, a_t), (moving, b)],
        fetch=[dst],
    )
    check_matmul(a_t, b, run[0])


def test_matmul_tf32_rounds_inputs_to_10_mantissa_bits():
    a_t = RNG.standard_normal((16, 8)).astype(np.float32)
    b = RNG.standard_normal((16, 4)).astype(np.float32)
    a_t[0, 0] = 1 + 2**-11  # a tie: rounds to even (1.0)
    a_t[1, 0] = 1 + 3 * 2**-11  # a tie: rounds up to 1 + 2**-9
    st, mv, dst = sb("tfloat32", 16, 8), sb("tfloat32", 16, 4, offset=1024), ps("float32", 8, 4)
    run = execute([Matmul(dst=dst, stationary=st, moving=mv)], preload=[(st, a_t), (mv, b)], fetch=[dst])
    ra, rb = tf32_reference(a_t), tf32_reference(b)
    assert ra[0, 0] == 1.0 and ra[1, 0] == 1 + 2**-9
    check_matmul(ra, rb, run[0])
    # and it differs from a plain fp32 matmul somewhere
    assert not np.allclose(run[0], a_t.T.astype(np.float64) @ b, rtol=1e-7, atol=0)


def test_accumulate_adds_into_psum_and_false_overwrites():
    a1, b1 = representable((64, 32), "bfloat16"), representable((64, 128), "bfloat16")
    a2, b2 = representable((64, 32), "bfloat16"), representable((64, 128), "bfloat16")
    s1, m1 = sb("bfloat16", 64, 32), sb("bfloat16", 64, 128, offset=256)
    s2, m2 = sb("bfloat16", 64, 32, offset=1024), sb("bfloat16", 64, 128, offset=2048)
    dst = ps("float32", 32, 128, offset=3 * 2048)  # bank 3
    run = execute(
        [Matmul(dst=dst, stationary=s1, moving=m1), Matmul(dst=dst, stationary=s2, moving=m2, accumulate=True)],
        preload=[(s1, a1), (m1, b1), (s2, a2), (m2, b2)],
        fetch=[dst],
    )
    first = a1.astype(np.float64).T @ b1.astype(np.float64)
    check_matmul(a2, b2, run[0], extra=first)
    run = execute(
        [Matmul(dst=dst, stationary=s1, moving=m1), Matmul(dst=dst, stationary=s2, moving=m2, accumulate=False)],
        preload=[(s1, a1), (m1, b1), (s2, a2), (m2, b2)],
        fetch=[dst],
    )
    check_matmul(a2, b2, run[0])


def test_matmul_on_trn3_can_write_bf16_psum():
    a_t, b = representable((32, 16), "bfloat16"), representable((32, 64), "bfloat16")
    st, mv, dst = sb("bfloat16", 32, 16), sb("bfloat16", 32, 64, offset=512), ps("bfloat16", 16, 64)
    run = execute([Matmul(dst=dst, stationary=st, moving=mv)], preload=[(st, a_t), (mv, b)], fetch=[dst], arch=TRN3)
    exact = a_t.astype(np.float64).T @ b.astype(np.float64)
    got = run[0].astype(np.float64)
    assert run[0].dtype == BF16
    np.testing.assert_allclose(got, exact, rtol=2**-8, atol=1e-6)


def test_double_row_fp8_contracts_two_rows_per_partition():
    k, m, n = 128, 16, 64
    a_t = representable((k, 2, m), "float8_e4m3")
    b = representable((k, 2, n), "float8_e4m3")
    st, mv, dst = sb("float8_e4m3", k, (2, m)), sb("float8_e4m3", k, (2, n), offset=1024), ps("float32", m, n)
    inst = Matmul(dst=dst, stationary=st, moving=mv, perf_mode="double_row")
    assert (inst.k, inst.m, inst.n) == (256, m, n)
    run = execute([inst], preload=[(st, a_t), (mv, b)], fetch=[dst])
    check_matmul(a_t.reshape(2 * k, m), b.reshape(2 * k, n), run[0])


# --- transposes -----------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e5m2"])
def test_tensor_engine_transpose_is_bit_exact_including_nan_and_inf(dtype):
    np_dtype = dtypes.to_numpy(dtype)
    x = RNG.integers(0, 256, size=(96, 40 * np_dtype.itemsize), dtype=np.uint8).view(np_dtype)
    src, dst = sb(dtype, 96, 40), ps(dtype, 40, 96)
    run = execute([Transpose(dst=dst, src=src)], preload=[(src, x)], fetch=[dst])
    assert_bits_equal(run[0], np.ascontiguousarray(x.T))


def test_tensor_engine_transpose_may_widen_to_fp32():
    x = representable((8, 4), "bfloat16")
    run = execute([Transpose(dst=ps("float32", 4, 8), src=sb("bfloat16", 8, 4))], preload=[(sb("bfloat16", 8, 4), x)], fetch=[ps("float32", 4, 8)])
    np.testing.assert_array_equal(run[0], x.T.astype(np.float32))


def test_vector_engine_transpose_32x32_in_sbuf_and_psum():
    x = RNG.standard_normal((32, 32)).astype(np.float32)
    run = execute(
        [
            Transpose(dst=sb("float32", 32, 32, offset=4096), src=sb("float32", 32, 32), engine="vector"),
            Transpose(dst=ps("float32", 32, 32), src=sb("float32", 32, 32, offset=4096), engine="vector"),
        ],
        preload=[(sb("float32", 32, 32), x)],
        fetch=[sb("float32", 32, 32, offset=4096), ps("float32", 32, 32)],
    )
    np.testing.assert_array_equal(run[0], x.T)
    np.testing.assert_array_equal(run[1], x)


# --- validation rules -----------------------------------------------------------------------------


def mm(arch=TRN2, **kw):
    base = dict(dst=ps("float32", 64, 128), stationary=sb("bfloat16", 128, 64), moving=sb("bfloat16", 128, 128, offset=1024))
    base.update(kw)
    return Matmul(**base)


def test_a_valid_matmul_passes():
    mm().validate(TRN2)
    mm().validate(TRN3)


@pytest.mark.parametrize(
    "kw, rule, value",
    [
        (dict(stationary=ps("bfloat16", 128, 64, offset=4096)), "engine.memory_access", "PSUM"),
        (dict(dst=sb("float32", 64, 128, offset=8192)), "engine.memory_access", "SBUF"),
        (dict(stationary=sb("int8", 128, 64)), "matmul.dtype", "int8"),
        (dict(stationary=sb("float8_e4m3fn", 128, 64), moving=sb("float8_e4m3fn", 128, 128, offset=1024)), "matmul.dtype", "float8_e4m3fn"),
        (dict(stationary=sb("float32", 128, 64)), "matmul.dtype_pair", "float32"),
        (dict(dst=ps("bfloat16", 64, 128)), "matmul.psum_dtype", "bfloat16"),
        (dict(moving=sb("bfloat16", 64, 128, offset=1024)), "matmul.k_mismatch", "K=64"),
        (dict(stationary=sb("bfloat16", 128, 129), dst=ps("float32", 128, 128)), "matmul.stationary_fmax", "M=129"),
        (dict(moving=sb("bfloat16", 128, 513, offset=1024), dst=ps("float32", 64, 512)), "matmul.moving_fmax", "N=513"),
        (dict(dst=ps("float32", 64, 64)), "matmul.dst_shape", "[64, 64]"),
        (dict(perf_mode="turbo"), "matmul.perf_mode", "'turbo'"),
        (dict(perf_mode="double_row"), "matmul.perf_mode", "bfloat16"),
        (dict(dst=ps("float32", 64, 128, offset=1800)), "psum.bank_overflow", "[1800, 2312)"),
        (dict(stationary=sb("bfloat16", 64, 64, start=32), moving=sb("bfloat16", 64, 128, start=32, offset=1024)), "partition.start", "got 32"),
        (dict(engine="vector"), "engine.unsupported", "vector"),
        (dict(moving=sb("int64", 128, 128, offset=1024)), "dtype.unsupported_on_chip", "int64"),
    ],
)
def test_matmul_rules(kw, rule, value):
    err = rule_of(mm(**kw))
    assert err.rule == rule, err
    assert value in str(err)


def test_e4m3fn_and_bf16_psum_are_trn3_features():
    mm(stationary=sb("float8_e4m3fn", 128, 64), moving=sb("float8_e4m3fn", 128, 128, offset=1024)).validate(TRN3)
    mm(dst=ps("bfloat16", 64, 128)).validate(TRN3)


def test_double_row_needs_an_even_free_size():
    inst = mm(
        stationary=sb("float8_e4m3", 128, 65),
        moving=sb("float8_e4m3", 128, 128, offset=1024),
        dst=ps("float32", 32, 64),
        perf_mode="double_row",
    )
    err = rule_of(inst)
    assert err.rule == "matmul.perf_mode" and "[128, 65]" in str(err)


@pytest.mark.parametrize(
    "kw, rule, value",
    [
        (dict(src=sb("float32", 64, 129), dst=ps("float32", 128, 64)), "transpose.size", "[64, 129]"),
        (dict(dst=ps("float32", 64, 32)), "transpose.shape", "[64, 32]"),
        (dict(dst=ps("bfloat16", 32, 64)), "transpose.dtype", "bfloat16"),
        (dict(dst=sb("float32", 32, 64, offset=4096)), "engine.memory_access", "SBUF"),
        (dict(src=ps("float32", 64, 32, offset=4096)), "engine.memory_access", "PSUM"),
        (dict(engine="vector"), "transpose.size", "32x32"),
        (dict(dst=ps("float32", 32, 64, offset=2000)), "psum.bank_overflow", "[2000, 2256)"),
        (dict(engine="gpsimd"), "engine.unsupported", "gpsimd"),
    ],
)
def test_transpose_rules(kw, rule, value):
    base = dict(dst=ps("float32", 32, 64), src=sb("float32", 64, 32))
    base.update(kw)
    err = rule_of(Transpose(**base))
    assert err.rule == rule, err
    assert value in str(err)


def test_vector_transpose_keeps_dtype():
    err = rule_of(Transpose(dst=sb("float32", 16, 16, offset=1024), src=sb("bfloat16", 16, 16), engine="vector"))
    assert err.rule == "transpose.dtype"


def test_matmul_dst_may_not_straddle_partition_quadrants():
    dst = AccessPattern("psum", "float32", 16, 32, ((1, 128),))
    err = rule_of(mm(dst=dst, stationary=sb("bfloat16", 128, 32)))
    assert err.rule == "partition.start" and "got 16" in str(err)
