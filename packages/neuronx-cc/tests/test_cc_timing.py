"""The timing model runs on every compiled program; fusion and tiling make them faster."""

import numpy as np
import pytest
from cc_helpers import Graph
from neuron_sim import estimate
from neuronxcc.compiler import compile_graph


def chain(shape, ops):
    g = Graph("chain")
    x = g.add_input("x", shape, "float32")
    y = g.add_input("y", shape, "float32")
    v = x
    for op in ops:
        v = g.add1(op, v, y) if op in ("add", "multiply", "subtract", "maximum") else g.add1(op, v)
    g.set_outputs([v], ["out"])
    return g


OPS = ["add", "exp", "multiply", "tanh", "subtract"]


def engine_busy_ns(result) -> dict[str, float]:
    busy: dict[str, float] = {}
    for rec in result.instructions:
        busy[rec.timeline_track] = busy.get(rec.timeline_track, 0.0) + rec.duration_ns
    return busy


@pytest.mark.parametrize("graph, inputs", [
    (chain((1000,), OPS), 2), (chain((512, 2048), OPS), 2), (chain((3, 5, 7), ["floor", "expm1", "sin"]), 1),
], ids=["small", "large", "composite"])
def test_estimate_accounts_for_the_program_it_times(graph, inputs):
    """The program cannot end before its busiest engine (or DMA queue) is done; the summary's
    engine times are the instructions' own; HBM traffic is each input read once and the output
    written once (the chain's intermediates stay in SBUF)."""
    result = estimate(compile_graph(graph))
    busy = engine_busy_ns(result)
    assert {"Vector", "Scalar"} <= set(busy) and any(track.startswith("q") for track in busy)
    assert max(busy.values()) <= result.total_ns == result.summary["total_time_ns"]
    assert result.summary["vector_active_time_ns"] == pytest.approx(busy["Vector"])
    assert result.summary["scalar_active_time_ns"] == pytest.approx(busy["Scalar"])
    nbytes = 4 * int(np.prod(graph.inputs[0].type.shape))
    assert result.summary["hbm_read_bytes"] == inputs * nbytes
    assert result.summary["hbm_write_bytes"] == nbytes


def test_fused_chain_is_faster_than_its_ops_compiled_separately():
    shape = (512, 2048)
    fused = estimate(compile_graph(chain(shape, OPS))).total_ns
    separate = 0.0
    for op in OPS:
        separate += estimate(compile_graph(chain(shape, [op]))).total_ns
    assert fused < separate / 2


def test_loads_overlap_compute():
    """With double-buffered tiles, a multi-tile loop takes well under the serial sum of its parts."""
    result = estimate(compile_graph(chain((1024, 4096), OPS)))
    assert result.total_ns < 0.7 * sum(engine_busy_ns(result).values())


def test_fp32_elementwise_throughput_is_dma_bound():
    """A big fp32 add streams at a good fraction of the DMA bandwidth (not descriptor-bound)."""
    g = chain((4096, 4096), ["add"])
    result = estimate(compile_graph(g))
    moved = 3 * 4096 * 4096 * 4
    peak = 16 * 23.0  # bytes/ns: 16 DMA engines
    assert moved / result.total_ns > 0.5 * peak


def test_every_op_family_estimates():
    g = Graph("all")
    x = g.add_input("x", (64, 300), "float32")
    s = g.add1("reduce", x, kind="sum", dims=(0,))
    a = g.add1("argmax", x, dim=1)
    c = g.add1("cumsum", x, dim=1)
    t = g.add1("transpose", x, perm=(1, 0))
    p = g.add1("pad", x, low=(1, 1), high=(0, 0), value=0.0)
    cat = g.add("concatenate", [x, x], {"dim": 0})[0]
    g.set_outputs([s, a, c, t, p, cat], ["s", "a", "c", "t", "p", "cat"])
    result = estimate(compile_graph(g))
    assert np.isfinite(result.total_ns)
    # Every output is stored to HBM: at least the bytes of the six results at the DMA engines' peak.
    out_bytes = 4 * (300 + 64 + 64 * 300 + 300 * 64 + 65 * 301 + 128 * 300)
    assert result.total_ns >= out_bytes / (16 * 23.0)
    assert max(engine_busy_ns(result).values()) <= result.total_ns
