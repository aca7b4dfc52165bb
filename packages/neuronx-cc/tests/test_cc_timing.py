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


@pytest.mark.parametrize("graph", [
    chain((1000,), OPS), chain((512, 2048), OPS),
    chain((3, 5, 7), ["floor", "expm1", "atan2" if False else "sin"]),
], ids=["small", "large", "composite"])
def test_estimate_on_compiled_programs(graph):
    result = estimate(compile_graph(graph))
    assert result.total_ns > 0
    assert result.summary


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
    busy = {}
    for rec in result.instructions:
        busy[rec.timeline_track] = busy.get(rec.timeline_track, 0.0) + rec.duration_ns
    serial = sum(busy.values())
    assert result.total_ns < 0.7 * serial


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
    assert result.total_ns > 0 and np.isfinite(result.total_ns)
