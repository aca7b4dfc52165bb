"""gather, index_add, take_along_axis and scatter through indirect DMA: exact agreement with the graph.

Data movement is exact and scatter-adds accumulate in fp32 in index order on both sides, so every
comparison is bit for bit - duplicates included. Out-of-range indices raise on both paths, naming
the index, the dimension size and the node's source line.
"""

import numpy as np
import pytest
from cc_helpers import Graph, check, compile_graph, run_exact, run_fast
from neuron_sim import ValidationError, dtypes, estimate
from neuron_sim.isa import DmaIndirect
from neuronxcc.compiler import INEXACT_INTEGER, CompileError

rng = np.random.default_rng(0)


def values(shape, dtype):
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtypes.is_int(dtype):
        info = np.iinfo(dtypes.to_numpy(dtype))
        return rng.integers(max(info.min, -1000), min(info.max, 1000), shape).astype(dtypes.to_numpy(dtype))
    return dtypes.convert(rng.standard_normal(shape).astype(np.float32) * 4, dtype)


def indices(shape, size, dtype="int64"):
    return rng.integers(0, size, shape).astype(dtype)


def indirect(program):
    return [i for i in program.instructions if isinstance(i, DmaIndirect)]


# --- gather (index_select / embedding) ------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "int64", "bool", "int8"])
def test_embedding_rows(dtype):
    g = Graph("emb")
    t = g.add_input("table", (50, 33), dtype)
    i = g.add_input("ids", (7, 30), "int64")
    g.set_outputs([g.add1("gather", t, i, axis=0)], ["out"])
    program = check(g, {"table": values((50, 33), dtype), "ids": indices((7, 30), 50)})
    ops = indirect(program)
    assert len(ops) == 2 and all(o.direction == "gather" and o.index.partition_count <= 128 for o in ops)


@pytest.mark.parametrize("axis,shape,ishape", [(1, (4, 50, 6), (300,)), (-1, (40, 50), (3, 5)), (2, (3, 4, 9), (2, 2))],
                         ids=str)
def test_index_select_other_axes_through_access_patterns(axis, shape, ishape):
    g = Graph("select")
    t = g.add_input("t", shape, "float32")
    i = g.add_input("i", ishape, "int32")
    g.set_outputs([g.add1("gather", t, i, axis=axis)], ["out"])
    program = check(g, {"t": values(shape, "float32"), "i": indices(ishape, shape[axis], "int32")})
    assert not [t for t in program.tensors if t.kind == "internal"]  # no transpose through HBM


def test_wide_rows_are_chunked_and_indices_may_repeat():
    g = Graph("wide")
    t = g.add_input("t", (20, 10000), "float32")
    i = g.add_input("i", (300,), "int64")
    g.set_outputs([g.add1("gather", t, i, axis=0)], ["out"])
    ids = indices((300,), 3)  # heavy duplication
    program = check(g, {"t": values((20, 10000), "float32"), "i": ids})
    assert program.metadata["groups"][0]["row_chunks"] > 1


def test_gather_from_a_transposed_view_and_with_iota_indices():
    g = Graph("views")
    t = g.add_input("t", (60, 40), "bfloat16")
    tt = g.add1("transpose", t, perm=(1, 0))  # [40, 60]: rows are strided columns of t
    ids = g.add1("iota", shape=(20,), dim=0, dtype="int32")
    g.set_outputs([g.add1("gather", tt, ids, axis=0)], ["out"])
    check(g, {"t": values((60, 40), "bfloat16")})


# --- index_add --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32"])
@pytest.mark.parametrize("axis", [0, 1])
def test_index_add_accumulates_duplicates_in_index_order(dtype, axis):
    shape = (30, 20)
    src_shape = (200, 20) if axis == 0 else (30, 200)
    g = Graph("index_add")
    # integers: int8 data widened to int32, so every sum is small enough for the fp32 accumulation
    stored = "int8" if dtype == "int32" else dtype
    o = g.add_input("o", shape, stored)
    i = g.add_input("i", (200,), "int64")
    s = g.add_input("s", src_shape, stored)
    if dtype == "int32":
        o, s = (g.add1("convert", v, dtype="int32") for v in (o, s))
    alpha = 2.0 if dtype == "int32" else 0.37
    g.set_outputs([g.add1("index_add", o, i, s, axis=axis, alpha=alpha)], ["out"])
    program = check(g, {"o": values(shape, stored), "i": indices((200,), shape[axis]), "s": values(src_shape, stored)})
    (group,) = [g for g in program.metadata["groups"] if "fp32_copy" in g]
    assert group["fp32_copy"] == (dtype != "float32")  # bf16/int results accumulate in fp32, round once
    assert all(o.accumulate for o in indirect(program))


