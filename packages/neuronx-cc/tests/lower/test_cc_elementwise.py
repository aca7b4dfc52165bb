"""Elementwise ops: ISA program on the exact executor == graph on the fast executor."""

import numpy as np
import pytest
from cc_helpers import FLOATS, SHAPES, Graph, as_dtype, binary, check, positive_inputs, unary
from neuron_sim.graph.ops import BINARY, BITWISE, COMPARE, UNARY

POSITIVE_DOMAIN = {"log", "sqrt", "rsqrt"}
# Composites (several instructions, different rounding than numpy's single call): tolerances.
TOLERANCE = {"tan": (2e-5, 1e-6), "expm1": (4e-7, 0.0), "log1p": (4e-7, 0.0), "atan2": (1e-6, 1e-6), "power": (0.0, 0.0)}
SHAPES_4 = [(7,), (257, 33), (2, 3, 5, 7), (4, 130, 9)]


def _tol(op, dtype="float32"):
    rtol, atol = TOLERANCE.get(op, (0.0, 0.0))
    if dtype != "float32" and (rtol or atol):  # one ulp of the narrow result type
        rtol = max(rtol, 1e-2 if dtype == "bfloat16" else 1e-3)
    return {"rtol": rtol, "atol": atol}


@pytest.mark.parametrize("shape", SHAPES_4, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_float32(op, shape):
    g = unary(op, shape)
    inputs = positive_inputs(g) if op in POSITIVE_DOMAIN else None
    check(g, inputs, **_tol(op))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("op", sorted(UNARY))
def test_unary_half(op, dtype):
    g = unary(op, (129, 7), dtype)
    inputs = positive_inputs(g) if op in POSITIVE_DOMAIN else None
    check(g, inputs, **_tol(op, dtype))


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_unary_all_shapes(shape):
    check(unary("exp", shape))
    check(unary("tanh", shape, "bfloat16"))


@pytest.mark.parametrize("op", ["abs", "negate", "sign", "square", "exp", "relu", "floor", "round"])
def test_unary_on_integers(op):
    g = unary(op, (33, 40), "int32")
    check(g)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES_4, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op, shape, dtype):
    check(binary(op, shape, dtype), **_tol(op, dtype))


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum"])
def test_binary_int32_of_any_range_runs_on_the_integer_alu(op):
    g = binary(op, (65, 31), "int32")
    rng = np.random.default_rng(3)
    x = rng.integers(-(2**31), 2**31, (65, 31)).astype(np.int32)
    y = rng.integers(-(2**31), 2**31, (65, 31)).astype(np.int32)
    program = check(g, {"x": x, "y": y})
    assert all(i.engine == "gpsimd" for i in program.instructions if i.opcode == "TENSOR_TENSOR")


def _scalar(g, value, shape):
    return g.add1("broadcast_in_dim", g.add1("constant", value=np.int32(value)), shape=shape, dims=())


@pytest.mark.parametrize("op", ["divide", "remainder", "fmod", "power"])
def test_binary_int32_division_and_power_run_where_fp32_is_exact(op):
    # int8 dividends and uint8 divisors widened to int32, divisors moved off zero (1..256, and
    # negated), exponents clamped to 0..3: small operands and results, which the fp32 datapath
    # computes exactly (a divisor that may be zero is refused: CPU raises for it)
    shape = (65, 31)
    g = Graph(op)
    x = g.add1("convert", g.add_input("x", shape, "int8"), dtype="int32")
    y = g.add1("convert", g.add_input("y", shape, "uint8"), dtype="int32")
    if op == "power":
        ys = [g.add1("minimum", y, _scalar(g, 3, shape))]
    else:
        y = g.add1("add", y, _scalar(g, 1, shape))
        ys = [y, g.add1("negate", y)]
    g.set_outputs([g.add1(op, x, d) for d in ys], [f"out{k}" for k in range(len(ys))])
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, shape).astype(np.int8)
    b = rng.integers(0, 6, shape).astype(np.uint8)
    check(g, {"x": a, "y": b})


@pytest.mark.parametrize("op", ["divide", "remainder", "fmod", "power"])
def test_binary_int32_division_of_any_range_is_refused(op):
    from neuronxcc.compiler import INEXACT_INTEGER, CompileError, compile_graph

    with pytest.raises(CompileError) as info:
        compile_graph(binary(op, (65, 31), "int32"))
    assert info.value.rule == INEXACT_INTEGER and "int32 in [-2147483648, 2147483647]" in str(info.value)


def test_binary_mixed_dtypes():
    g = Graph("mixed")
    x = g.add_input("x", (100, 3), "bfloat16")
    y = g.add_input("y", (100, 3), "float32")
    g.set_outputs([g.add1("add", x, y), g.add1("multiply", y, x, dtype="float16")], ["a", "b"])
    check(g)


@pytest.mark.parametrize("dtype", ["int32", "int16", "uint8", "int8"])
@pytest.mark.parametrize("op", sorted(BITWISE))
def test_bitwise(op, dtype):
    g = binary(op, (130, 9), dtype)
    rng = np.random.default_rng(1)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, (130, 9), endpoint=True).astype(dtype)
    y = rng.integers(0, 7 if "shift" in op else info.max, (130, 9)).astype(dtype)
    check(g, {"x": x, "y": y})


def test_bitwise_large_int32_values_exact():
    g = binary("xor", (64, 64), "int32")
    rng = np.random.default_rng(0)
    x = rng.integers(-(2**31), 2**31 - 1, (64, 64)).astype(np.int32)
    check(g, {"x": x, "y": np.full((64, 64), 0x5A5A5A5A, np.int32)})


