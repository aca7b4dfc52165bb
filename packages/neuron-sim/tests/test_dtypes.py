"""dtypes: names, sizes, and convert() = the write port's rounding (RNE, fp8/int saturation, NaN->0)."""

import math

import ml_dtypes
import numpy as np
import pytest
from helpers import BF16, FP8_E4M3, FP8_E5M2, assert_bits_equal
from hypothesis import given, settings
from hypothesis import strategies as st
from neuron_sim import ValidationError, dtypes

# --- independent references ---------------------------------------------------------------------


def bf16_rne_bits(values: np.ndarray) -> np.ndarray:
    """fp32 -> bf16 by integer arithmetic on the bits (round half to even), NaN kept quiet."""
    bits = np.asarray(values, dtype=np.float32).view(np.uint32).astype(np.uint64)
    lsb = (bits >> 16) & 1
    rounded = ((bits + 0x7FFF + lsb) >> 16).astype(np.uint16)
    nan = np.isnan(np.asarray(values, dtype=np.float32))
    rounded[nan] = ((bits[nan] >> 16) | 0x40).astype(np.uint16)
    return rounded.view(BF16)


def int_reference(values, lo, hi) -> list[int]:
    """Round half to even with Python's round(), saturate, NaN -> 0."""
    out = []
    for v in np.asarray(values, dtype=np.float64).tolist():
        if math.isnan(v):
            out.append(0)
        elif math.isinf(v):
            out.append(hi if v > 0 else lo)
        else:
            out.append(min(max(round(v), lo), hi))
    return out


# --- names --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given_, expected",
    [
        ("bfloat16", "bfloat16"),
        ("bf16", "bfloat16"),
        ("fp32", "float32"),
        ("fp16", "float16"),
        ("tf32", "tfloat32"),
        ("bool_", "bool"),
        (np.float32, "float32"),
        (np.dtype(np.int8), "int8"),
        (BF16, "bfloat16"),
        (FP8_E4M3, "float8_e4m3"),
        (FP8_E5M2, "float8_e5m2"),
        (ml_dtypes.float8_e4m3fn, "float8_e4m3fn"),
        (bool, "bool"),
        (float, "float64"),
        ("uint32", "uint32"),
    ],
)
def test_dtype_name_canonicalizes(given_, expected):
    assert dtypes.dtype_name(given_) == expected


@pytest.mark.parametrize("bad", ["float128", "complex64", "nonsense", np.complex64, 17])
def test_unsupported_dtype_names_rule_and_value(bad):
    with pytest.raises(ValidationError) as info:
        dtypes.dtype_name(bad)
    assert info.value.rule == "dtype.unsupported"
    assert repr(bad) in str(info.value) or str(bad) in str(info.value)


def test_itemsize_and_kinds():
    sizes = {"bool": 1, "uint8": 1, "int16": 2, "int32": 4, "bfloat16": 2, "float16": 2, "float32": 4,
             "tfloat32": 4, "float8_e4m3": 1, "float8_e5m2": 1, "int64": 8, "float64": 8}
    for name, size in sizes.items():
        assert dtypes.itemsize(name) == size, name
    assert dtypes.is_float("bfloat16") and dtypes.is_float("float8_e5m2") and not dtypes.is_float("int32")
    assert dtypes.is_int("uint16") and not dtypes.is_int("float32") and not dtypes.is_int("bool")
    assert set(dtypes.HBM_ONLY) == {"int64", "float64"}
    assert dtypes.to_numpy("tfloat32") == np.dtype(np.float32)
    assert "bfloat16" in dtypes.all_names()


# --- float rounding -----------------------------------------------------------------------------


