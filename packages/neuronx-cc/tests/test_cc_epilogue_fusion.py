"""Matmul epilogues: elementwise consumers of a dot_general run while its result leaves PSUM.

Inputs are small integers, so every fp32 accumulation order gives the same sums: the exact and
fast executors must agree bit for bit, epilogue included.
"""

import numpy as np
import pytest
from cc_helpers import Graph, check, compile_graph, dma_counts
from neuron_sim import estimate
from neuron_sim.isa import TensorTensor
from neuron_sim.memory.access_pattern import PSUM
from neuronxcc.compiler import partition
from neuronxcc.compiler.fusion import live_nodes

MK_NK = dict(lhs_contract=(1,), rhs_contract=(1,))


def integer_inputs(graph, seed=0, low=-3, high=3):
    rng = np.random.default_rng(seed)
    return {v.name: rng.integers(low, high + 1, size=v.type.shape).astype(np.float32) for v in graph.inputs}


def linear(M=256, K=64, N=384, dtype="bfloat16", act="gelu", bias=True):
    """gelu(x @ w.T + b), torch Linear's layout."""
    g = Graph("linear")
    x = g.add_input("x", (M, K), dtype)
    w = g.add_input("w", (N, K), dtype)
    y = g.add1("dot_general", x, w, **MK_NK)
    if bias:
        b = g.add_input("b", (N,), dtype)
        y = g.add1("add", y, g.add1("broadcast_in_dim", b, shape=(M, N), dims=(1,)))
    if act:
        y = g.add1(act, y)
    g.set_outputs([y], ["out"])
    return g


def full(g, value, shape, dtype="float32"):
    c = g.add1("constant", value=np.asarray(value, np.float32), dtype=dtype)
    return g.add1("broadcast_in_dim", c, shape=shape, dims=())


def kinds(graph):
    return [(g.kind, [n.op for n in g.nodes]) for g in partition(live_nodes(graph))]


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "float16"])
def test_bias_gelu_runs_in_the_evacuation_no_hbm_round_trip(dtype):
    g = linear(dtype=dtype)
    assert kinds(g) == [("matmul", ["dot_general", "add", "gelu"])]
    program = check(g, integer_inputs(g))
    (group,) = program.metadata["groups"]
    assert not [t for t in program.tensors if t.kind == "internal"]  # the raw product never reaches HBM
    loads, stores = dma_counts(program)
    assert stores == group["tiles"]  # one store per output tile: only the final value
    read = [i.src.tensor for i in program.instructions if i.opcode == "DMA_COPY" and i.src.memory == "hbm"]
    assert len(read) == loads and set(read) == {"x", "w", "b"}  # nothing reads the product back
    assert 1 <= read.count("b") <= group["tiles"]  # the bias row, at most once per output tile (held per column tile)


def test_fused_epilogue_is_faster_than_a_separate_pass():
    g = linear(M=512, K=512, N=1024)
    fused = estimate(compile_graph(g)).total_ns
    # the same graph with the product forced through HBM (it is also an output, read back by the epilogue)
    h = Graph("unfused")
    x = h.add_input("x", (512, 512), "bfloat16")
    w = h.add_input("w", (1024, 512), "bfloat16")
    b = h.add_input("b", (1024,), "bfloat16")
    y = h.add1("dot_general", x, w, **MK_NK)
    # read through a transpose (a view that reorders the bytes, so not fused): a separate pass
    yt = h.add1("transpose", y, perm=(1, 0))
    z = h.add1("gelu", h.add1("add", yt, h.add1("broadcast_in_dim", b, shape=(1024, 512), dims=(0,))))
    h.set_outputs([z], ["out"])
    assert len(compile_graph(h).metadata["groups"]) == 2
    assert fused < estimate(compile_graph(h)).total_ns


def test_fp32_product_is_read_straight_from_psum():
    g = linear(dtype="float32")
    program = check(g, integer_inputs(g))
    adds = [i for i in program.instructions if isinstance(i, TensorTensor)]
    assert adds and all(i.in0.memory == PSUM or i.in1.memory == PSUM for i in adds)


def test_product_also_an_output_is_stored_once_per_tile_as_well():
    g = Graph("two")
    x = g.add_input("x", (200, 64), "bfloat16")
    w = g.add_input("w", (300, 64), "bfloat16")
    y = g.add1("dot_general", x, w, **MK_NK)
    z = g.add1("tanh", g.add1("multiply", y, full(g, 0.125, (200, 300), "bfloat16")))
    g.set_outputs([y, z], ["y", "z"])
    assert kinds(g) == [("matmul", ["dot_general", "multiply", "tanh"])]
    program = check(g, integer_inputs(g))
    (group,) = program.metadata["groups"]
    assert dma_counts(program)[1] == 2 * group["tiles"]


