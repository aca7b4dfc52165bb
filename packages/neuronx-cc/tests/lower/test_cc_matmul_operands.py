"""dot operands that merge dims of a strided view (attention heads: ``[B, T, H, D]`` -> ``[B*H, T, D]``)
are read through their source view, split into several canonical axes, instead of being copied
dense into an HBM scratch first."""

import numpy as np
import pytest
from cc_helpers import Graph, compile_graph
from lower.test_cc_matmul import check_dot
from neuron_sim.isa import DmaCopy
from neuron_sim.memory.access_pattern import HBM
from neuronxcc.compiler.lower.matmul_operands import merge_groups, split_axis


def _heads(g, x, b, t, h, d, transpose_last=False):
    """[B, T, H*D] -> [B*H, T, D] (or [B*H, D, T]), as attention splits heads."""
    y = g.add1("reshape", x, shape=(b, t, h, d))
    y = g.add1("transpose", y, perm=(0, 2, 1, 3))
    if transpose_last:
        y = g.add1("transpose", y, perm=(0, 1, 3, 2))
        return g.add1("reshape", y, shape=(b * h, d, t))
    return g.add1("reshape", y, shape=(b * h, t, d))


def attention_scores(b=2, t=128, h=4, d=32):
    g = Graph("scores")
    q = g.add_input("q", (b, t, h * d), "float32")
    k = g.add_input("k", (b, t, h * d), "float32")
    s = g.add1("dot_general", _heads(g, q, b, t, h, d), _heads(g, k, b, t, h, d, transpose_last=True),
               lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))
    g.set_outputs([s], ["out"])
    return g


def _hbm_copies(program):
    return [i for i in program.instructions if isinstance(i, DmaCopy) and i.src.memory == HBM and i.dst.memory == HBM]


@pytest.mark.parametrize("b,t,h,d", [(2, 128, 4, 32), (3, 40, 2, 16)])
def test_merged_batch_operands_need_no_dense_copy(b, t, h, d):
    g = attention_scores(b, t, h, d)
    program = check_dot(g)
    assert not [x for x in program.tensors if x.kind == "internal"]
    assert not _hbm_copies(program)


def test_probs_times_values_reads_values_through_their_view():
    b, t, h, d = 2, 64, 4, 16
    g = Graph("pv")
    p = g.add_input("p", (b * h, t, t), "float32")
    v = g.add_input("v", (b, t, h * d), "float32")
    o = g.add1("dot_general", p, _heads(g, v, b, t, h, d), lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,),
               rhs_contract=(1,))
    g.set_outputs([o], ["out"])
    program = check_dot(g)
    assert not [x for x in program.tensors if x.kind == "internal"]


def test_merged_contraction_dims_are_still_copied_dense():
    """[B, T, H, D] -> [B*T, H*D] @ W: a merged K would split into short TensorE passes."""
    g = Graph("proj")
    x = g.add_input("x", (2, 4, 64, 32), "float32")  # [B, H, T, D]
    w = g.add_input("w", (128, 64), "float32")
    y = g.add1("reshape", g.add1("transpose", x, perm=(0, 2, 1, 3)), shape=(128, 128))
    g.set_outputs([g.add1("dot_general", y, w, lhs_contract=(1,), rhs_contract=(0,))], ["out"])
    program = check_dot(g)
    assert [x for x in program.tensors if x.kind == "internal"]


def test_merge_groups():
    assert merge_groups((8, 4, 64, 128), (32, 64, 128)) == [[0, 1], [2], [3]]
    assert merge_groups((8, 128, 4, 64), (1024, 256)) == [[0, 1], [2, 3]]
    assert merge_groups((1, 4, 1, 5), (4, 5)) == [[0, 1, 2], [3]]
    assert merge_groups((2, 3), (3, 2)) is None  # a split and a merge
    assert merge_groups((6,), (2, 3)) is None  # a split


def test_split_axis_splits_single_strides_to_the_merged_sizes():
    axes = split_axis(32, [[(8, 1000), (4, 10)], 64, 0])
    assert [(a.size, a.strides) for a in axes] == [(8, (1000, 256, 0)), (4, (10, 64, 0))]
    assert split_axis(32, [[(8, 1), (4, 1)], [(4, 1), (8, 1)]]) is None
    assert len(split_axis(32, [5, 7])) == 1


def test_result_is_unchanged_by_reading_through_the_view(monkeypatch):
    from neuronxcc.compiler.lower import matmul

    g = attention_scores(2, 64, 2, 32)
    direct = compile_graph(g)
    monkeypatch.setattr(matmul, "_merges_ok", lambda *a: False)
    dense = compile_graph(g)
    from cc_helpers import random_inputs, run_exact

    inputs = random_inputs(g, 1)
    np.testing.assert_array_equal(run_exact(direct, inputs)["out"], run_exact(dense, inputs)["out"])


def test_bias_row_is_loaded_once_per_column_tile():
    """A bias broadcast over the product's rows is the same SBUF tile for every row tile: held."""
    from neuron_sim.isa import DmaCopy

    g = Graph("bias")
    x = g.add_input("x", (1024, 128), "float32")
    w = g.add_input("w", (128, 256), "float32")
    b = g.add_input("b", (256,), "float32")
    p = g.add1("dot_general", x, w, lhs_contract=(1,), rhs_contract=(0,))
    g.set_outputs([g.add1("add", p, g.add1("broadcast_in_dim", b, shape=(1024, 256), dims=(1,)))], ["out"])
    program = check_dot(g)
    bias_loads = [i for i in program.instructions if isinstance(i, DmaCopy) and i.src.tensor == "b"]
    assert 1 <= len(bias_loads) <= 2  # one per column tile, not one per (row, column) tile
