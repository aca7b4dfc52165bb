"""Fusion groups: chains become one tile loop; values only leave SBUF when something outside reads them."""

import numpy as np
import pytest
from cc_helpers import Graph, check, dma_counts, random_inputs
from neuronxcc.compiler import partition
from neuronxcc.compiler.fusion import live_nodes


def chain5(shape=(128, 512), dtype="float32"):
    g = Graph("chain5")
    x = g.add_input("x", shape, dtype)
    y = g.add_input("y", shape, dtype)
    a = g.add1("add", x, y)
    b = g.add1("multiply", a, x)
    c = g.add1("tanh", b)
    d = g.add1("subtract", c, y)
    e = g.add1("maximum", d, a)
    g.set_outputs([e], ["out"])
    return g


@pytest.mark.parametrize("shape", [(64, 100), (100,), (3, 7, 11)], ids=str)
def test_chain_of_five_loads_each_input_once_and_stores_once(shape):
    program = check(chain5(shape))
    assert len(program.metadata["groups"]) == 1
    assert program.metadata["groups"][0]["tiles"] == 1
    assert dma_counts(program) == (2, 1)
    assert not [t for t in program.tensors if t.kind == "internal"]


def test_multi_tile_chain_loads_and_stores_once_per_tile():
    program = check(chain5((1024, 3000)))
    tiles = program.metadata["groups"][0]["tiles"]
    assert tiles > 1
    assert dma_counts(program) == (2 * tiles, tiles)


def test_intermediates_keep_their_dtype():
    g = Graph("bf16_chain")
    x = g.add_input("x", (64, 64), "float32")
    a = g.add1("convert", g.add1("exp", x), dtype="bfloat16")  # rounded to bf16 here
    b = g.add1("multiply", a, a)  # bf16 result
    g.set_outputs([g.add1("convert", b, dtype="float32")], ["out"])
    program = check(g)  # bit-exact: bf16 tiles round exactly where the graph does
    # a * a: a tensor_tensor or ScalarE's square, reading and writing bf16 tiles
    assert any(i.opcode in ("TENSOR_TENSOR", "ACTIVATE") and i.dst.dtype == "bfloat16"
               and all(r.dtype == "bfloat16" for r in i.reads()) for i in program.instructions)


def test_values_read_outside_the_group_are_stored():
    g = Graph("two_outputs")
    x = g.add_input("x", (64, 96), "float32")
    a = g.add1("exp", x)
    b = g.add1("add", a, x)
    s = g.add1("reduce", b, kind="sum", dims=(1,))
    t = g.add1("transpose", a, perm=(1, 0))  # a is read through a view: stored first
    g.set_outputs([s, g.add1("negate", t)], ["s", "t"])
    inputs = random_inputs(g, 0)
    program = check(g, inputs, atol=1e-3)
    assert len([t for t in program.tensors if t.kind == "internal"]) == 1


def test_a_node_reading_a_reduction_starts_a_new_group():
    # Over the leading dim (not rows: see test_cc_rowwise.py for reductions over the trailing dims).
    g = Graph("norm")
    x = g.add_input("x", (32, 100), "float32")
    s = g.add1("reduce", x, kind="sum", dims=(0,), keepdims=True)
    y = g.add1("divide", x, g.add1("broadcast_in_dim", s, shape=(32, 100), dims=(0, 1)))
    g.set_outputs([y], ["out"])
    groups = partition(live_nodes(g))
    assert [grp.kind for grp in groups] == ["fused", "fused"]
    # Positive inputs: a sum with cancellation has no relative error bound, and the executors
    # (PSUM passes vs one numpy reduction) add in different orders, as BLAS kernels do per CPU.
    # 32 positive fp32 terms are within 31 ulps of each other whatever the order.
    check(g, random_inputs(g, low=0.5, high=3.0), rtol=32 * 2.0**-24)


def test_independent_chains_reading_one_input_share_its_load():
    g = Graph("siblings")
    x = g.add_input("x", (256, 256), "float32")
    g.set_outputs([g.add1("exp", x), g.add1("sin", x), g.add1("reduce", x, kind="max", dims=(1,))], ["e", "s", "m"])
    program = check(g)
    assert len(program.metadata["groups"]) == 1
    assert dma_counts(program)[0] == program.metadata["groups"][0]["tiles"]


def test_no_cycle_through_another_group():
    # a -> argmax (its own group) -> back into an elementwise op with a: must not fuse a's group
    # with the consumer, or the group would wait on itself.
    g = Graph("cycle")
    x = g.add_input("x", (8, 50), "float32")
    a = g.add1("exp", x)
    idx = g.add1("argmax", a, dim=1, dtype="float32", keepdims=True)
    out = g.add1("add", a, g.add1("broadcast_in_dim", idx, shape=(8, 50), dims=(0, 1)))
    g.set_outputs([out], ["out"])
    groups = partition(live_nodes(g))
    assert [grp.kind for grp in groups] == ["fused", "argreduce", "fused"]
    check(g)


def test_dead_nodes_are_not_compiled():
    g = Graph("dead")
    x = g.add_input("x", (10,), "float32")
    g.add1("exp", x)  # unused
    g.set_outputs([g.add1("sin", x)], ["out"])
    program = check(g)
    assert not any(i.opcode == "ACTIVATE" and i.func == "exp" for i in program.instructions)


def test_long_chains_are_split_to_fit_sbuf():
    from neuronxcc.compiler.fusion import MAX_FUSED_NODES

    g = Graph("long")
    x = g.add_input("x", (128, 4096), "float32")
    v = x
    for k in range(2 * MAX_FUSED_NODES + 20):
        v = g.add1("add" if k % 2 else "multiply", v, x)
    g.set_outputs([v], ["out"])
    inputs = {"x": np.random.default_rng(0).uniform(0.99, 1.01, (128, 4096)).astype(np.float32)}
    program = check(g, inputs)
    assert 1 < len(program.metadata["groups"]) <= 4


def test_dead_intermediates_share_buffers():
    """A long chain needs only a few live tiles at a time, so its tiles stay large."""
    from neuronxcc.compiler.lower.elementwise import share_buffers

    g = Graph("long")
    x = g.add_input("x", (16,), "float32")
    v = x
    for _ in range(30):
        v = g.add1("exp", v)
    w = g.add1("copy", v)
    g.set_outputs([g.add1("add", w, x)], ["out"])
    roles, per_element = share_buffers(g.nodes, {g.outputs[0].id})
    assert len(set(roles.values())) == 2 and per_element == 8
    check(g)


def test_groups_run_as_soon_as_their_inputs_are_computed():
    """A group reading only graph inputs (independent work) is placed at the first level, before a
    chain that comes earlier in graph order; the order stays topological."""
    g = Graph("asap")
    x = g.add_input("x", (256, 256), "float32")
    y = g.add_input("y", (256, 256), "float32")
    a = g.add1("reduce", g.add1("exp", x), kind="sum", dims=(1,))  # group 1
    b = g.add1("tanh", g.add1("broadcast_in_dim", a, shape=(256, 256), dims=(0,)))  # reads group 1
    c = g.add1("reduce", g.add1("sin", b), kind="max", dims=(0,))  # reads group 2
    d = g.add1("cos", y)  # independent, last in graph order
    g.set_outputs([c, d], ["c", "d"])
    nodes = live_nodes(g)
    groups = partition(nodes)
    assert [n.op for n in groups[1].nodes] == ["cos"]  # with the first, not after the chain
    seen = set()
    for grp in groups:
        assert grp.direct <= seen
        seen.add(grp.id)
    check(g, rtol=1e-6, atol=1e-5)
