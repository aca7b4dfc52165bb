"""Split elementwise runs (neuron_sim.graph.split) give the bits of node-by-node evaluation.

Each graph is large enough to be split; every test runs it while a core is free (its halves at
once) and while none is (its steps one by one), against ``evaluate_reference``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from neuron_sim.errors import ExecutionError
from neuron_sim.executor.fast import evaluate, explain, spare_core
from neuron_sim.executor.fast import ops as fast_ops
from neuron_sim.executor.fast.plan import BufferPool
from neuron_sim.executor.waiting import waiting_for_device
from neuron_sim.graph import Graph, evaluate_reference

SHAPE = (8, 64, 1024)  # 512K elements
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 3e38, -3e38, 0.875, -0.875, 4.0], np.float32)


@pytest.fixture(params=["halves at once", "one by one"])
def core_free(request, monkeypatch):
    monkeypatch.setattr(spare_core, "CAN_OVERLAP", True)
    if request.param == "halves at once":
        with waiting_for_device():
            yield True
    else:
        yield False


def _split_runs(g: Graph) -> int:
    return sum(step.startswith("split[") for step in explain(g).steps)


def _values(shape, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(int(np.prod(shape))) * 2).astype(np.float32)
    a[rng.integers(0, a.size, a.size // 8)] = SPECIAL[rng.integers(0, SPECIAL.size, a.size // 8)]
    return a.reshape(shape)


def _bytes(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).reshape(-1).view(np.uint8)


def _run_both(g: Graph, inputs: dict, outputs: dict, alias: dict | None = None):
    """(reference outputs, plan outputs); ``alias`` binds an output to an input's buffer."""
    results = []
    for run in (evaluate_reference, lambda graph, bufs: evaluate(graph, bufs, BufferPool())):
        ins = {k: v.copy() for k, v in inputs.items()}
        outs = {k: v.copy() for k, v in outputs.items()}
        bufs = {k: _bytes(v) for k, v in ins.items()} | {k: _bytes(v) for k, v in outs.items()}
        for out_name, in_name in (alias or {}).items():
            bufs[out_name] = bufs[in_name]
            outs[out_name] = ins[in_name]
        run(g, bufs)
        results.append(outs)
    return results


def _assert_same(ref: dict, got: dict):
    for name in ref:
        assert np.array_equal(ref[name].view(np.uint8), got[name].view(np.uint8)), name


def _scalar(g: Graph, value: float):
    """A float32 constant broadcast to SHAPE, as torch-mlir writes a tensor-scalar operand."""
    return g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(value), dtype="float32"), shape=SHAPE, dims=())


def _gelu_graph(g: Graph, x):
    """GELU as torch-mlir decomposes it: x * 0.5 * (1 + erf(x * rsqrt(2)))."""
    half = g.add1("multiply", x, _scalar(g, 0.5))
    scaled = g.add1("multiply", x, g.add1("rsqrt", _scalar(g, 2.0)))
    return g.add1("multiply", half, g.add1("add", g.add1("erf", scaled), _scalar(g, 1.0))), scaled


def test_gelu_is_one_split_run_with_the_reference_bits(core_free):
    g = Graph("gelu")
    x = g.add_input("x", SHAPE, "float32")
    y, _ = _gelu_graph(g, x)
    g.set_outputs([y], ["y"])
    assert _split_runs(g) == 1 and len(explain(g).steps) == 1
    _assert_same(*_run_both(g, {"x": _values(SHAPE, 1)}, {"y": np.zeros(SHAPE, np.float32)}))


def test_values_read_after_the_run_and_mixed_dtypes(core_free):
    # ``scaled`` is read by a reduce after the run, a bool mask and a bf16 cast leave it as outputs,
    # and row statistics broadcast into the run from before it.
    g = Graph("mixed")
    x = g.add_input("x", SHAPE, "float32")
    rows = g.add1("broadcast_in_dim", g.add1("reduce", x, dims=(2,), kind="max"), shape=SHAPE, dims=(0, 1))
    y, scaled = _gelu_graph(g, g.add1("subtract", x, rows))
    zero = _scalar(g, 0.0)
    positive = g.add1("compare", y, zero, direction="GT")
    picked = g.add1("select", positive, y, scaled)
    low = g.add1("convert", picked, dtype="bfloat16")
    total = g.add1("reduce", scaled, dims=(1, 2), kind="sum")
    g.set_outputs([picked, positive, low, total], ["picked", "positive", "low", "total"])
    assert _split_runs(g) >= 1
    outputs = {"picked": np.zeros(SHAPE, np.float32), "positive": np.zeros(SHAPE, np.bool_),
               "low": np.zeros(SHAPE, ml_dtypes.bfloat16), "total": np.zeros(SHAPE[0], np.float32)}
    _assert_same(*_run_both(g, {"x": _values(SHAPE, 2)}, outputs))


def test_an_in_place_update_reads_its_operand_before_it_is_overwritten(core_free):
    # Adam's form on a large parameter: the output buffer is the parameter's own.
    g = Graph("update")
    p = g.add_input("p", SHAPE, "float32")
    d = g.add_input("d", SHAPE, "float32")
    step = g.add1("multiply", g.add1("erf", d), d)
    new = g.add1("subtract", p, g.add1("multiply", step, p))
    g.set_outputs([new, step], ["p_out", "step"])
    assert _split_runs(g) == 1 and len(explain(g).steps) == 1
    inputs = {"p": _values(SHAPE, 3), "d": _values(SHAPE, 4)}
    ref, got = _run_both(g, inputs, {"p_out": np.zeros(SHAPE, np.float32), "step": np.zeros(SHAPE, np.float32)},
                         alias={"p_out": "p"})
    _assert_same(ref, got)


def test_small_runs_are_not_split():
    g = Graph("small")
    x = g.add_input("x", (64, 1024), "float32")
    g.set_outputs([g.add1("multiply", g.add1("add", x, x), x)], ["y"])
    assert _split_runs(g) == 0


def test_a_failing_op_inside_a_split_run_is_named(core_free, monkeypatch):
    g = Graph("fails")
    x = g.add_input("x", SHAPE, "float32")
    g.set_outputs([g.add1("tanh", g.add1("erf", g.add1("multiply", x, x)))], ["y"])
    assert _split_runs(g) == 1 and len(explain(g).steps) == 1

    def broken(arrays, attrs, out_types):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(fast_ops.FAST, "erf", broken)
    g2 = Graph.from_dict(g.to_dict())  # a fresh plan takes the broken form
    bufs = {"x": _bytes(_values(SHAPE, 5)), "y": _bytes(np.zeros(SHAPE, np.float32))}
    with pytest.raises(ExecutionError, match="graph op erf at .* failed: ZeroDivisionError: boom"):
        evaluate(g2, bufs, BufferPool())
