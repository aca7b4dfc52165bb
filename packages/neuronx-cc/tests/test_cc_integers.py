"""Integer exactness (``neuronxcc.compiler.integers``): every integer op is either lowered to give the
graph's exact result - checked on the exact executor against the fast one, with values near 2**24,
2**31 and 2**63 - or refused with ``compile.inexact_integer`` naming the op, the dtype and the range."""

import numpy as np
import pytest
from cc_helpers import Graph, check
from neuronxcc.compiler import INEXACT_INTEGER, CompileError, compile_graph, integer_refusals
from neuronxcc.compiler.testing import check_graph

INT64_EDGES = np.array([2**63 - 1, -(2**63), 2**32 - 1, -1, 0, 16777217, -(2**40) + 3, 2**31, 1099511627773,
                        -16777217], dtype=np.int64)
INT32_EDGES = np.array([2**31 - 1, -(2**31), 16777217, -16777217, 0, -1, 7, 2**30], dtype=np.int32)


def _scalar(g, value, dtype, shape):
    return g.add1("broadcast_in_dim", g.add1("constant", value=np.asarray(value, dtype=dtype)), shape=shape, dims=())


def _graph(inputs: dict, build) -> Graph:
    g = Graph("ints")
    values = {name: g.add_input(name, a.shape, str(a.dtype)) for name, a in inputs.items()}
    outs = build(g, **values)
    g.set_outputs(outs, [f"o{k}" for k in range(len(outs))])
    return g


def check_values(g, inputs):
    """(program, exact outputs, fast outputs) after checking that they agree."""
    return check_graph(g, inputs)


def _refused(g) -> CompileError:
    with pytest.raises(CompileError) as info:
        compile_graph(g)
    assert info.value.rule == INEXACT_INTEGER
    return info.value


def test_int64_moves_keep_every_bit():
    x = INT64_EDGES.reshape(2, 5)
    idx = np.array([1, 0, 1], dtype=np.int64)

    def build(g, x, i):
        rev = g.add1("gather", x, g.add1("iota", shape=(5,), dim=0, dtype="int64"), axis=1)
        return [g.add1("copy", x), g.add1("transpose", x, perm=(1, 0)), g.add1("slice", x, start=[0, 1], limit=[2, 4]),
                g.add1("concatenate", x, x, dim=0), g.add1("gather", x, i, axis=0), rev,
                g.add1("pad", x, low=[0, 1], high=[1, 0], value=-(2**40))]

    check(_graph({"x": x, "i": idx}, build), {"x": x, "i": idx})


def test_int64_constants_beyond_int32_are_written_by_words():
    def build(g, x):
        return [_scalar(g, 2**40 + 3, np.int64, (3, 4)),
                g.add1("constant", value=np.array([2**62, -5, 2**33], dtype=np.int64)),
                g.add1("add", x, _scalar(g, 2**35, np.int64, (3,)))]

    x = INT64_EDGES[:3].copy()
    _, exact, _ = check_values(_graph({"x": x}, build), {"x": x})
    assert exact["o0"].tolist() == [[2**40 + 3] * 4] * 3
    assert exact["o1"].tolist() == [2**62, -5, 2**33]


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "LE", "GT", "GE"])
def test_int64_compares_of_any_range_go_by_words(direction):
    x, y = INT64_EDGES, np.roll(INT64_EDGES, 3)
    y[0] = x[0]
    program = check(_graph({"x": x, "y": y}, lambda g, x, y: [g.add1("compare", x, y, direction=direction)]),
                    {"x": x, "y": y})
    assert any(i.opcode == "TENSOR_TENSOR" and i.engine == "gpsimd" for i in program.instructions)


def test_int64_compares_with_a_small_number_stay_in_fp32():
    # fp32 rounds monotonically: a value past 2**24 still compares right against a small one
    x = INT64_EDGES

    def build(g, x):
        c = _scalar(g, -100, np.int64, x.type.shape)
        return [g.add1("compare", x, c, direction=d) for d in ("NE", "LT", "GE")]

    program = check(_graph({"x": x}, build), {"x": x})
    assert not any(i.opcode == "TENSOR_TENSOR" and i.engine == "gpsimd" for i in program.instructions)


