"""Row-wise fusion: reductions over the trailing dims, their row nodes and the consumers that read
their results back along the rows, in one pass over HBM (softmax, log_softmax, LayerNorm)."""

import numpy as np
import pytest
from cc_helpers import Graph, check, dma_counts, random_inputs
from neuron_sim import get_architecture
from neuron_sim.timing import estimate
from neuronxcc.compiler import partition
from neuronxcc.compiler.fusion import live_nodes
from neuronxcc.compiler.layout import Form, plan_tiles


def _back(g, r, shape):
    """``r`` (one number per row) broadcast back over the rows of ``shape``."""
    keep = tuple(shape[:-1]) + (1,)
    return g.add1("broadcast_in_dim", g.add1("reshape", r, shape=keep), shape=tuple(shape), dims=tuple(range(len(shape))))


def softmax(shape, dtype="float32", log=False):
    g = Graph("softmax")
    x = g.add_input("x", shape, dtype)
    d = len(shape) - 1
    m = g.add1("reduce", x, kind="max", dims=(d,))
    e = g.add1("exp", g.add1("subtract", x, _back(g, m, shape)))
    s = g.add1("reduce", e, kind="sum", dims=(d,))
    if log:
        y = g.add1("subtract", g.add1("subtract", x, _back(g, m, shape)), _back(g, g.add1("log", s), shape))
    else:
        y = g.add1("divide", e, _back(g, s, shape))
    g.set_outputs([y], ["out"])
    return g


def layer_norm(shape, dtype="float32", stats=False):
    """LayerNorm as torch-mlir imports it: mean, var = mean((x - mean)^2), rsqrt(var + eps)."""
    g = Graph("layer_norm")
    x = g.add_input("x", shape, dtype)
    w = g.add_input("w", shape[-1:], dtype)
    b = g.add_input("b", shape[-1:], dtype)
    d, n = len(shape) - 1, shape[-1]
    keep = tuple(shape[:-1]) + (1,)

    def const(v):
        return g.add1("broadcast_in_dim", g.add1("constant", value=np.asarray(v, np.float32), dtype=dtype), shape=keep, dims=())

    def mean(v):
        return g.add1("divide", g.add1("reshape", g.add1("reduce", v, kind="sum", dims=(d,)), shape=keep), const(n))

    mu = mean(x)
    c = g.add1("subtract", x, g.add1("broadcast_in_dim", mu, shape=shape, dims=tuple(range(len(shape)))))
    var = mean(g.add1("multiply", c, c))
    rstd = g.add1("rsqrt", g.add1("add", var, const(1e-5)))
    y = g.add1("multiply", c, g.add1("broadcast_in_dim", rstd, shape=shape, dims=tuple(range(len(shape)))))
    y = g.add1("multiply", y, g.add1("broadcast_in_dim", w, shape=shape, dims=(d,)))
    y = g.add1("add", y, g.add1("broadcast_in_dim", b, shape=shape, dims=(d,)))
    g.set_outputs([y, mu, rstd] if stats else [y], ["out", "mean", "rstd"] if stats else ["out"])
    return g


def _hbm_bytes(program) -> tuple[int, int]:
    """(bytes read from HBM, bytes written to HBM) by the program, from the timing model."""
    summary = estimate(program, get_architecture(program.target)).summary
    return summary["hbm_read_bytes"], summary["hbm_write_bytes"]


def _rowwise(program):
    return [grp for grp in program.metadata["groups"] if grp.get("rowwise")]


@pytest.mark.parametrize("shape", [(8, 4, 128, 128), (1000, 200), (3, 5), (130, 256)], ids=str)
@pytest.mark.parametrize("log", [False, True], ids=["softmax", "log_softmax"])
def test_softmax_is_one_pass(shape, log):
    program = check(softmax(shape, log=log))
    groups = program.metadata["groups"]
    assert len(groups) == 1 and groups[0]["rowwise"]
    nbytes = 4 * int(np.prod(shape))
    assert _hbm_bytes(program) == (nbytes, nbytes)  # x read once, the result written once
    assert dma_counts(program)[0] == groups[0]["tiles"]
    assert not [t for t in program.tensors if t.kind == "internal"]  # nothing goes through HBM


@pytest.mark.parametrize("shape,dtype", [((8, 128, 256), "float32"), ((300, 1024), "float32"), ((5, 130, 96), "bfloat16"),
                                         ((2, 3, 64), "float16")], ids=str)
def test_layer_norm_is_one_pass_with_row_stats_stored(shape, dtype):
    g = layer_norm(shape, dtype, stats=True)
    program = check(g)
    groups = program.metadata["groups"]
    assert len(groups) == 1 and groups[0]["rowwise"]
    size = np.dtype(np.float32).itemsize if dtype == "float32" else 2
    rows = int(np.prod(shape[:-1]))
    read, written = _hbm_bytes(program)
    # x once; w and b (the same for every row) once per partition of each tile
    assert read <= size * int(np.prod(shape)) + 2 * groups[0]["tiles"] * 128 * size * shape[-1]
    assert written == size * (int(np.prod(shape)) + 2 * rows)  # out, mean, rstd


