"""Elementwise nodes reading a matmul's product through a reshape that keeps its bytes
(``[B*T, N] -> [B, T, N]``, as every linear layer's output is) join its epilogue: computed on the
product's tiles as they leave PSUM, with no HBM round trip of the raw product."""

import numpy as np
from cc_helpers import Graph, check, compile_graph, random_inputs, run_exact, run_fast
from neuronxcc.compiler import partition
from neuronxcc.compiler.fold import fold_constants
from neuronxcc.compiler.fusion import live_nodes


def linear_then(op_after, reduce_after=False, shape=(4, 128, 256)):
    b, t, n = shape
    g = Graph("linear_reshape")
    x = g.add_input("x", (b * t, 64), "float32")
    w = g.add_input("w", (64, n), "float32")
    y = g.add_input("y", shape, "float32")
    p = g.add1("reshape", g.add1("dot_general", x, w, lhs_contract=(1,), rhs_contract=(0,)), shape=shape)
    z = op_after(g, p, y)
    if reduce_after:
        z = g.add1("reduce", z, kind="sum", dims=(2,))
    g.set_outputs([z], ["out"])
    return g


def _kinds(g):
    nodes = live_nodes(g)
    return [(grp.kind, [n.op for n in grp.nodes]) for grp in partition(nodes, fold_constants(nodes))]


def test_elementwise_chain_after_a_reshape_joins_the_epilogue():
    g = linear_then(lambda g, p, y: g.add1("multiply", g.add1("tanh", p), y))
    assert _kinds(g) == [("matmul", ["dot_general", "tanh", "multiply"])]
    inputs = random_inputs(g)
    program = compile_graph(g)
    exact, fast = run_exact(program, inputs)["out"], run_fast(g, inputs)["out"]
    # The product's accumulation order differs (PSUM passes vs one BLAS call, whose kernel depends
    # on the CPU): up to 8 fp32 ulps of sum |x||w|. tanh is 1-Lipschitz, so after tanh(p) * y that
    # is at most 8 ulps of sum |x||w| times |y|, plus the rounding of tanh and of the product.
    magnitude = (np.abs(inputs["x"]).astype(np.float64) @ np.abs(inputs["w"])).reshape(inputs["y"].shape)
    tol = 8 * 2.0**-24 * magnitude * np.abs(inputs["y"]) + 4 * 2.0**-24 * np.abs(fast)
    assert np.all(np.abs(exact.astype(np.float64) - fast) <= tol)
    assert not [t for t in program.tensors if t.kind == "internal"]  # the raw product never reaches HBM


def test_value_needed_by_a_reduction_stays_with_it():
    g = linear_then(lambda g, p, y: g.add1("multiply", p, y), reduce_after=True)
    kinds = _kinds(g)
    assert kinds[0] == ("matmul", ["dot_general"])
    check(g, rtol=1e-5, atol=1e-4)


def test_reshaped_epilogue_value_read_outside_is_stored_in_its_own_shape():
    def build(g, p, y):
        e = g.add1("exp", g.add1("multiply", p, y))
        return g.add1("reduce", g.add1("transpose", e, perm=(0, 2, 1)), kind="max", dims=(1,))

    g = linear_then(build)
    check(g, rtol=1e-5, atol=1e-4)


def _gelu_grad_of(g, h):
    """d gelu(h) / dh as the graph spells it: 0.5 (1 + erf(h / sqrt2)) + h exp(-h^2 / 2) / sqrt(2 pi)."""

    def c(value):
        k = g.add1("constant", value=np.float32(value))
        return g.add1("broadcast_in_dim", k, shape=h.type.shape, dims=())

    cdf = g.add1("multiply", g.add1("add", g.add1("erf", g.add1("multiply", h, c(0.7071067811865476))), c(1.0)), c(0.5))
    pdf = g.add1("multiply", g.add1("exp", g.add1("multiply", g.add1("multiply", h, h), c(-0.5))), c(0.3989422804014327))
    return g.add1("add", cdf, g.add1("multiply", h, pdf))


def test_chain_on_inputs_read_only_by_the_epilogue_is_recomputed_in_it():
    """GELU's derivative of a saved activation, times the incoming gradient's matmul: computed in the
    matmul's epilogue from the activation (no pass of its own, no HBM round trip)."""
    shape = (4, 128, 256)
    g = Graph("gelu_backward")
    dy = g.add_input("dy", (512, 64), "float32")
    w = g.add_input("w", (64, 256), "float32")
    h = g.add_input("h", shape, "float32")
    p = g.add1("reshape", g.add1("dot_general", dy, w, lhs_contract=(1,), rhs_contract=(0,)), shape=shape)
    g.set_outputs([g.add1("multiply", p, _gelu_grad_of(g, h))], ["out"])
    kinds = _kinds(g)
    assert len(kinds) == 1 and kinds[0][0] == "matmul" and kinds[0][1][0] == "dot_general"
    program = check(g, rtol=1e-5, atol=1e-5)
    assert not [t for t in program.tensors if t.kind == "internal"]


def test_chains_sharing_only_constants_are_not_fused_together():
    """Two layers' chains read the same constants but nothing else in common: separate groups, so
    each can join the epilogue that reads it."""
    g = Graph("two")
    a = g.add_input("a", (128, 256), "float32")
    b = g.add_input("b", (128, 256), "float32")
    g.set_outputs([_gelu_grad_of(g, a), _gelu_grad_of(g, b)], ["ga", "gb"])
    assert len(_kinds(g)) == 2
    check(g, rtol=1e-6, atol=1e-6)
