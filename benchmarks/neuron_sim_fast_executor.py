"""The fast executor's evaluation plans vs node-by-node interpretation of the same graphs, in the
same run (GPT-sized graphs: 8 x 128 x 1024 fp32 elementwise chains, erf GELU, softmax, a linear
layer with bias). Also checks that both give the same bits.

    python benchmarks/neuron_sim_fast_executor.py
"""

from __future__ import annotations

import numpy as np
from _harness import best_of, report
from neuron_sim.executor.fast import FastExecutor
from neuron_sim.graph import Graph, evaluate_reference

SHAPE = (8, 128, 1024)


def _poly_gelu() -> Graph:
    """The polynomial erf GELU an ATen decomposition makes: ~30 ops with full-size splat constants."""
    g = Graph("poly_gelu")
    x = g.add_input("x", SHAPE, "float32")

    def c(v):
        return g.add1("constant", value=np.full(SHAPE, v, np.float32), dtype="float32")

    z = g.add1("minimum", g.add1("maximum", g.add1("multiply", x, c(0.70710677)), c(-4.0)), c(4.0))
    z2 = g.add1("multiply", z, z)
    p = g.add1("multiply", c(-2.7e-10), z2)
    for k in (2.8e-08, -2.1e-06, -5.7e-05, -7.3e-04, -2.9e-03, -1.6e-02):
        p = g.add1("multiply", g.add1("add", p, c(k)), z2)
    q = g.add1("multiply", c(-1.5e-05), z2)
    for k in (-2.1e-04, -1.7e-03, -7.4e-03):
        q = g.add1("multiply", g.add1("add", q, c(k)), z2)
    q = g.add1("add", q, c(-1.4e-02))
    e = g.add1("minimum", g.add1("maximum", g.add1("divide", g.add1("multiply", z, p), q), c(-1.0)), c(1.0))
    g.set_outputs([g.add1("multiply", g.add1("add", e, c(1.0)), g.add1("multiply", x, c(0.5)))], ["y"])
    return g


def _erf_gelu() -> Graph:
    g = Graph("erf_gelu")
    x = g.add_input("x", SHAPE, "float32")
    g.set_outputs([g.add1("gelu", x)], ["y"])
    return g


def _softmax() -> Graph:
    g = Graph("softmax")
    x = g.add_input("x", SHAPE, "float32")
    m = g.add1("broadcast_in_dim", g.add1("reduce", x, kind="max", dims=(2,)), shape=SHAPE, dims=(0, 1))
    e = g.add1("exp", g.add1("subtract", x, m))
    s = g.add1("broadcast_in_dim", g.add1("reduce", e, kind="sum", dims=(2,)), shape=SHAPE, dims=(0, 1))
    g.set_outputs([g.add1("divide", e, s)], ["y"])
    return g


def _linear() -> Graph:
    g = Graph("linear")
    x = g.add_input("x", (1024, 256), "float32")
    w = g.add_input("w", (1024, 256), "float32")
    b = g.add_input("b", (1024,), "float32")
    mm = g.add1("dot_general", x, w, lhs_contract=(1,), rhs_contract=(1,))
    g.set_outputs([g.add1("add", mm, g.add1("broadcast_in_dim", b, shape=(1024, 1024), dims=(1,)))], ["y"])
    return g


class _Program:
    def __init__(self, graph):
        self.graph, self.name = graph, graph.name


def _buffers(g: Graph, rng) -> dict:
    bufs = {v.name: rng.standard_normal(v.type.shape).astype(np.float32).reshape(-1).view(np.uint8) for v in g.inputs}
    bufs.update({v.name: np.zeros(v.type.num_elements * 4, np.uint8) for v in g.outputs})
    return bufs


def main() -> None:
    rng = np.random.default_rng(0)
    executor = FastExecutor()
    total_ref = total_plan = 0.0
    print("neuron-sim fast executor: evaluation plans vs node-by-node interpretation (same graphs, same run)")
    for g in (_poly_gelu(), _erf_gelu(), _softmax(), _linear()):
        program = _Program(g)
        ref = _buffers(g, rng)
        got = {k: v.copy() for k, v in ref.items()}
        evaluate_reference(g, ref)
        executor.run(program, got)
        assert all(np.array_equal(ref[v.name], got[v.name]) for v in g.outputs), f"{g.name}: plans changed the bits"
        t_ref = best_of(lambda g=g, ref=ref: evaluate_reference(g, ref), repeats=5)
        t_plan = best_of(lambda program=program, got=got: executor.run(program, got), repeats=5)
        total_ref += t_ref
        total_plan += t_plan
        report(f"{g.name} ({len(g.nodes)} nodes)", f"{t_plan * 1e3:.2f} ms", t_plan / t_ref, "node by node", "< 1 (same bits)")
    report("all four", f"{total_plan * 1e3:.2f} ms", total_plan / total_ref, "node by node", "< 1 (same bits)")


if __name__ == "__main__":
    main()
