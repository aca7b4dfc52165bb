"""argsort: PyTorch's stable order (NaN last ascending / first descending, -0.0 equal to 0.0, ties
in their original order) by a bitonic network on chip, against the graph's definition."""

import numpy as np
import pytest
from cc_helpers import Graph, check
from neuronxcc.compiler import CompileError, compile_graph

CASES = [((8,), 0), ((5,), 0), ((3, 37), 1), ((37, 3), 0), ((130, 6), 1), ((2, 3, 7), 1), ((2, 5, 3, 4), 2),
         ((4, 1), 1), ((1, 2), 1), ((3, 300), 1)]


def _graph(shape, dtype, dim, descending, index="int64"):
    g = Graph("argsort")
    x = g.add_input("x", shape, dtype)
    g.set_outputs([g.add1("argsort", x, dim=dim, descending=descending, dtype=index)], ["out"])
    return g


def _few_values(shape, dtype, seed=0):
    """Few distinct values (many ties), with NaN, infinities and both zeros for floats."""
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, size=shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[::7] = np.nan
    flat[1::5] = -0.0
    flat[2::11] = np.inf
    flat[3::13] = -np.inf
    from neuron_sim import dtypes
    return dtypes.convert(x, dtype) if dtype != "float32" else x


@pytest.mark.parametrize("shape,dim", CASES, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_float_order_with_ties_nan_and_signed_zeros(shape, dim, descending):
    g = _graph(shape, "float32", dim, descending)
    check(g, {"x": _few_values(shape, "float32")})


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("descending", [False, True])
def test_16_bit_floats(dtype, descending):
    g = _graph((6, 45), dtype, 1, descending, index="int32")
    check(g, {"x": _few_values((6, 45), dtype)})


@pytest.mark.parametrize("descending", [False, True])
def test_int32_beyond_2_24_compares_exactly(descending):
    rng = np.random.default_rng(1)
    x = rng.integers(-2**31, 2**31, size=(5, 70), dtype=np.int64).astype(np.int32)
    x[:, ::4] = 2**24 + 1  # equal to each other, one above a value fp32 would round it to
    x[:, 1::4] = 2**24
    x[0, :3] = [-2**31, 2**31 - 1, -2**31]
    check(_graph((5, 70), "int32", 1, descending), {"x": x})


@pytest.mark.parametrize("dtype", ["int16", "uint8", "bool", "uint32"])
def test_other_integers(dtype):
    g = _graph((4, 33), dtype, 1, True)
    check(g, seed=3)


def test_a_long_row():
    g = _graph((2, 2500), "float32", 1, False)
    check(g, {"x": _few_values((2, 2500), "float32")})


def test_values_by_the_order():
    """torch.sort's values: the operand gathered by the order (a move, exact for every dtype)."""
    g = Graph("sort")
    x = g.add_input("x", (9, 21), "float32")
    order = g.add1("argsort", x, dim=0, descending=True, dtype="int64")
    g.set_outputs([g.add1("take_along_axis", x, order, axis=0), order], ["values", "indices"])
    check(g, {"x": _few_values((9, 21), "float32")})


def test_a_row_that_does_not_fit_is_refused():
    with pytest.raises(CompileError) as err:
        compile_graph(_graph((2, 20000), "float32", 1, False))
    assert err.value.rule == "compile.sort_length" and "20000" in str(err.value)


@pytest.mark.parametrize("descending", [False, True])
def test_int64_beyond_2_24_by_words(descending):
    """int64 keys compare by their words (high signed, low unsigned) on GpSimd's integer ALU."""
    rng = np.random.default_rng(2)
    x = rng.integers(-2**63, 2**63 - 1, size=(4, 40), dtype=np.int64)
    x[:, ::3] = 2**40 + 1  # differ from the next only in the low word
    x[:, 1::3] = 2**40
    x[:, 2::7] = -(2**32)  # a low word of 0 under a negative high word
    x[0, :2] = [-2**63, 2**63 - 1]
    check(_graph((4, 40), "int64", 1, descending), {"x": x})


def test_int64_order_feeding_a_gather_is_still_exact():
    """An order used only as a gather index is not computed through fp32 (its keys decide it)."""
    g = Graph("sort")
    x = g.add_input("x", (3, 17), "int64")
    order = g.add1("argsort", x, dim=1, dtype="int64")
    g.set_outputs([g.add1("take_along_axis", x, order, axis=1)], ["values"])
    x = np.random.default_rng(4).integers(2**40, 2**40 + 8, size=(3, 17), dtype=np.int64)
    check(g, {"x": x})