def test_int64_select_moves_words():
    x, y = INT64_EDGES, np.roll(INT64_EDGES, 1)
    pred = np.arange(x.size) % 3 == 0
    _, exact, _ = check_values(_graph({"p": pred, "x": x, "y": y}, lambda g, p, x, y: [g.add1("select", p, x, y)]),
                               {"p": pred, "x": x, "y": y})
    np.testing.assert_array_equal(exact["o0"], np.where(pred, x, y))


@pytest.mark.parametrize("op", ["add", "subtract", "maximum", "minimum"])
def test_int64_add_subtract_min_max_of_any_range_go_by_words(op):
    x, y = INT64_EDGES, np.roll(INT64_EDGES, 1)
    _, exact, _ = check_values(_graph({"x": x, "y": y}, lambda g, x, y: [g.add1(op, x, y)]), {"x": x, "y": y})
    expected = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum, "minimum": np.minimum}[op](x, y)
    np.testing.assert_array_equal(exact["o0"], expected)  # 64-bit wrap included


@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "maximum", "minimum", "abs", "negate", "square", "sign",
                                "relu"])
def test_int32_arithmetic_of_any_range_runs_on_the_integer_alu(op):
    x, y = INT32_EDGES, np.roll(INT32_EDGES, 2)
    unary = op in ("abs", "negate", "square", "sign", "relu")
    program = check(_graph({"x": x, "y": y}, lambda g, x, y: [g.add1(op, x) if unary else g.add1(op, x, y)]),
                    {"x": x, "y": y})
    assert all(i.engine == "gpsimd" for i in program.instructions if i.opcode == "TENSOR_TENSOR")


@pytest.mark.parametrize("direction", ["EQ", "NE", "LT", "GE"])
def test_int32_compares_of_any_range_run_on_the_integer_alu(direction):
    x, y = INT32_EDGES, INT32_EDGES - np.array([1, 0, 1, 0, 1, 0, 1, 0], dtype=np.int32)
    check(_graph({"x": x, "y": y}, lambda g, x, y: [g.add1("compare", x, y, direction=direction)]), {"x": x, "y": y})


@pytest.mark.parametrize("src, dst", [("int64", "int32"), ("int64", "int16"), ("int64", "uint8"), ("int64", "float32"),
                                      ("int64", "bfloat16"), ("int64", "bool"), ("int32", "int64"), ("int8", "int64"),
                                      ("bool", "int64"), ("float32", "int64"), ("int32", "int8"), ("int32", "uint8")])
def test_conversions_wrap_and_round_as_the_graph_defines(src, dst):
    values = {"int64": INT64_EDGES, "int32": INT32_EDGES, "int8": np.array([-128, 127, -1, 0], dtype=np.int8),
              "bool": np.array([True, False, True]), "float32": np.array([3e9, -3e9, 2.5, -0.5, 1e19], np.float32)}[src]
    check(_graph({"x": values}, lambda g, x: [g.add1("convert", x, dtype=dst)]), {"x": values})


@pytest.mark.parametrize("op, dtype", [("divide", "int32"), ("power", "int8"), ("remainder", "int64"),
                                       ("dot_general", "int32")])
def test_what_no_engine_computes_exactly_is_refused_with_the_range(op, dtype):
    # (integer reductions, scans and int64 multiplication run by exact steps: test_cc_integer_expand.py)
    x = np.zeros((4, 4), dtype=dtype)
    if op == "dot_general":
        build = _gram
    else:
        build = lambda g, x: [g.add1(op, x, x)]  # noqa: E731
    err = _refused(_graph({"x": x}, build))
    assert op in str(err) and dtype in str(err) and "[" in str(err)  # the range the check assumed


def test_values_only_used_as_indices_may_go_through_fp32():
    # negative indices wrapped (as torch-mlir's index lowering does): int64 arithmetic on unbounded
    # data, but every valid index is small and an invalid one stays out of range
    table = np.arange(12, dtype=np.float32).reshape(6, 2)
    idx = np.array([-1, 0, 5, -6], dtype=np.int64)

    def build(g, t, i):
        n = _scalar(g, 6, np.int64, (4,))
        wrapped = g.add1("select", g.add1("compare", i, _scalar(g, 0, np.int64, (4,)), direction="LT"),
                         g.add1("add", i, n), i)
        return [g.add1("gather", t, wrapped, axis=0)]

    check(_graph({"t": table, "i": idx}, build), {"t": table, "i": idx})