def test_bf16_round_half_to_even_cases():
    one = 1.0
    values = np.array(
        [
            one + 2**-8,  # exactly halfway between 1 and 1+2^-7 -> even (1.0)
            one + 3 * 2**-8,  # halfway between 1+2^-7 and 1+2^-6 -> even (1+2^-6)
            one + 2**-8 + 2**-20,  # above halfway -> up
            one + 2**-9,  # below halfway -> down
            -(one + 2**-8),
            3.0e38,  # rounds to inf? no: bf16 max is 3.39e38
            np.float32(3.4e38),  # above bf16 max after rounding -> inf (bf16 does not saturate)
        ],
        dtype=np.float32,
    )
    got = dtypes.convert(values, "bfloat16")
    expected = np.array([1.0, 1 + 2**-6, 1 + 2**-7, 1.0, -1.0], dtype=np.float64)
    np.testing.assert_array_equal(got[:5].astype(np.float64), expected)
    assert np.isfinite(float(got[5]))
    assert np.isinf(float(got[6]))
    assert_bits_equal(got, bf16_rne_bits(values))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False), min_size=1, max_size=64))
def test_bf16_matches_bitwise_rne(values):
    x = np.array(values, dtype=np.float32)
    assert_bits_equal(dtypes.convert(x, "bfloat16"), bf16_rne_bits(x))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=True), min_size=1, max_size=64))
def test_float16_is_nearest_without_saturation(values):
    x = np.array(values, dtype=np.float32)
    got = dtypes.convert(x, "float16").astype(np.float64)
    grid = np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float64)
    grid = np.unique(grid[np.isfinite(grid)])
    for v, g in zip(x.astype(np.float64).tolist(), got.tolist()):
        if math.isinf(v) or abs(v) >= 65520.0:  # 65520 is halfway between the max 65504 and 2^16
            assert math.isinf(g) and math.copysign(1, g) == math.copysign(1, v)
        else:
            assert abs(g - v) == np.abs(grid - v).min(), (v, g)


def test_float64_is_rounded_through_fp32_like_the_engines():
    # 1 + 2^-8 + 2^-30 rounds to fp32 1+2^-8 (a bf16 tie) then to even: 1.0. Direct RNE would give 1+2^-7.
    v = np.array([1 + 2**-8 + 2**-30])
    assert float(dtypes.convert(v, "bfloat16")[0]) == 1.0
    assert float(dtypes.convert(v, "float16")[0]) == float(np.float16(np.float32(v[0])))
    # float64 stays float64 (HBM-only type)
    assert dtypes.convert(v, "float64")[0] == v[0]


def test_same_dtype_is_untouched_bit_for_bit():
    x = np.array([0x7FC00001, 0xFF800000, 0x00000001], dtype=np.uint32).view(np.float32)  # NaN payload, -inf, denormal
    assert_bits_equal(dtypes.convert(x, "float32"), x)


def test_tfloat32_is_stored_as_fp32():
    x = np.array([1.0 + 2**-20], dtype=np.float32)
    got = dtypes.convert(x, "tfloat32")
    assert got.dtype == np.float32 and got[0] == x[0]


# --- fp8: RNE and saturation --------------------------------------------------------------------

FP8 = [("float8_e4m3fn", 448.0), ("float8_e4m3", 240.0), ("float8_e5m2", 57344.0)]


@pytest.mark.parametrize("name,fmax", FP8)
def test_fp8_saturates_instead_of_overflowing(name, fmax):
    big = np.array([fmax, fmax * 1.01, fmax * 1.2, 1e30, np.inf, -fmax * 1.2, -np.inf], dtype=np.float32)
    got = dtypes.convert(big, name).astype(np.float32)
    np.testing.assert_array_equal(got, [fmax, fmax, fmax, fmax, fmax, -fmax, -fmax])
    assert np.isnan(dtypes.convert(np.array([np.nan], np.float32), name).astype(np.float32)[0])