def test_scale_and_cast_epilogue():
    g = Graph("scale_cast")
    q = g.add_input("q", (2, 4, 50, 32), "bfloat16")
    k = g.add_input("k", (2, 4, 50, 32), "bfloat16")
    s = g.add1("dot_general", q, k, lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(3,))
    s = g.add1("multiply", s, full(g, 32 ** -0.5, (2, 4, 50, 50), "bfloat16"))
    s = g.add1("convert", s, dtype="float32")
    g.set_outputs([s], ["scores"])
    (kind,) = kinds(g)
    assert kind[0] == "matmul" and kind[1][-1] == "convert"
    check(g, integer_inputs(g))


def test_residual_and_earlier_group_values_are_loaded_per_tile():
    g = Graph("residual")
    x = g.add_input("x", (130, 96), "float32")
    w = g.add_input("w", (96, 96), "float32")
    h = g.add1("exp", g.add1("multiply", x, x))  # a fused group computed first (read by a reduction
    y = g.add1("dot_general", x, w, lhs_contract=(1,), rhs_contract=(0,))  # too: not recomputed in the epilogue)
    out = g.add1("add", g.add1("add", y, x), h)
    g.set_outputs([out, g.add1("reduce", h, kind="sum", dims=(1,))], ["out", "hsum"])
    groups = kinds(g)
    assert groups[-1] == ("matmul", ["dot_general", "add", "add"])
    inputs = integer_inputs(g, low=-1, high=1)
    check(g, inputs)


def test_reductions_and_views_of_the_product_start_new_groups():
    g = Graph("softmaxish")
    q = g.add_input("q", (64, 32), "float32")
    k = g.add_input("k", (80, 32), "float32")
    s = g.add1("dot_general", q, k, **MK_NK)
    e = g.add1("exp", g.add1("multiply", s, full(g, 0.1, (64, 80))))
    total = g.add1("reduce", e, kind="sum", dims=(1,))
    st = g.add1("transpose", s, perm=(1, 0))
    g.set_outputs([total, g.add1("negate", st)], ["total", "neg_t"])
    groups = kinds(g)
    assert groups[0][0] == "matmul" and "reduce" not in groups[0][1]
    assert any(kind == "fused" and "reduce" in ops for kind, ops in groups)
    check(g, integer_inputs(g), rtol=1e-6)


def test_sum_of_two_products():
    g = Graph("two_dots")
    a = g.add_input("a", (100, 40), "bfloat16")
    b = g.add_input("b", (40, 70), "bfloat16")
    c = g.add_input("c", (100, 30), "bfloat16")
    d = g.add_input("d", (30, 70), "bfloat16")
    y = g.add1("add", g.add1("dot_general", a, b, lhs_contract=(1,), rhs_contract=(0,)),
               g.add1("dot_general", c, d, lhs_contract=(1,), rhs_contract=(0,)))
    g.set_outputs([g.add1("relu", y)], ["out"])
    assert [k for k, _ in kinds(g)] == ["matmul", "matmul"]
    check(g, integer_inputs(g))


def test_epilogue_on_packed_batches():
    g = Graph("packed")
    a = g.add_input("a", (32, 6, 40), "float32")  # K = 40: TensorE (shorter K goes to VectorE)
    b = g.add_input("b", (32, 40, 5), "float32")
    bias = g.add_input("bias", (32, 1, 5), "float32")
    y = g.add1("dot_general", a, b, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))
    y = g.add1("add", y, g.add1("broadcast_in_dim", g.add1("reshape", bias, shape=(32, 5)), shape=(32, 6, 5), dims=(0, 2)))
    g.set_outputs([g.add1("sigmoid", y)], ["out"])
    program = check(g, integer_inputs(g))
    assert program.metadata["groups"][0]["pack"] > 1


def test_epilogue_on_vector_engine_batches():
    g = Graph("vector")
    a = g.add_input("a", (200, 6, 8), "bfloat16")
    b = g.add_input("b", (200, 8, 5), "bfloat16")
    y = g.add1("dot_general", a, b, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))
    g.set_outputs([y, g.add1("relu", y)], ["y", "relu"])
    program = check(g, integer_inputs(g))
    (group,) = program.metadata["groups"]
    assert group["engine"] == "vector" and dma_counts(program) == (2 * group["tiles"], 2 * group["tiles"])
