"""argmax / argmin: first index of the extreme along a dim, NaN winning like numpy's."""

import numpy as np
import pytest
from cc_helpers import Graph, check, random_inputs

CASES = [((1000,), 0), ((70, 5000), 1), ((70, 5000), 0), ((4, 130, 9), 1), ((2, 3, 5, 7), 3), ((2, 3, 5, 7), 0),
         ((1,), 0), ((3, 1), 1), ((20000,), 0)]


@pytest.mark.parametrize("shape,dim", CASES, ids=str)
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce(op, shape, dim):
    g = Graph(op)
    x = g.add_input("x", shape, "float32")
    g.set_outputs([g.add1(op, x, dim=dim)], ["out"])
    check(g)


@pytest.mark.parametrize("dtype,out", [("bfloat16", "int32"), ("float16", "int64"), ("int16", "int32"), ("bool", "int32")])
@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce_dtypes_with_ties(op, dtype, out):
    g = Graph(op)
    x = g.add_input("x", (50, 300), dtype)
    g.set_outputs([g.add1(op, x, dim=1, dtype=out, keepdims=True)], ["out"])
    inputs = random_inputs(g, 0, low=-2, high=2)  # few distinct values: many ties, the first must win
    if dtype in ("bfloat16", "float16"):
        inputs["x"] = np.round(inputs["x"].astype(np.float32)).astype(inputs["x"].dtype)
    check(g, inputs)


def test_ties_across_tiles_keep_the_first():
    g = Graph("argmax")
    x = g.add_input("x", (3, 50000), "float32")
    g.set_outputs([g.add1("argmax", x, dim=1)], ["out"])
    values = np.zeros((3, 50000), np.float32)
    values[0, [7, 30000, 49999]] = 5.0
    values[1, [45000, 49000]] = 1.0
    values[2, :] = -1.0
    check(g, {"x": values})


def test_nan_wins_like_numpy():
    g = Graph("argmax")
    x = g.add_input("x", (4, 100), "float32")
    g.set_outputs([g.add1("argmax", x, dim=1), g.add1("argmin", x, dim=1)], ["a", "b"])
    values = np.random.default_rng(0).standard_normal((4, 100)).astype(np.float32)
    values[0, 17] = np.nan
    values[1, [3, 60]] = np.nan
    values[2, 99] = np.nan
    check(g, {"x": values})


def test_argmax_of_a_fused_value():
    g = Graph("argmax")
    x = g.add_input("x", (64, 200), "float32")
    b = g.add_input("b", (200,), "float32")
    logits = g.add1("add", x, g.add1("broadcast_in_dim", b, shape=(64, 200), dims=(1,)))
    g.set_outputs([g.add1("argmax", logits, dim=1)], ["out"])
    check(g)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_long_vector_uses_every_partition_and_keeps_the_first(op):
    """A long dim with few results goes on partitions too; ties between partitions and tiles
    still resolve to the first index."""
    from neuron_sim.isa import PartitionReduce

    g = Graph(op)
    x = g.add_input("x", (300_001,), "float32")
    g.set_outputs([g.add1(op, x, dim=0)], ["out"])
    values = np.random.default_rng(0).standard_normal(300_001).astype(np.float32)
    extreme = 10.0 if op == "argmax" else -10.0
    values[[250_000, 4097, 4096, 299_999]] = extreme
    program = check(g, {"x": values})
    assert any(isinstance(i, PartitionReduce) for i in program.instructions)
    values[[100, 200_000]] = np.nan
    check(g, {"x": values}, program=program)


def test_int32_arg_reduce_of_any_range_compares_on_the_integer_alu():
    # fp32 would merge values above 2**24 into ties (a different first index): the pairs are
    # compared on GpSimd's integer ALU instead (``integer_expand.py``)
    g = Graph("argmax")
    x = g.add_input("x", (4, 9), "int32")
    g.set_outputs([g.add1("argmax", x, dim=1)], ["out"])
    values = np.full((4, 9), 16777216, dtype=np.int32)
    values[:, 5] = 16777217
    program = check(g, {"x": values})
    assert any(i.engine == "gpsimd" and i.opcode == "TENSOR_TENSOR" for i in program.instructions)