@pytest.mark.parametrize(
    "name,value,expected",
    [
        ("float8_e4m3fn", 1.0625, 1.0),  # tie between 1.0 and 1.125 -> even mantissa (1.0)
        ("float8_e4m3fn", 1.1875, 1.25),  # tie between 1.125 and 1.25 -> 1.25
        ("float8_e4m3fn", 1.07, 1.125),
        ("float8_e5m2", 1.125, 1.0),  # e5m2: 2 mantissa bits, steps of 0.25 -> tie to even 1.0
        ("float8_e5m2", 1.375, 1.5),
        ("float8_e4m3", -2.125, -2.0),
        ("float8_e4m3fn", 2.0**-9, 2.0**-9),  # smallest subnormal is exact
        ("float8_e4m3fn", 2.0**-11, 0.0),  # a quarter of the smallest subnormal -> 0
    ],
)
def test_fp8_round_half_to_even(name, value, expected):
    got = float(dtypes.convert(np.array([value], np.float32), name).astype(np.float32)[0])
    assert got == expected


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([n for n, _ in FP8]), st.lists(st.floats(width=32), min_size=1, max_size=32))
def test_fp8_is_nearest_representable_or_saturated(name, values):
    x = np.array(values, dtype=np.float32)
    got = dtypes.convert(x, name).astype(np.float64)
    target = dtypes.to_numpy(name)
    fmax = float(ml_dtypes.finfo(target).max)
    grid = np.unique(np.arange(256, dtype=np.uint8).view(target).astype(np.float64))
    grid = grid[np.isfinite(grid)]
    for v, g in zip(x.astype(np.float64).tolist(), got.tolist()):
        if math.isnan(v):
            assert math.isnan(g)
            continue
        if abs(v) >= fmax:
            assert g == math.copysign(fmax, v)
            continue
        dist = np.abs(grid - v)
        best = dist.min()
        assert abs(g - v) == best, (v, g)


# --- integers -----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16", "int32", "uint32"])
def test_float_to_int_is_rne_saturating_nan_zero(name):
    info = np.iinfo(dtypes.to_numpy(name))
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.49, 1e12, -1e12, np.nan, np.inf, -np.inf, 127.5, 255.5], np.float32)
    got = dtypes.convert(values, name)
    assert got.dtype == dtypes.to_numpy(name)
    assert got.tolist() == int_reference(values, int(info.min), int(info.max))


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["int8", "uint8", "int16", "uint16", "int32", "uint32"]),
    st.lists(st.floats(width=32), min_size=1, max_size=32),
)
def test_float_to_int_property(name, values):
    info = np.iinfo(dtypes.to_numpy(name))
    x = np.array(values, dtype=np.float32)
    assert dtypes.convert(x, name).tolist() == int_reference(x, int(info.min), int(info.max))


def test_int_to_int_saturates():
    got = dtypes.convert(np.array([-200, -128, 0, 127, 200], np.int32), "int8")
    assert got.tolist() == [-128, -128, 0, 127, 127]
    got = dtypes.convert(np.array([0, 70000, 4_000_000_000], np.uint32), "int16")
    assert got.tolist() == [0, 32767, 32767]
    got = dtypes.convert(np.array([-5, 300], np.int64), "uint8")
    assert got.tolist() == [0, 255]


def test_bool_and_compute_view():
    assert dtypes.convert(np.array([0.0, -0.0, 2.0, np.nan], np.float32), "bool").tolist() == [False, False, True, True]
    assert dtypes.convert(np.array([True, False]), "int32").tolist() == [1, 0]
    b = np.array([1.5, -3.0], dtype=BF16)
    v = dtypes.compute_view(b)
    assert v.dtype == np.float32 and v.tolist() == [1.5, -3.0]
    f = np.array([1.0], np.float32)
    assert dtypes.compute_view(f) is f


def test_int_to_float_rounds_to_nearest():
    x = np.array([2**24 + 1, 2**24 + 3, -(2**31)], dtype=np.int32)
    got = dtypes.convert(x, "float32")
    assert got.tolist() == [2**24, 2**24 + 4, -(2**31)]


def test_float16_round_half_to_even_cases():
    x = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65504.0, 65519.0, 65520.0], dtype=np.float32)
    got = dtypes.convert(x, "float16").astype(np.float64).tolist()
    assert got[:4] == [1.0, 1 + 2**-9, 65504.0, 65504.0] and math.isinf(got[4])


def test_float_to_int64_saturates_at_the_int64_bounds():
    # float64(2**63 - 1) is 2**63: a plain astype would wrap the top to -2**63
    values = np.array([1e19, -1e19, 3e9, np.inf, -np.inf, np.nan, 2.5], dtype=np.float32)
    assert dtypes.convert(values, "int64").tolist() == [2**63 - 1, -(2**63), 3000000000, 2**63 - 1, -(2**63), 0, 2]
