"""Integer graph ops are exact: moves keep values, compares/min/max/sums/cumsum/arg-reductions and
add/subtract/multiply give the mathematical result wrapped to the result dtype, in the reference
evaluation and in the fast executor's plans alike."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim.executor.fast import evaluate
from neuron_sim.graph import Graph, evaluate_reference

NEAR_2_24 = np.array([16777217, 16777216, -16777217, 3, 0, -1], dtype=np.int64)
NEAR_2_31 = np.array([2**31 - 1, -(2**31), 2**31 - 2, 1, -2, 0], dtype=np.int64)
NEAR_2_63 = np.array([2**63 - 1, -(2**63), 2**63 - 2, 1099511627773, -1, 0], dtype=np.int64)


def run(g: Graph, inputs: dict) -> dict:
    """Outputs of ``g`` by the reference evaluation and by the fast executor (must agree bit for bit)."""
    results = []
    for evaluator in (evaluate_reference, evaluate):
        outs = {v.name: np.zeros(v.type.shape, v.type.dtype if v.type.dtype != "bool" else np.bool_) for v in g.outputs}
        buffers = {k: np.ascontiguousarray(a).reshape(-1).view(np.uint8) for k, a in {**inputs, **outs}.items()}
        evaluator(g, buffers)
        results.append(outs)
    for name in results[0]:
        assert results[0][name].tobytes() == results[1][name].tobytes(), name
    return results[0]


def graph_of(dtype, n, build):
    g = Graph("ints")
    x = g.add_input("x", (n,), dtype)
    y = g.add_input("y", (n,), dtype)
    outs = build(g, x, y)
    g.set_outputs(list(outs), [f"o{i}" for i in range(len(outs))])
    return g


@pytest.mark.parametrize("values, dtype", [(NEAR_2_24, "int64"), (NEAR_2_24, "int32"), (NEAR_2_31, "int32"),
                                           (NEAR_2_63, "int64")])
def test_moves_and_compares_are_exact(values, dtype):
    x = values.astype(dtype)
    y = np.roll(x, 1)

    def build(g, a, b):
        moved = g.add1("slice", g.add1("concatenate", a, b, dim=0), start=[1], limit=[1 + x.size], stride=[1])
        return [g.add1("copy", a), moved] + [g.add1("compare", a, b, direction=d) for d in ("EQ", "NE", "LT", "GE")]

    out = run(graph_of(dtype, x.size, build), {"x": x, "y": y})
    np.testing.assert_array_equal(out["o0"], x)
    np.testing.assert_array_equal(out["o1"], np.concatenate([x, y])[1:1 + x.size])
    for i, fn in enumerate((np.equal, np.not_equal, np.less, np.greater_equal)):
        np.testing.assert_array_equal(out[f"o{i + 2}"], fn(x, y))


def test_int32_arithmetic_wraps_as_two_s_complement():
    x = NEAR_2_31.astype(np.int32)
    y = np.array([1, -1, 3, 2**31 - 1, 5, 0], dtype=np.int32)

    def build(g, a, b):
        return [g.add1(op, a, b) for op in ("add", "subtract", "multiply", "maximum", "minimum")]

    out = run(graph_of("int32", x.size, build), {"x": x, "y": y})
    wide_x, wide_y = x.astype(np.int64), y.astype(np.int64)
    for i, fn in enumerate((np.add, np.subtract, np.multiply, np.maximum, np.minimum)):
        np.testing.assert_array_equal(out[f"o{i}"], fn(wide_x, wide_y).astype(np.int32))


def test_reductions_cumsum_and_argreductions_see_every_bit():
    x = np.array([[16777217, 16777216, 16777218], [-16777217, -16777216, 5]], dtype=np.int64)
    g = Graph("red")
    a = g.add_input("x", x.shape, "int64")
    outs = [g.add1("reduce", a, dims=[1], kind="sum"), g.add1("reduce", a, dims=[1], kind="max"),
            g.add1("reduce", a, dims=[1], kind="min"), g.add1("cumsum", a, dim=1),
            g.add1("argmax", a, dim=1, dtype="int64"), g.add1("argmin", a, dim=1, dtype="int64")]
    g.set_outputs(outs, [f"o{i}" for i in range(len(outs))])
    out = run(g, {"x": x})
    np.testing.assert_array_equal(out["o0"], x.sum(1))
    np.testing.assert_array_equal(out["o1"], x.max(1))
    np.testing.assert_array_equal(out["o2"], x.min(1))
    np.testing.assert_array_equal(out["o3"], x.cumsum(1))
    np.testing.assert_array_equal(out["o4"], [2, 2])
    np.testing.assert_array_equal(out["o5"], [1, 0])


def test_integer_division_truncates_and_fmod_takes_the_dividend_sign():
    x = np.array([-7, 7, -16777217, 9], dtype=np.int64)
    y = np.array([2, -2, 2, 3], dtype=np.int64)

    def build(g, a, b):
        return [g.add1("divide", a, b), g.add1("fmod", a, b), g.add1("remainder", a, b)]

    out = run(graph_of("int64", x.size, build), {"x": x, "y": y})
    np.testing.assert_array_equal(out["o0"], [-3, -3, -8388608, 3])
    np.testing.assert_array_equal(out["o1"], np.fmod(x, y))
    np.testing.assert_array_equal(out["o2"], np.mod(x, y))


def test_integer_converts_wrap_and_int_to_float_rounds_once():
    x = np.array([2**31 + 5, -(2**31) - 1, 300, 16777217], dtype=np.int64)
    g = Graph("conv")
    a = g.add_input("x", x.shape, "int64")
    outs = [g.add1("convert", a, dtype=d) for d in ("int32", "int8", "uint8", "float32", "bool")]
    g.set_outputs(outs, [f"o{i}" for i in range(len(outs))])
    out = run(g, {"x": x})
    np.testing.assert_array_equal(out["o0"], x.astype(np.int32))
    np.testing.assert_array_equal(out["o1"], x.astype(np.int8))
    np.testing.assert_array_equal(out["o2"], x.astype(np.uint8))
    np.testing.assert_array_equal(out["o3"], x.astype(np.float32))
    np.testing.assert_array_equal(out["o4"], x != 0)


def test_gather_and_scatter_move_int64_values():
    table = NEAR_2_63.reshape(3, 2)
    idx = np.array([2, 0, 2], dtype=np.int64)
    g = Graph("ix")
    t = g.add_input("t", table.shape, "int64")
    i = g.add_input("i", idx.shape, "int64")
    gathered = g.add1("gather", t, i, axis=0)
    updates = g.add1("negate", gathered)
    index2 = g.add1("broadcast_in_dim", i, shape=(3, 2), dims=[0])
    scattered = g.add1("scatter", t, index2, updates, axis=0, mode="add")
    g.set_outputs([gathered, scattered], ["o0", "o1"])
    out = run(g, {"t": table, "i": idx})
    np.testing.assert_array_equal(out["o0"], table[idx])
    expected = table.copy()
    np.add.at(expected, (np.broadcast_to(idx[:, None], (3, 2)), np.indices((3, 2))[1]), -table[idx])
    np.testing.assert_array_equal(out["o1"], expected)


def test_negative_integer_exponents_round_the_reciprocal_toward_zero():
    x = np.array([1, 2, -3, -1, -1, 0, 5], dtype=np.int32)
    y = np.array([-1, -1, -2, -3, -2, 3, 2], dtype=np.int32)
    out = run(graph_of("int32", x.size, lambda g, a, b: [g.add1("power", a, b)]), {"x": x, "y": y})
    np.testing.assert_array_equal(out["o0"], [1, 0, 0, -1, 1, 0, 25])  # as torch's integer pow


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int32", "int64"])
def test_integer_dot_general_is_exact_and_wraps_as_pytorch(dtype):
    # x @ x.T of [[100, 100], [1, 1]]-like rows: the products pass the dtype (and 2**24 for int32)
    info = np.iinfo(dtype)
    x = np.array([[info.max, info.max - 1, 3], [1, info.min, 2], [16777217 % (int(info.max) + 1), 1, 0]], dtype=dtype)
    g = Graph("dot")
    a = g.add_input("a", x.shape, dtype)
    g.set_outputs([g.add1("dot_general", a, g.add1("transpose", a, perm=[1, 0]), lhs_contract=[1], rhs_contract=[0])],
                  ["o0"])
    out = run(g, {"a": x})
    wide = x.astype(object)  # Python integers: the exact products and sums
    exact = np.array(wide @ wide.T, dtype=object)
    bits = info.bits
    wrapped = [(int(v) + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1)) if info.min < 0 else int(v) % (1 << bits)
               for v in exact.reshape(-1)]
    np.testing.assert_array_equal(out["o0"].reshape(-1), np.array(wrapped, dtype=dtype))
