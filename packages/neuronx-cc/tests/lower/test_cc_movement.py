"""concatenate, pad, and materializing views/constants/iotas as outputs."""

import numpy as np
import pytest
from cc_helpers import Graph, check


@pytest.mark.parametrize("shapes,dim", [([(40, 30), (40, 20)], 1), ([(3, 5), (7, 5), (1, 5)], 0),
                                        ([(2, 3, 4), (2, 1, 4), (2, 5, 4)], 1), ([(10,), (0,), (5,)], 0),
                                        ([(2, 3, 5, 7), (2, 3, 5, 1)], 3)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32", "bool"])
def test_concatenate(shapes, dim, dtype):
    g = Graph("concat")
    xs = [g.add_input(f"x{i}", s, dtype) for i, s in enumerate(shapes)]
    g.set_outputs([g.add("concatenate", xs, {"dim": dim})[0]], ["out"])
    check(g)


def test_concatenate_of_computed_values_and_views():
    g = Graph("concat")
    x = g.add_input("x", (64, 30), "float32")
    a = g.add1("exp", x)
    b = g.add1("transpose", g.add_input("y", (30, 64), "float32"), perm=(1, 0))
    c = g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(7.0)), shape=(64, 3), dims=())
    cat = g.add("concatenate", [a, b, c], {"dim": 1})[0]
    g.set_outputs([g.add1("negate", cat)], ["out"])
    check(g)


@pytest.mark.parametrize("low,high", [((1, 2), (3, 0)), ((0, 0), (0, 0)), ((5, 0), (0, 5)), ((0, 130), (0, 1))], ids=str)
@pytest.mark.parametrize("dtype,value", [("float32", 1.5), ("bfloat16", -2.0), ("int32", 7), ("float32", float("-inf")),
                                         ("int32", 2.7)])
def test_pad(low, high, dtype, value):
    g = Graph("pad")
    x = g.add_input("x", (40, 30), dtype)
    g.set_outputs([g.add1("pad", x, low=low, high=high, value=value)], ["out"])
    check(g)


def test_pad_3d_of_computed():
    g = Graph("pad")
    x = g.add_input("x", (4, 5, 6), "float32")
    g.set_outputs([g.add1("pad", g.add1("exp", x), low=(1, 0, 2), high=(0, 3, 1), value=0.0)], ["out"])
    check(g)


def test_outputs_that_are_not_computed():
    g = Graph("outs")
    x = g.add_input("x", (16, 8), "float32")
    g.set_outputs([
        x,  # an input returned as an output (copied)
        g.add1("transpose", x, perm=(1, 0)),
        g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(3.0)), shape=(300, 70), dims=()),
        g.add1("iota", shape=(20, 30), dim=0, dtype="int64"),
        g.add1("constant", value=np.arange(12, dtype=np.float32).reshape(3, 4) ** 2),
        g.add1("constant", value=np.random.default_rng(0).standard_normal((50, 40)).astype(np.float32)),
    ], ["same", "t", "threes", "rows", "squares", "noise"])
    check(g)


def test_repeated_outputs_and_an_input_returned_under_its_own_name():
    g = Graph("edge")
    x = g.add_input("x", (4, 5), "float32")
    e = g.add1("exp", x)
    g.set_outputs([e, e, x, x], ["a", "b", "c", "x"])
    program = check(g)
    assert program.tensor("x").kind == "inout" and program.tensor("c").kind == "output"


def test_concatenated_head_merge_is_copied_once():
    """concatenate(reshape(transpose(reshape(x)))) where the last reshape has no strides (attention's
    heads merged back): the operand is written from its source straight into its slab, not first
    into a dense scratch tensor."""
    from neuron_sim.isa import DmaCopy

    g = Graph("heads")
    x = g.add_input("x", (2 * 4, 16, 8), "float32")  # [B*H, T, D]
    y = g.add_input("y", (2, 16, 32), "float32")
    heads = g.add1("reshape", g.add1("transpose", g.add1("reshape", x, shape=(2, 4, 16, 8)), perm=(0, 2, 1, 3)),
                   shape=(2, 16, 32))
    g.set_outputs([g.add1("concatenate", heads, y, dim=2)], ["out"])
    program = check(g)
    assert not [t for t in program.tensors if t.kind == "internal"]
    assert sum(isinstance(i, DmaCopy) for i in program.instructions) <= 3
