"""Integer reductions, arg-reductions, scans and int64 arithmetic of any range run on the device,
exactly (``integer_expand.py``, ``lower/words64.py``): the exact executor's ISA program agrees bit
for bit with the graph (fast executor) on values near 2**24, 2**31 and 2**63, wraparound included,
for odd lengths, size-1 dims and non-contiguous operands."""

import numpy as np
import pytest
from cc_helpers import Graph
from neuronxcc.compiler import compile_graph, integer_refusals
from neuronxcc.compiler.testing import check_graph

EDGES = {
    "int64": [2**63 - 1, -(2**63), 2**63 - 2, 1099511627773, 16777217, -16777217, 0, -1, 2**32 - 1, 2**31, -(2**40) + 3],
    "int32": [2**31 - 1, -(2**31), 2**31 - 2, 16777217, -16777217, 0, -1, 7, 2**30, -(2**30) - 5, 65535],
}


def _values(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    edges = np.asarray(EDGES[dtype], dtype=dtype)
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    flat = a.reshape(-1)
    picks = rng.integers(0, len(edges), size=flat.size // 2)
    flat[rng.permutation(flat.size)[: picks.size]] = edges[picks]
    return a


def _check(build, inputs: dict):
    g = Graph("ints")
    values = {name: g.add_input(name, a.shape, str(a.dtype)) for name, a in inputs.items()}
    outs = build(g, **values)
    g.set_outputs(outs, [f"o{k}" for k in range(len(outs))])
    assert integer_refusals(g) == []
    program, exact, fast = check_graph(g, inputs)
    return program, exact


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("kind", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("shape,dims", [((7,), [0]), ((3, 5), [1]), ((3, 5), [0]), ((1, 13), [0, 1]), ((2, 1, 9), [2])])
def test_reductions_of_any_range_are_exact(dtype, kind, shape, dims):
    x = _values(dtype, shape)

    def build(g, x):
        return [g.add1("reduce", x, kind=kind, dims=dims), g.add1("reduce", x, kind=kind, dims=dims, keepdims=True)]

    program, exact = _check(build, {"x": x})
    expected = {"sum": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}[kind].reduce(
        x.astype(np.int64), axis=tuple(dims)
    )
    assert np.array_equal(exact["o0"], expected.astype(dtype))  # wrapped as the dtype's integers do
    assert any(i.engine == "gpsimd" and i.opcode == "TENSOR_TENSOR" for i in program.instructions)


def test_int32_sums_into_int64_past_the_int32_range():
    # torch.sum of int32 is an int64 sum: 2**31 - 1 three times is 6442450941, not a wrapped int32
    x = np.array([[2**31 - 1, 2**31 - 1, 2**31 - 1, -(2**31), 5]], dtype=np.int32)
    _, exact = _check(lambda g, x: [g.add1("reduce", x, kind="sum", dims=[1], dtype="int64")], {"x": x})
    assert exact["o0"].tolist() == [3 * (2**31 - 1) - 2**31 + 5]


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reductions_keep_the_first_position_of_ties(dtype, op):
    x = _values(dtype, (4, 11), seed=3)
    x[0] = 16777217
    x[1, [2, 7, 9]] = np.iinfo(dtype).max
    x[1, [3, 8]] = np.iinfo(dtype).min
    x[2, :] = [16777216, 16777217] * 5 + [16777217]
    _, exact = _check(lambda g, x: [g.add1(op, x, dim=1, dtype="int64"), g.add1(op, x, dim=0, keepdims=True)], {"x": x})
    fn = np.argmax if op == "argmax" else np.argmin
    assert exact["o0"].tolist() == fn(x, axis=1).tolist()
    assert exact["o1"].tolist() == fn(x, axis=0, keepdims=True).tolist()


@pytest.mark.parametrize("dtype,out", [("int32", "int64"), ("int64", "int64"), ("int32", "int32")])
@pytest.mark.parametrize("shape,dim", [((13,), 0), ((3, 9), 1), ((5, 2), 0), ((2, 1), 1)])
def test_cumsum_of_any_range_is_exact(dtype, out, shape, dim):
    x = _values(dtype, shape, seed=5)
    _, exact = _check(lambda g, x: [g.add1("cumsum", x, dim=dim, dtype=out)], {"x": x})
    expected = np.cumsum(x.astype(np.int64), axis=dim).astype(out)  # int32 wraps
    assert np.array_equal(exact["o0"], expected)


def test_cumsum_of_a_transposed_view():
    x = _values("int64", (6, 4), seed=7)
    _check(lambda g, x: [g.add1("cumsum", g.add1("transpose", x, perm=(1, 0)), dim=1)], {"x": x})


@pytest.mark.parametrize("op", ["multiply", "and", "or", "xor"])
def test_int64_binary_ops_by_words(op):
    x, y = _values("int64", (3, 7), seed=1), _values("int64", (3, 7), seed=2)
    y[0, :3] = [3, -1, 2**32 + 1]
    program, exact = _check(
        lambda g, x, y: [g.add1(op, x, y), g.add1(op, g.add1("transpose", x, perm=(1, 0)), g.add1("transpose", y, perm=(1, 0)))],
        {"x": x, "y": y},
    )
    fn = {"multiply": np.multiply, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor}[op]
    with np.errstate(over="ignore"):
        assert np.array_equal(exact["o0"], fn(x, y))  # numpy's int64 multiply wraps as PyTorch's does


def test_int64_multiply_by_a_scalar():
    x = np.array([16777217, 1099511627773, -(2**62), 2**63 - 1, -3], dtype=np.int64)

    def build(g, x):
        three = g.add1("broadcast_in_dim", g.add1("constant", value=np.asarray(3, dtype=np.int64)), shape=(5,), dims=())
        return [g.add1("multiply", x, three)]

    _, exact = _check(build, {"x": x})
    with np.errstate(over="ignore"):
        assert exact["o0"].tolist() == (x * 3).tolist()


@pytest.mark.parametrize("op", ["negate", "abs", "not"])
def test_int64_unary_ops_by_words(op):
    x = _values("int64", (2, 9), seed=4)
    x[0, :3] = [-(2**63), -1, 2**32]
    _, exact = _check(lambda g, x: [g.add1(op, x)], {"x": x})
    fn = {"negate": np.negative, "abs": np.abs, "not": np.invert}[op]
    assert np.array_equal(exact["o0"], fn(x))  # -(-2**63) and abs(-2**63) stay -2**63


def test_still_refused_integer_ops_are_listed():
    # an integer division by a divisor that may be zero: CPU raises, so it is not lowered
    g = Graph("div")
    x = g.add_input("x", (4,), "int64")
    g.set_outputs([g.add1("remainder", x, x), g.add1("cumsum", x, dim=0)], ["a", "b"])
    assert [node.op for node, _ in integer_refusals(g)] == ["remainder"]
    compile_graph_refused = pytest.raises(Exception)
    with compile_graph_refused:
        compile_graph(g)


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "uint16"])
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "negate", "abs", "square"])
def test_narrow_integer_arithmetic_wraps_as_the_graph_does(dtype, op):
    # computed in int32, then narrowed by moving the low bytes: 100 + 100 is -56 as int8, not 127
    info = np.iinfo(dtype)
    x = np.array([info.max, info.min, 100, -100 if info.min < 0 else 200, 1, 0, info.max - 1], dtype=dtype)
    y = np.roll(x, 2)
    unary = op in ("negate", "abs", "square")
    _, exact = _check(lambda g, x, y: [g.add1(op, x) if unary else g.add1(op, x, y)], {"x": x, "y": y})
    wide = x.astype(np.int64)
    expected = {
        "add": wide + y,
        "subtract": wide - y,
        "multiply": wide * y,
        "negate": -wide,
        "abs": np.abs(wide),
        "square": wide * wide,
    }[op]
    assert exact["o0"].tolist() == expected.astype(dtype).tolist()


@pytest.mark.parametrize("op", ["add", "multiply", "maximum", "xor"])
def test_int64_words_of_broadcast_operands(op):
    # a per-row operand (stride 0 along the columns) and a one-element one, both past 2**32
    x, y, z = _values("int64", (5, 9), seed=8), _values("int64", (5, 1), seed=9), _values("int64", (1, 1), seed=10)

    def build(g, x, y, z):
        rows = g.add1("broadcast_in_dim", g.add1("reshape", y, shape=(5,)), shape=(5, 9), dims=(0,))
        one = g.add1("broadcast_in_dim", g.add1("reshape", z, shape=()), shape=(5, 9), dims=())
        return [g.add1(op, x, rows), g.add1(op, one, x)]

    _check(build, {"x": x, "y": y, "z": z})