def test_row_inputs_and_several_rows_per_partition():
    # A backward-like graph: per-row inputs (rstd, and one number per batch broadcast over its
    # rows) scaled per row, read back over short rows (several rows per partition in a tile).
    shape = (4, 96, 32)
    g = Graph("rows_in")
    x = g.add_input("x", shape, "float32")
    rstd = g.add_input("rstd", (4, 96, 1), "float32")
    k = g.add_input("k", (4, 1, 1), "float32")
    s = g.add1("reduce", x, kind="sum", dims=(2,))
    r = g.add1("multiply", g.add1("reshape", s, shape=(4, 96, 1)), rstd)
    r = g.add1("add", r, g.add1("broadcast_in_dim", k, shape=(4, 96, 1), dims=(0, 1, 2)))
    y = g.add1("multiply", x, g.add1("broadcast_in_dim", r, shape=shape, dims=(0, 1, 2)))
    g.set_outputs([y, r], ["out", "r"])
    program = check(g, random_inputs(g))
    assert len(program.metadata["groups"]) == 1 and program.metadata["groups"][0]["rowwise"]


def test_same_results_as_the_multi_pass_lowering(monkeypatch):
    import neuronxcc.compiler.fusion as fusion
    from neuronxcc.compiler.testing import run_exact

    g = layer_norm((64, 384), stats=True)
    inputs = random_inputs(g)
    one = run_exact(check(g, inputs), inputs)
    monkeypatch.setattr(fusion, "_row_capable", lambda *a: False)
    multi = check(g, inputs)
    assert not _rowwise(multi) and len(multi.metadata["groups"]) > 1
    for name, value in run_exact(multi, inputs).items():
        np.testing.assert_array_equal(one[name], value)


def test_rows_that_do_not_fit_sbuf_keep_the_multi_pass_lowering():
    g = softmax((2, 65536))
    program = check(g, rtol=1e-5, atol=1e-7)
    assert not _rowwise(program) and len(program.metadata["groups"]) > 1


def test_reductions_over_leading_dims_are_not_rowwise():
    g = Graph("colnorm")
    x = g.add_input("x", (64, 48), "float32")
    m = g.add1("reduce", x, kind="max", dims=(0,), keepdims=True)
    g.set_outputs([g.add1("subtract", x, g.add1("broadcast_in_dim", m, shape=(64, 48), dims=(0, 1)))], ["out"])
    groups = partition(live_nodes(g))
    assert len(groups) == 2 and not any(grp.rowwise for grp in groups)
    check(g)


def test_a_transposed_row_value_is_not_a_row_read():
    # r[i] read as r[j] along a square tile: a view op that is not "the same row" keeps two groups.
    g = Graph("transposed")
    x = g.add_input("x", (64, 64), "float32")
    s = g.add1("reduce", x, kind="sum", dims=(1,), keepdims=True)
    t = g.add1("broadcast_in_dim", g.add1("reshape", s, shape=(64,)), shape=(64, 64), dims=(1,))
    g.set_outputs([g.add1("divide", x, t)], ["out"])
    groups = partition(live_nodes(g))
    assert len(groups) == 2 and not any(grp.rowwise for grp in groups)
    check(g, rtol=1e-6)


def test_whole_reduced_plans_keep_rows_in_one_tile():
    shape = (300, 1024)
    forms = [Form((1024, 1), 0, 4), Form((1, 0), 0, 4)]
    plan = plan_tiles(shape, forms, (1,), limit=1024, whole_reduced=True)
    assert all(b.first and b.last and not b.part_reduced for b in plan.boxes)
    assert plan.max_free == 1024 and len(plan.boxes) == 3


def test_weights_broadcast_to_every_row_are_loaded_once():
    # (130, 256): two tiles, the last one of two rows (the held w and b are read on 2 partitions).
    g = layer_norm((130, 256))
    program = check(g)
    assert program.metadata["groups"][0]["tiles"] == 2
    read, written = _hbm_bytes(program)
    assert read == 4 * 130 * 256 + 2 * 4 * 128 * 256  # x once; w and b once, on 128 partitions
    assert written == 4 * 130 * 256


def test_many_small_row_tiles_in_flight_beat_three(monkeypatch):
    """Softmax over 128-long rows: one row per partition, a dozen small dependent instructions per
    tile; keeping more tiles in flight (``rowwise.BUFFERS``) hides their latency."""
    from neuronxcc.compiler import compile_graph
    from neuronxcc.compiler.lower import rowwise

    g = softmax((32, 128, 128))
    arch = get_architecture("trn2")
    deep = estimate(check(g, rtol=1e-6, atol=1e-7), arch).total_ns
    monkeypatch.setattr(rowwise, "BUFFERS", 3)
    shallow = estimate(compile_graph(g), arch).total_ns
    assert deep < shallow


def test_converted_mask_joins_the_softmax_that_reads_it():
    """softmax(x) * float(mask): the convert's group merges into the row-wise group that reads it
    (the bool mask is loaded there; its float copy never goes through HBM)."""
    from neuronxcc.compiler import compile_graph

    shape = (4, 64, 128)
    g = Graph("masked_softmax")
    m = g.add_input("m", shape, "bool")
    mf = g.add1("convert", m, dtype="float32")  # first in graph order: a group of its own at first
    x = g.add_input("x", shape, "float32")
    mx = g.add1("reduce", x, kind="max", dims=(2,))
    e = g.add1("exp", g.add1("subtract", x, _back(g, mx, shape)))
    s = g.add1("reduce", e, kind="sum", dims=(2,))
    y = g.add1("multiply", g.add1("divide", e, _back(g, s, shape)), mf)
    g.set_outputs([y], ["out"])
    program = check(g, rtol=1e-6, atol=1e-7)
    assert len(compile_graph(g).metadata["groups"]) == 1
    assert not [t for t in program.tensors if t.kind == "internal"]
