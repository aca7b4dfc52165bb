"""random_words lowered to the generator (RandomWords per tile, the state loaded once per loop):
the exact executor's words are the graph's (Philox4x32-10 of the state) for any shape and view,
and a dropout-like chain over them costs about an elementwise pass, not a software Philox."""

from __future__ import annotations

import numpy as np
import pytest
from cc_helpers import Graph, binary, check, run_exact
from neuron_sim import get_architecture
from neuron_sim.isa import RandomWords, philox
from neuron_sim.timing import program_timing
from neuronxcc.compiler import CompileError, compile_graph

STATE = np.array([0x9E3779B9, 0x12345678, 0xFFFFFFF0, 3], np.uint32).view(np.int32)


def _words_graph(shape, *, transpose=False, slice_=None) -> Graph:
    g = Graph("words")
    state = g.add_input("state", (4,), "int32")
    n = int(np.prod(shape))
    w = g.add1("reshape", g.add1("random_words", state, count=n), shape=shape)
    if transpose:
        w = g.add1("transpose", w, perm=tuple(reversed(range(len(shape)))))
    if slice_ is not None:
        w = g.add1("slice", w, start=slice_[0], limit=slice_[1], stride=None)
    g.set_outputs([w, g.add1("xor", w, w)], ["words", "zero"])
    return g


@pytest.mark.parametrize("shape", [(1,), (3,), (7,), (129,), (1000,), (513, 3), (2, 3, 5), (4, 130, 9), (8, 128, 256)], ids=str)
def test_words_are_the_draws_for_any_shape(shape):
    program = check(_words_graph(shape), {"state": STATE})
    words = run_exact(program, {"state": STATE})["words"]
    np.testing.assert_array_equal(words.reshape(-1).view(np.uint32), philox.words(STATE, np.arange(words.size), words.size))
    assert any(isinstance(i, RandomWords) for i in program.instructions)


def test_words_read_through_a_transpose_and_a_slice():
    check(_words_graph((37, 300), transpose=True), {"state": STATE})
    check(_words_graph((37, 300), slice_=((3, 10), (30, 290))), {"state": STATE})


def _dropout_graph(shape, p=0.1) -> Graph:
    """neuron_rng.dropout's body: keep where the top 24 bits as [0, 1) are below 1 - p, scale the kept."""
    g = Graph("dropout")
    x = g.add_input("x", shape, "float32")
    state = g.add_input("state", (4,), "int32")
    n = int(np.prod(shape))
    w = g.add1("reshape", g.add1("random_words", state, count=n), shape=shape)

    def full(value, dtype):
        return g.add1("broadcast_in_dim", g.add1("constant", value=np.array(value, dtype)), shape=shape, dims=())

    top = g.add1("and", g.add1("shift_right", w, full(8, np.int32)), full(0xFFFFFF, np.int32))
    unit = g.add1("multiply", g.add1("convert", top, dtype="float32"), full(2.0**-24, np.float32))
    keep = g.add1("compare", unit, full(1.0 - p, np.float32), direction="LT")
    y = g.add1("multiply", g.add1("multiply", x, g.add1("convert", keep, dtype="float32")), full(1 / (1 - p), np.float32))
    g.set_outputs([y, keep], ["out", "mask"])
    return g


def test_a_dropout_mask_is_the_words_and_costs_about_an_elementwise_pass():
    shape = (8, 128, 256)
    graph = _dropout_graph(shape)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    program = check(graph, {"x": x, "state": STATE})
    mask = run_exact(program, {"x": x, "state": STATE})["mask"]
    w = philox.words(STATE, np.arange(x.size), x.size).reshape(shape)
    np.testing.assert_array_equal(mask, ((w >> 8).astype(np.float32) * np.float32(2.0**-24)) < np.float32(0.9))
    assert abs(float(mask.mean()) - 0.9) < 0.005
    arch = get_architecture("trn2")
    dropout_ns = program_timing(program, arch).total_ns
    multiply_ns = program_timing(compile_graph(binary("multiply", shape), arch), arch).total_ns
    assert dropout_ns <= 2.0 * multiply_ns, (dropout_ns, multiply_ns)  # the int32-op Philox took ~30x


def test_a_state_computed_in_the_graph_is_refused_by_name():
    g = Graph("computed_state")
    s = g.add_input("s", (4,), "int32")
    state = g.add1("add", s, s)
    g.set_outputs([g.add1("random_words", state, count=10)], ["words"])
    with pytest.raises(CompileError) as info:
        compile_graph(g)
    assert info.value.rule == "compile.random_words_state"
