"""Op facts on the graph op registry: each registered op's facts hold for its own semantics, so a
compiler or framework that reads them (fusing elementwise chains, aliasing outputs with inputs,
treating views as re-indexing) can trust them."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim.graph import ops
from neuron_sim.graph.ir import TensorType

SHAPE = (3, 5)
RNG = np.random.default_rng(7)


def operands(op: str) -> tuple[list[np.ndarray], dict]:
    """Operands of ``op`` of shape SHAPE (in the domain where its values are finite) and its attrs."""
    spec = ops.OPS[op]
    if op in ops.BITWISE or op == "not":
        arrays = [RNG.integers(0, 16, SHAPE).astype(np.int32) for _ in range(spec.arity)]
        return arrays, {}
    arrays = [RNG.uniform(0.25, 2.0, SHAPE).astype(np.float32) for _ in range(spec.arity)]
    if op == "select":
        arrays[0] = RNG.integers(0, 2, SHAPE).astype(bool)
    attrs = {"compare": {"direction": "LT"}, "convert": {"dtype": "bfloat16"}}.get(op, {})
    return arrays, attrs


def evaluate(op: str, arrays: list[np.ndarray], attrs: dict) -> np.ndarray:
    types = [TensorType(a.shape, {"float32": "float32", "int32": "int32", "bool": "bool"}[a.dtype.name]) for a in arrays]
    out_types = ops.infer(op, types, attrs)
    return np.asarray(ops.OPS[op].evaluate(arrays, attrs, out_types)[0])


def test_every_fact_is_defined_and_held_by_some_op():
    assert {fact for spec in ops.OPS.values() for fact in spec.facts} == set(ops.FACTS)


def test_a_fact_nobody_defined_is_refused():
    with pytest.raises(ValueError, match="unknown op fact 'pointwise'"):
        ops.ops_with("pointwise")
    with pytest.raises(ValueError, match="graph op 'x': unknown op facts \\['fast'\\]"):
        ops._op("x", 1, "fast")


def test_the_sets_are_the_registry_read_by_fact():
    assert ops.ELEMENTWISE_OPS == {name for name, spec in ops.OPS.items() if "elementwise" in spec.facts}
    assert ops.VIEW_OPS == {"broadcast_in_dim", "transpose", "slice", "reshape", "as_strided"}
    assert ops.LEAF_OPS == {"constant", "iota"}
    assert ops.has("exp", "elementwise") and not ops.has("reduce", "elementwise") and not ops.has("no_such_op", "view")


@pytest.mark.parametrize("op", sorted(ops.ELEMENTWISE_OPS))
def test_an_elementwise_op_computes_each_element_from_the_operands_at_its_index(op):
    arrays, attrs = operands(op)
    whole = evaluate(op, arrays, attrs)
    assert whole.shape == SHAPE
    exact = ops.has(op, "correctly_rounded") or not np.issubdtype(whole.dtype, np.floating)
    for index in [(0, 0), (1, 3), (2, 4)]:
        alone = evaluate(op, [a[index][None, None] for a in arrays], attrs)
        if exact:
            np.testing.assert_array_equal(alone.reshape(()), whole[index])
        else:
            np.testing.assert_allclose(alone.reshape(()).astype(np.float64), whole[index].astype(np.float64), rtol=1e-6)


VIEWS_AND_MOVES = {
    "broadcast_in_dim": {"shape": (2, 3, 5), "dims": (1, 2)},
    "reshape": {"shape": (5, 3)},
    "transpose": {"perm": (1, 0)},
    "as_strided": {"shape": (2, 2), "strides": (5, 2), "offset": 1},
    "slice": {"start": (1, 0), "limit": (3, 5), "stride": (1, 2)},
    "pad": {"low": (1, 0), "high": (0, 2), "value": 0.0},
    "concatenate": {"dim": 0},
}


@pytest.mark.parametrize("op", sorted(VIEWS_AND_MOVES))
def test_an_op_that_moves_data_makes_its_result_of_operand_elements(op):
    assert ops.has(op, "moves_data")
    x = RNG.uniform(0.25, 2.0, SHAPE).astype(np.float32)
    arrays = [x, x + 10] if op == "concatenate" else [x]
    result = evaluate(op, arrays, VIEWS_AND_MOVES[op])
    allowed = set(np.concatenate([a.reshape(-1) for a in arrays]).tolist()) | {0.0}
    assert result.dtype == x.dtype and set(result.reshape(-1).tolist()) <= allowed


def test_the_view_ops_are_the_ones_that_only_reindex():
    for op in ops.VIEW_OPS:
        assert ops.has(op, "moves_data") and ops.OPS[op].arity == 1
        assert not ops.has(op, "elementwise")


def test_leaf_ops_take_no_operand():
    assert all(ops.OPS[op].arity == 0 for op in ops.LEAF_OPS)


# Python's integer arithmetic, for the elementwise ops the registry says are exact on integers.
INTEGER_REFERENCE = {
    "abs": abs, "negate": lambda a: -a, "sign": lambda a: (a > 0) - (a < 0), "square": lambda a: a * a,
    "copy": lambda a: a, "relu": lambda a: max(a, 0), "floor": lambda a: a, "ceil": lambda a: a, "round": lambda a: a,
    "trunc": lambda a: a, "add": lambda a, b: a + b, "subtract": lambda a, b: a - b, "multiply": lambda a, b: a * b,
    "maximum": max, "minimum": min, "divide": lambda a, b: abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1),
    "remainder": lambda a, b: a % b, "fmod": lambda a, b: abs(a) % abs(b) * (1 if a >= 0 else -1),
    "power": lambda a, b: a ** b,
}


def evaluate_int64(op: str, arrays: list[np.ndarray], attrs: dict | None = None) -> np.ndarray:
    attrs = attrs or {}
    types = [TensorType(a.shape, "int64") for a in arrays]
    return np.asarray(ops.OPS[op].evaluate(arrays, attrs, ops.infer(op, types, attrs))[0])


@pytest.mark.parametrize("op", sorted(ops.EXACT_ON_INTEGERS_OPS & ops.ELEMENTWISE_OPS))
def test_an_elementwise_op_exact_on_integers_gives_the_integer_result_past_fp32s_range(op):
    a, b = 2**24 + 1, 3  # fp32 holds neither 2**24 + 1 nor most results below
    arrays = [np.array([a, -a], np.int64), np.array([b, b], np.int64)][: ops.OPS[op].arity]
    exact = [INTEGER_REFERENCE[op](*(int(x[i]) for x in arrays)) for i in range(2)]
    expected = [(v + 2**63) % 2**64 - 2**63 for v in exact]  # wrapped to int64, as PyTorch does
    assert evaluate_int64(op, arrays).tolist() == expected


def test_reductions_exact_on_integers_give_the_integer_result_past_fp32s_range():
    x = np.array([2**24, 2**24 + 1, 1], np.int64)  # fp32 rounds 2**24 + 1 to 2**24: a tie, a lost 1
    assert evaluate_int64("reduce", [x], {"kind": "sum", "dims": (0,)}).tolist() == 2**25 + 2
    assert evaluate_int64("cumsum", [x], {"dim": 0}).tolist() == [2**24, 2**25 + 1, 2**25 + 2]
    assert evaluate_int64("argmax", [x], {"dim": 0}).tolist() == 1
    assert evaluate_int64("argmin", [-x], {"dim": 0}).tolist() == 1


def test_every_integer_form_is_given_as_the_fact():
    assert set(INTEGER_REFERENCE) == ops.EXACT_ON_INTEGERS_OPS & ops.ELEMENTWISE_OPS
    assert ops.EXACT_ON_INTEGERS_OPS - ops.ELEMENTWISE_OPS == {"reduce", "cumsum", "argmax", "argmin", "scatter",
                                                               "index_add", "dot_general"}
    assert ops.IDENTITY_ON_INTEGERS == {"copy", "floor", "ceil", "round", "trunc"}


def test_scatters_are_the_ops_with_indexed_writes():
    assert ops.ops_with("indexed_writes") == {"scatter", "index_add"}
