"""random_words: a draw's Philox4x32-10 words from its 4-word state - the definition and the fast
executor give ISA RandomWords' bits."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ValidationError
from neuron_sim.executor.fast import evaluate
from neuron_sim.graph import Graph, evaluate_reference
from neuron_sim.isa import philox

STATE = np.array([0x89ABCDEF, 0x01234567, 5, 1], np.uint32).view(np.int32)


def _graph(count: int) -> Graph:
    g = Graph("draw")
    state = g.add_input("state", (4,), "int32")
    words = g.add1("random_words", state, count=count)
    # a consumer, as a dropout has: the top 24 bits as float in [0, 1)
    unit = g.add1("convert", g.add1("shift_right", words, g.add1("constant", value=np.full(count, 8, np.int32))),
                  dtype="float32")
    g.set_outputs([words, unit], ["words", "unit"])
    return g


def _run(run, g: Graph, count: int):
    out = {"words": np.zeros(count, np.int32), "unit": np.zeros(count, np.float32)}
    run(g, {"state": STATE.view(np.uint8).copy(), **{k: v.reshape(-1).view(np.uint8) for k, v in out.items()}})
    return out


@pytest.mark.parametrize("count", [1, 3, 4, 5, 127, 513, 4099])
def test_the_definition_and_the_fast_executor_give_the_draws_words(count):
    g = _graph(count)
    ref = _run(evaluate_reference, g, count)
    fast = _run(lambda g, b: evaluate(g, b), g, count)
    expected = philox.words(STATE, np.arange(count), count)
    np.testing.assert_array_equal(ref["words"].view(np.uint32), expected)
    np.testing.assert_array_equal(fast["words"], ref["words"])
    np.testing.assert_array_equal(fast["unit"].view(np.uint32), ref["unit"].view(np.uint32))


@pytest.mark.parametrize("shape, dtype, count", [((4,), "float32", 8), ((3,), "int32", 8), ((4,), "int32", 0),
                                                 ((4,), "int32", 4.0), ((4,), "int32", philox.MAX_COUNT + 1)])
def test_bad_states_and_counts_are_refused(shape, dtype, count):
    g = Graph("bad")
    state = g.add_input("state", shape, dtype)
    with pytest.raises(ValidationError) as info:
        g.add1("random_words", state, count=count)
    assert info.value.rule == "graph.random_words"