def test_embedding_backward():
    g = Graph("embedding_backward")
    grad = g.add_input("grad", (4, 64, 96), "float32")
    ids = g.add_input("ids", (4, 64), "int64")
    zeros = g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(0)), shape=(500, 96), dims=())
    flat = g.add1("reshape", grad, shape=(256, 96))
    g.set_outputs([g.add1("index_add", zeros, g.add1("reshape", ids, shape=(256,)), flat, axis=0)], ["weight_grad"])
    check(g, {"grad": values((4, 64, 96), "float32"), "ids": indices((4, 64), 20)})


# --- take_along_axis (torch.gather) -----------------------------------------------------------------------


@pytest.mark.parametrize("axis,ishape", [(1, (300, 1)), (1, (300, 7)), (0, (5, 40)), (0, (3, 20)), (-1, (129, 40))], ids=str)
def test_take_along_axis(axis, ishape):
    g = Graph("take")
    t = g.add_input("t", (300, 40), "float32")
    i = g.add_input("i", ishape, "int64")
    g.set_outputs([g.add1("take_along_axis", t, i, axis=axis)], ["out"])
    check(g, {"t": values((300, 40), "float32"), "i": indices(ishape, (300, 40)[axis])})


@pytest.mark.parametrize("dtype", ["bfloat16", "int64", "int32"])
def test_take_along_axis_3d_and_dtypes(dtype):
    g = Graph("take3")
    t = g.add_input("t", (6, 7, 8), dtype)
    i = g.add_input("i", (5, 9, 8), "int32")
    g.set_outputs([g.add1("take_along_axis", t, i, axis=1)], ["out"])
    check(g, {"t": values((6, 7, 8), dtype), "i": indices((5, 9, 8), 7, "int32")})


def test_cross_entropy_target_logits():
    """logits.gather(-1, target[:, None]): one element per row, rows of the tile combined exactly."""
    g = Graph("nll")
    logits = g.add_input("logits", (1000, 3000), "float32")
    target = g.add_input("target", (1000, 1), "int64")
    g.set_outputs([g.add1("take_along_axis", logits, target, axis=1)], ["picked"])
    program = check(g, {"logits": values((1000, 3000), "float32"), "target": indices((1000, 1), 3000)})
    (group,) = program.metadata["groups"]
    assert group["tiles"] == 8 and group["checked"]  # 128 rows per tile; raw indices bounds-checked


# --- scatter ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["set", "add"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "int8", "bool"])
@pytest.mark.parametrize("axis,ishape", [(0, (60, 8)), (1, (100, 3)), (1, (40, 8))], ids=str)
def test_scatter(mode, dtype, axis, ishape):
    if dtype == "bool" and mode == "add":
        pytest.skip("scatter_add of bools is not a torch op")
    shape = (100, 8)
    g = Graph("scatter")
    # add into int32: int8 data widened (sums small enough for the fp32 accumulation)
    stored = "int8" if dtype == "int32" and mode == "add" else dtype
    o = g.add_input("o", shape, stored)
    i = g.add_input("i", ishape, "int64")
    u = g.add_input("u", (100, 8), stored)  # larger than the index: only its leading block is used
    if stored != dtype:
        o, u = (g.add1("convert", v, dtype=dtype) for v in (o, u))
    g.set_outputs([g.add1("scatter", o, i, u, axis=axis, mode=mode)], ["out"])
    inputs = {"o": values(shape, stored), "i": indices(ishape, shape[axis]), "u": values((100, 8), stored)}
    if dtype == "int8" and mode == "add":  # int8 sums wrap in the graph, saturate on the engines
        with pytest.raises(CompileError) as info:
            compile_graph(g)
        assert info.value.rule == INEXACT_INTEGER
        return
    if dtype == "int32" and mode == "set":
        inputs["u"][0, 0] = 2**31 - 1  # set moves values of any range
    check(g, inputs)


def test_scatter_set_duplicates_last_write_wins():
    g = Graph("dups")
    o = g.add_input("o", (4, 300), "float32")
    i = g.add_input("i", (4, 300), "int64")
    u = g.add_input("u", (4, 300), "float32")
    g.set_outputs([g.add1("scatter", o, i, u, axis=1, mode="set")], ["out"])
    inputs = {"o": np.zeros((4, 300), np.float32), "i": np.zeros((4, 300), np.int64),
              "u": np.arange(1200, dtype=np.float32).reshape(4, 300)}
    program = check(g, inputs)
    out = run_exact(program, inputs)["out"]
    np.testing.assert_array_equal(out[:, 0], inputs["u"][:, -1])  # every row's last update


