"""The aliasing facts compile_neff records in a NEFF's metadata: which outputs may overwrite which
inputs. Each pair it claims is checked by running the NEFF with that output bound to the input's
own memory, in both executors, against a run with separate buffers."""

import numpy as np
import pytest
from cc_helpers import Graph, random_inputs
from neuron_sim.runtime import Runtime, RuntimeConfig
from neuron_sim.trace import TraceSink
from neuronxcc.compiler import compile_neff
from neuronxcc.compiler.aliasing import ALIASING_KEY, in_place_pairs_of


def pairs(g: Graph) -> set:
    return set(in_place_pairs_of(compile_neff(g, "trn2").metadata))


def add_in_place(shape=(130, 7), dtype="float32") -> Graph:
    """``x.add_(y * 2)``: out = x + 2y."""
    g = Graph("add_")
    x = g.add_input("x", shape, dtype)
    y = g.add_input("y", shape, dtype)
    g.set_outputs([g.add1("add", x, g.add1("multiply", y, splat(g, 2.0, shape)))], ["out"])
    return g


def splat(g: Graph, value: float, shape):
    return g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(value)), shape=shape, dims=())


def test_an_elementwise_update_may_overwrite_each_input():
    assert pairs(add_in_place()) == {(0, 0), (1, 0)}
    assert compile_neff(add_in_place(), "trn2").metadata[ALIASING_KEY] == {"version": 1, "in_place": [[0, 0], [1, 0]]}


def test_an_input_read_by_a_reduction_may_not_be_overwritten():
    g = Graph("x_plus_sum")
    x = g.add_input("x", (64, 33), "float32")
    total = g.add1("reduce", x, kind="sum", dims=(0, 1))
    g.set_outputs([g.add1("add", x, g.add1("broadcast_in_dim", total, shape=(64, 33), dims=()))], ["out"])
    assert pairs(g) == set()


def test_a_broadcast_operand_does_not_stop_the_other_input():
    g = Graph("x_plus_row")
    x = g.add_input("x", (40, 9), "float32")
    b = g.add_input("b", (9,), "float32")
    g.set_outputs([g.add1("add", x, g.add1("broadcast_in_dim", b, shape=(40, 9), dims=(1,)))], ["out"])
    assert pairs(g) == {(0, 0)}


def test_an_input_two_outputs_read_is_never_overwritten():
    g = Graph("two_readers")
    x = g.add_input("x", (16, 16), "float32")
    g.set_outputs([g.add1("exp", x), g.add1("tanh", x)], ["e", "t"])
    assert pairs(g) == set()


def test_a_reader_of_the_new_value_is_allowed():
    """out0 = x * 3 overwrites x; out1 = sum(out0) reads only the new value."""
    g = Graph("new_value_reader")
    x = g.add_input("x", (8, 128), "float32")
    y = g.add1("multiply", x, splat(g, 3.0, (8, 128)))
    g.set_outputs([y, g.add1("reduce", y, kind="sum", dims=(1,))], ["y", "s"])
    assert pairs(g) == {(0, 0)}


def test_shape_and_dtype_must_match():
    g = Graph("narrowing")
    x = g.add_input("x", (32, 5), "float32")
    g.set_outputs([g.add1("convert", g.add1("exp", x), dtype="bfloat16")], ["out"])
    assert pairs(g) == set()
    g = Graph("transposed")
    x = g.add_input("x", (6, 6), "float32")
    g.set_outputs([g.add1("transpose", g.add1("exp", x), perm=(1, 0))], ["out"])
    assert pairs(g) == set()  # same shape, but element k of the result is not made from element k


def test_an_unread_input_may_take_any_output_of_its_type():
    g = Graph("unread")
    x = g.add_input("x", (4, 4), "float32")
    g.add_input("spare", (4, 4), "float32")
    g.set_outputs([g.add1("exp", x)], ["out"])
    assert pairs(g) == {(0, 0), (1, 0)}


@pytest.mark.parametrize("mode", ["exact", "fast"])
@pytest.mark.parametrize("shape", [(130, 7), (3, 1000), (5,)])
def test_claimed_pairs_run_correctly_in_place(mode, shape):
    g = add_in_place(shape)
    neff = compile_neff(g, "trn2")
    inputs = random_inputs(g, 1)
    rt = Runtime(RuntimeConfig.from_env({"NEURON_SIM_MODE": mode}), blocking=True, trace=TraceSink())
    expected = np.empty(shape, np.float32)
    rt.device(0).launch(neff, {"x": inputs["x"], "y": inputs["y"], "out": expected})
    for i, j in sorted(in_place_pairs_of(neff.metadata)):
        name = ["x", "y"][i]
        buffers = {k: v.copy() for k, v in inputs.items()}
        buffers[["out"][j]] = buffers[name]  # the output written into the input's own memory
        rt.device(0).launch(neff, buffers)
        np.testing.assert_array_equal(buffers[name], expected)
    rt.synchronize()
