"""Elementwise nodes reading a matmul's product through a reshape that keeps its bytes
(``[B*T, N] -> [B, T, N]``, as every linear layer's output is) join its epilogue: computed on the
product's tiles as they leave PSUM, with no HBM round trip of the raw product."""

from cc_helpers import Graph, check
from lower.test_cc_matmul import check_dot
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
    program = check_dot(g)
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