def test_scatter_add_many_duplicates_is_exact_in_fp32_order():
    g = Graph("hist")
    o = g.add_input("o", (16,), "float32")
    i = g.add_input("i", (5000,), "int32")
    u = g.add_input("u", (5000,), "float32")
    g.set_outputs([g.add1("scatter", o, i, u, axis=0, mode="add")], ["out"])
    check(g, {"o": values((16,), "float32"), "i": indices((5000,), 16, "int32"), "u": values((5000,), "float32")})


def test_scatter_of_a_constant_value_and_constant_operand():
    g = Graph("fill")
    zeros = g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(0)), shape=(50, 6), dims=())
    ones = g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(1)), shape=(20, 6), dims=())
    i = g.add_input("i", (20, 6), "int64")
    g.set_outputs([g.add1("scatter", zeros, i, ones, axis=0, mode="add")], ["counts"])
    check(g, {"i": indices((20, 6), 50)})


def test_large_scatter_issue_rate():
    """Consecutive indirect writes land in different dependency blocks: the loop runs at GpSimd's
    descriptor-generation rate instead of waiting for each write."""
    g = Graph("big")
    o = g.add_input("o", (512, 1024), "float32")
    i = g.add_input("i", (512, 1024), "int64")
    u = g.add_input("u", (512, 1024), "float32")
    g.set_outputs([g.add1("scatter", o, i, u, axis=1, mode="add")], ["out"])
    program = compile_graph(g)
    tiles = program.metadata["groups"][0]["tiles"]
    assert estimate(program).total_ns < tiles * 800.0


# --- out-of-range indices -----------------------------------------------------------------------------------


def _oob_cases():
    def gather():
        g = Graph("g")
        t = g.add_input("t", (50, 8), "float32")
        i = g.add_input("i", (10,), "int64")
        g.set_outputs([g.add1("gather", t, i, axis=0, location="model.py:12")], ["out"])
        return g, {"t": values((50, 8), "float32")}, ("i", (10,), 50)

    def take():
        g = Graph("t")
        t = g.add_input("t", (300, 40), "float32")
        i = g.add_input("i", (300, 1), "int64")
        g.set_outputs([g.add1("take_along_axis", t, i, axis=1, location="loss.py:3")], ["out"])
        return g, {"t": values((300, 40), "float32")}, ("i", (300, 1), 40)

    def scatter():
        g = Graph("s")
        o = g.add_input("o", (100, 8), "float32")
        i = g.add_input("i", (60, 8), "int64")
        u = g.add_input("u", (60, 8), "float32")
        g.set_outputs([g.add1("scatter", o, i, u, axis=0, mode="add", location="hist.py:9")], ["out"])
        return g, {"o": values((100, 8), "float32"), "u": values((60, 8), "float32")}, ("i", (60, 8), 100)

    def index_add():
        g = Graph("a")
        o = g.add_input("o", (30, 20), "bfloat16")
        i = g.add_input("i", (50,), "int64")
        s = g.add_input("s", (50, 20), "bfloat16")
        g.set_outputs([g.add1("index_add", o, i, s, axis=0, location="grad.py:4")], ["out"])
        return g, {"o": values((30, 20), "bfloat16"), "s": values((50, 20), "bfloat16")}, ("i", (50,), 30)

    return {"gather": gather, "take_along_axis": take, "scatter": scatter, "index_add": index_add}


@pytest.mark.parametrize("op", list(_oob_cases()))
@pytest.mark.parametrize("bad", ["past_end", "negative", "huge"])
def test_out_of_range_indices_raise_on_both_paths(op, bad):
    graph, inputs, (name, shape, size) = _oob_cases()[op]()
    ids = indices(shape, size)
    value = {"past_end": size, "negative": -1, "huge": 1 << 40}[bad]
    ids.reshape(-1)[len(ids.reshape(-1)) // 2] = value
    inputs[name] = ids
    location = graph.nodes[-1].location
    with pytest.raises(ValidationError) as fast:
        run_fast(graph, inputs)
    assert fast.value.rule == "graph.index_out_of_bounds" and fast.value.location == location
    with pytest.raises(ValidationError) as exact:  # the indirect DMA's oob_mode="error" at run time
        run_exact(compile_graph(graph), inputs)
    err = exact.value
    assert err.rule == "dma.index_out_of_bounds" and err.location == location
    shown = value if bad != "huge" else 2**31 - 1  # int64 indices are loaded as int32 (saturated)
    assert f"index {shown} " in str(err) and f"the {size} rows" in str(err)
    assert f"index {value} " in str(fast.value) and f"size {size}" in str(fast.value)


def test_in_range_edge_indices():
    """0 and size-1 are fine on both paths (the bounds check is exact at the ends)."""
    graph, inputs, (name, shape, size) = _oob_cases()["take_along_axis"]()
    ids = indices(shape, size)
    ids[0, 0], ids[-1, 0] = 0, size - 1
    inputs[name] = ids
    check(graph, inputs)