def test_integer_refusals_lists_every_refused_node():
    g = Graph("two")
    x = g.add_input("x", (4,), "int32")
    y = g.add_input("y", (4, 4), "int32")
    g.set_outputs([g.add1("divide", x, x), *_gram(g, y), g.add1("add", y, y)], ["a", "b", "c"])
    refused = integer_refusals(g)
    assert [node.op for node, _ in refused] == ["divide", "dot_general"]
    assert "ZeroDivisionError" in refused[0][1] and "2**24" in refused[1][1]


@pytest.mark.parametrize("op", ["divide", "remainder", "fmod"])
def test_integer_division_by_a_divisor_that_may_be_zero_is_refused(op):
    # CPU raises ZeroDivisionError by value; the engines would return a number. int8 values are
    # small enough for fp32, so only the zero divisor is the reason.
    def build(g, x, y):
        return [g.add1(op, g.add1("convert", x, dtype="int32"), g.add1("convert", y, dtype="int32"))]

    x = np.array([0, 3, -7], dtype=np.int8)
    err = _refused(_graph({"x": x, "y": x.copy()}, build))
    assert "ZeroDivisionError" in str(err) and "[-128, 127]" in str(err)


def test_truncated_quotients_of_integers_by_a_possible_zero_are_refused():
    # torch-mlir's torch.div(a, b, rounding_mode="trunc"): a float quotient of integers, truncated
    def build(g, x, y):
        return [g.add1("convert", g.add1("trunc", g.add1("divide", x, y, dtype="float32")), dtype="int16")]

    x = np.array([0, 3, -7], dtype=np.int16)
    assert "ZeroDivisionError" in str(_refused(_graph({"x": x, "y": x.copy()}, build)))


def test_true_division_of_integers_is_not_an_integer_division():
    x = np.array([0, 3, -7], dtype=np.int16)
    check(_graph({"x": x, "y": x.copy()}, lambda g, x, y: [g.add1("divide", x, y, dtype="float32")]),
          {"x": x, "y": x.copy()})


def test_integer_powers_with_possibly_negative_exponents_are_refused():
    def build(g, x, y):
        return [g.add1("power", g.add1("convert", x, dtype="int32"), g.add1("convert", y, dtype="int32"))]

    x = np.array([1, 2, -3], dtype=np.int8)
    assert "negative" in str(_refused(_graph({"x": x, "y": x.copy()}, build)))


def _gram(g, x):
    return [g.add1("dot_general", x, g.add1("transpose", x, perm=[1, 0]), lhs_contract=[1], rhs_contract=[0])]


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_integer_matmuls_that_may_pass_2_24_or_wrap_are_refused(dtype):
    # TensorE multiplies and accumulates in fp32: int8 [[100, 100], [1, 1]] @ .T saturated to 127
    # (CPU wraps to 32), an int32 16777217 came back 16777216
    x = np.zeros((2, 3), dtype=dtype)
    err = _refused(_graph({"x": x}, _gram))
    assert "dot_general" in str(err) and dtype in str(err) and "2**24" in str(err)


def test_integer_matmuls_whose_sums_stay_exact_in_fp32_run_on_tensor_engine():
    # int8 values widened to int32: sums of 7 products of at most 2**14 fit int32 and fp32 exactly
    x = np.array([[-128, 3, 0, 7, 1, 2, 9], [1, 127, 127, -128, 15, 15, 4], [2, 0, 1, 0, 5, 6, -128]], dtype=np.int8)

    def build(g, x):
        return _gram(g, g.add1("convert", x, dtype="int32"))

    program, exact, _ = check_values(_graph({"x": x}, build), {"x": x})
    wide = x.astype(np.int32)
    np.testing.assert_array_equal(exact["o0"], wide @ wide.T)
    assert any(i.opcode == "MATMUL" for i in program.instructions)