@pytest.mark.parametrize("op", ["and", "or", "xor"])
def test_logical_on_bool(op):
    check(binary(op, (3, 50, 7), "bool"))


@pytest.mark.parametrize("dtype", ["bool", "int32", "uint8"])
def test_not(dtype):
    g = unary("not", (40, 77), dtype)
    check(g)


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
@pytest.mark.parametrize("direction", sorted(COMPARE))
def test_compare(direction, dtype):
    g = binary("compare", (60, 31), dtype, direction=direction)
    rng = np.random.default_rng(2)
    x = as_dtype(rng.integers(-3, 4, (60, 31)), dtype)  # many ties
    y = as_dtype(rng.integers(-3, 4, (60, 31)), dtype)
    program = check(g, {"x": x, "y": y})
    assert program.tensor("out").dtype == "bool"


@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint8", "bool"])
def test_select(dtype):
    g = Graph("select")
    p = g.add_input("p", (50, 70), "bool")
    a = g.add_input("a", (50, 70), dtype)
    b = g.add_input("b", (50, 70), dtype)
    g.set_outputs([g.add1("select", p, a, b)], ["out"])
    check(g)


def test_select_int32_beyond_fp32_precision_is_exact():
    g = Graph("select")
    p = g.add_input("p", (32, 33), "bool")
    a = g.add_input("a", (32, 33), "int32")
    b = g.add_input("b", (32, 33), "int32")
    g.set_outputs([g.add1("select", p, a, b)], ["out"])
    rng = np.random.default_rng(0)
    inputs = {"p": rng.random((32, 33)) < 0.5, "a": np.full((32, 33), 2**30 + 1, np.int32),
              "b": rng.integers(2**25, 2**31 - 1, (32, 33)).astype(np.int32)}
    check(g, inputs)


CONVERT_TYPES = ["float32", "bfloat16", "float16", "int32", "int16", "uint8", "bool", "int64"]


@pytest.mark.parametrize("dst", CONVERT_TYPES)
@pytest.mark.parametrize("src", CONVERT_TYPES)
def test_convert(src, dst):
    g = unary("convert", (37, 45), src, dtype=dst)
    rng = np.random.default_rng(5)
    values = rng.uniform(-300, 300, (37, 45))
    values[0, :8] = [0.5, 1.5, 2.5, -0.5, -2.5, 65504.5, 1e30, -1e30]
    if "int64" in (src, dst):
        # int64 is computed as int32 on chip: values beyond int32 saturate there (documented), and the
        # graph's own float -> int64 saturation is not exact (numpy's float64 clip at 2**63 overflows).
        values = np.clip(values, -60000, 60000)
    check(g, {"x": as_dtype(values, src)})


def test_convert_int_to_int_is_exact_beyond_fp32_precision():
    g = Graph("conv")
    x = g.add_input("x", (16, 16), "int32")
    g.set_outputs([g.add1("convert", x, dtype="int64"), g.add1("convert", x, dtype="int16"),
                   g.add1("convert", g.add1("convert", x, dtype="int16"), dtype="int32")], ["a", "b", "c"])
    x_values = np.random.default_rng(0).integers(-(2**31), 2**31 - 1, (16, 16)).astype(np.int32)
    program = check(g, {"x": x_values})
    assert program.tensor("a").dtype == "int64"


def test_rounding_special_values():
    values = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 1e-30, -1e-30, 0.0, -0.0,
                       8388607.5, -8388607.5, 8388608.0, 3e9, -3e9, 1e38, np.inf, -np.inf, np.nan, 7.0, -7.25, 123.75],
                      dtype=np.float32)
    for op in ("floor", "ceil", "round", "trunc"):
        g = unary(op, values.shape)
        check(g, {"x": values})


def test_expm1_log1p_accurate_near_zero():
    x = np.concatenate([np.float32(10.0) ** -np.arange(1, 30, dtype=np.float32), -np.float32(10.0) ** -np.arange(1, 30),
                        np.linspace(-0.9, 5, 50, dtype=np.float32)]).astype(np.float32)
    for op, ref in (("expm1", np.expm1), ("log1p", np.log1p)):
        g = unary(op, x.shape)
        program = check(g, {"x": x}, **_tol(op))
        from neuronxcc.compiler.testing import run_exact

        out = run_exact(program, {"x": x})["out"].astype(np.float64)
        np.testing.assert_allclose(out, ref(x.astype(np.float64)), rtol=5e-7)


def test_scalar_shape():
    g = Graph("scalar")
    x = g.add_input("x", (), "float32")
    y = g.add_input("y", (), "float32")
    g.set_outputs([g.add1("exp", g.add1("add", x, y))], ["out"])
    check(g)


def test_zero_size_tensors():
    g = Graph("empty")
    x = g.add_input("x", (0, 5), "float32")
    g.set_outputs([g.add1("exp", x)], ["out"])
    program = check(g)
    assert program.tensor("out").shape == (0, 5)


def test_chain_with_immediates_folds_constants():
    g = Graph("fold")
    x = g.add_input("x", (100,), "float32")
    two = g.add1("constant", value=np.float32(2.0))
    three = g.add1("constant", value=np.float32(3.0))
    six = g.add1("multiply", two, three)
    scaled = g.add1("multiply", x, g.add1("broadcast_in_dim", six, shape=(100,), dims=()))
    g.set_outputs([g.add1("subtract", g.add1("broadcast_in_dim", two, shape=(100,), dims=()), scaled)], ["out"])
    program = check(g)
    # 6.0 is folded at compile time: one tensor_scalar per op, no constant tiles, no extra loads.
    assert sum(i.opcode == "TENSOR_SCALAR" for i in program.instructions) == 2
