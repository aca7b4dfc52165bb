"""broadcast_in_dim, transpose, slice and reshape folded into access patterns (and materialized
when they are outputs)."""

import pytest
from cc_helpers import Graph, check, dma_counts
from neuron_sim.isa import Transpose

BROADCASTS = [
    # (source shape, result shape, dims)
    ((300,), (200, 300), (1,)),  # a row for every row
    ((200,), (200, 300), (0,)),  # a column for every column: a per-partition scalar
    ((200, 1), (200, 300), (0, 1)),  # size-1 dim
    ((), (17, 33), ()),  # a scalar tensor
    ((1,), (1000,), (0,)),
    ((5, 1, 7), (5, 9, 7), (0, 1, 2)),  # middle dim
    ((9,), (4, 9, 130), (1,)),  # middle dim of 3
    ((4, 130), (4, 9, 130), (0, 2)),
    ((3, 5), (2, 3, 4, 5), (1, 3)),
    ((7, 2), (2, 7), (1, 0)),  # dims out of order: a transposing broadcast
]


@pytest.mark.parametrize("src,shape,dims", BROADCASTS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_broadcast_into_binary(src, shape, dims, dtype):
    g = Graph("bcast")
    x = g.add_input("x", shape, dtype)
    b = g.add_input("b", src, dtype)
    bb = g.add1("broadcast_in_dim", b, shape=shape, dims=dims)
    g.set_outputs([g.add1("add", x, bb), g.add1("multiply", bb, x)], ["sum", "prod"])
    program = check(g)
    loads, stores = dma_counts(program)
    tiles = program.metadata["groups"][0]["tiles"]
    assert loads == 2 * tiles and stores == 2 * tiles  # the broadcast is never materialized


@pytest.mark.parametrize("src,shape,dims", BROADCASTS, ids=str)
def test_broadcast_as_output(src, shape, dims):
    g = Graph("bcast_out")
    b = g.add_input("b", src, "float32")
    g.set_outputs([g.add1("broadcast_in_dim", b, shape=shape, dims=dims)], ["out"])
    check(g)


def test_column_broadcast_uses_tensor_scalar_operand():
    g = Graph("col")
    x = g.add_input("x", (128, 512), "float32")
    c = g.add_input("c", (128,), "float32")
    g.set_outputs([g.add1("subtract", x, g.add1("broadcast_in_dim", c, shape=(128, 512), dims=(0,)))], ["out"])
    program = check(g)
    ops = [i for i in program.instructions if i.opcode == "TENSOR_SCALAR"]
    assert len(ops) == 1 and ops[0].operand0.shape == (128, 1)  # a [P, 1] column, loaded once per tile


@pytest.mark.parametrize("shape,perm", [((300, 200), (1, 0)), ((5, 40, 70), (0, 2, 1)), ((2, 3, 4, 5), (3, 1, 0, 2)),
                                        ((64, 130), (1, 0)), ((7, 9), (1, 0)), ((2, 100, 3), (2, 0, 1))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int32"])
def test_transpose(shape, perm, dtype):
    g = Graph("transpose")
    x = g.add_input("x", shape, dtype)
    t = g.add1("transpose", x, perm=perm)
    g.set_outputs([t, g.add1("add", t, t)], ["t", "twice"])
    check(g)


def test_large_2d_transpose_goes_through_tensor_engine():
    g = Graph("transpose")
    x = g.add_input("x", (300, 520), "float32")
    g.set_outputs([g.add1("transpose", x, perm=(1, 0))], ["out"])
    program = check(g)
    transposes = [i for i in program.instructions if isinstance(i, Transpose)]
    assert len(transposes) == 3 * 5  # 128x128 blocks
    # Every DMA moves contiguous rows (no element-granular transposing access pattern).
    for inst in program.instructions:
        if inst.opcode == "DMA_COPY":
            assert inst.src.free[-1][0] == 1 and inst.dst.free[-1][0] == 1


@pytest.mark.parametrize("start,limit,stride", [((0, 0), (10, 20), None), ((3, 5), (97, 40), (2, 3)),
                                                 ((99, 0), (100, 40), (1, 1)), ((1, 1), (2, 2), None)], ids=str)
def test_slice(start, limit, stride):
    g = Graph("slice")
    x = g.add_input("x", (100, 40), "float32")
    s = g.add1("slice", x, start=start, limit=limit, stride=stride)
    g.set_outputs([s, g.add1("exp", s)], ["s", "e"])
    check(g)


@pytest.mark.parametrize("src,shape", [((30, 40), (1200,)), ((30, 40), (4, 300)), ((1200,), (2, 3, 200)),
                                        ((2, 3, 4, 5), (6, 20)), ((7,), (7, 1, 1)), ((), (1, 1))], ids=str)
def test_reshape(src, shape):
    g = Graph("reshape")
    x = g.add_input("x", src, "float32")
    r = g.add1("reshape", x, shape=shape)
    g.set_outputs([r, g.add1("negate", r)], ["r", "n"])
    program = check(g)
    assert not [t for t in program.tensors if t.kind == "internal"]  # contiguous: free


def test_reshape_of_a_transpose_is_materialized_first():
    g = Graph("reshape")
    x = g.add_input("x", (6, 10), "float32")
    t = g.add1("transpose", x, perm=(1, 0))
    r = g.add1("reshape", t, shape=(60,))
    g.set_outputs([g.add1("exp", r)], ["out"])
    program = check(g)
    assert [t.name for t in program.tensors if t.kind == "internal"]


def test_views_of_a_computed_value():
    g = Graph("views")
    x = g.add_input("x", (64, 48), "float32")
    e = g.add1("exp", x)
    t = g.add1("transpose", e, perm=(1, 0))
    s = g.add1("slice", t, start=(0, 8), limit=(48, 40))
    g.set_outputs([g.add1("add", s, s), e], ["out", "e"])
    check(g)


def test_broadcast_of_iota_and_constants():
    g = Graph("iota")
    i = g.add1("iota", shape=(30,), dim=0, dtype="float32")
    x = g.add_input("x", (20, 30), "float32")
    g.set_outputs([g.add1("multiply", x, g.add1("broadcast_in_dim", i, shape=(20, 30), dims=(1,)))], ["out"])
    program = check(g)
    assert any(inst.opcode == "IOTA" for inst in program.instructions)
    assert dma_counts(program)[0] == program.metadata["groups"][0]["tiles"]  # only x is loaded


def test_broadcast_chain_numerics():
    g = Graph("bias_gelu")
    x = g.add_input("x", (256, 384), "bfloat16")
    b = g.add_input("b", (384,), "bfloat16")
    h = g.add1("add", x, g.add1("broadcast_in_dim", b, shape=(256, 384), dims=(1,)))
    g.set_outputs([g.add1("gelu", h)], ["out"])
    check(g)  # bf16 intermediate rounded as the graph says, then gelu: bit-exact
