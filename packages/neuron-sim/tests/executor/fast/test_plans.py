"""Evaluation plans (neuron_sim.executor.fast.plan) give the bits of node-by-node evaluation.

Plans reuse temporaries, write results in place and broadcast uniform constants; each test builds
a graph where one of those could go wrong and compares against ``evaluate_reference``, and checks
through ``explain`` that the plan did what the test is about.
"""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim.executor.fast import FastExecutor, evaluate, explain
from neuron_sim.executor.fast.plan import BufferPool, overlapping
from neuron_sim.graph import Graph, evaluate_reference

SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-40, -1e-40, 3e38, -3e38, 0.5], np.float32)


def _values(shape, seed):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(int(np.prod(shape))) * 4).astype(np.float32)
    a[rng.integers(0, a.size, a.size // 4)] = SPECIAL[rng.integers(0, SPECIAL.size, a.size // 4)]
    return a.reshape(shape)


def _flat(arrays: dict) -> dict:
    return {k: np.ascontiguousarray(v).reshape(-1).view(np.uint8) for k, v in arrays.items()}


def _outputs(g: Graph, dtype=np.float32):
    return {v.name: np.full(v.type.shape, 7, dtype) for v in g.outputs}


def _compare(g: Graph, inputs: dict, outputs=None, pool=None):
    outputs = outputs or _outputs(g)
    ref_out = {k: v.copy() for k, v in outputs.items()}
    evaluate_reference(g, _flat({**inputs, **ref_out}) | {k: ref_out[k].reshape(-1).view(np.uint8) for k in ref_out})
    got_out = {k: v.copy() for k, v in outputs.items()}
    evaluate(g, _flat(inputs) | {k: got_out[k].reshape(-1).view(np.uint8) for k in got_out}, pool)
    for name in ref_out:
        assert np.array_equal(ref_out[name].view(np.uint32), got_out[name].view(np.uint32)), name
    return got_out


def _scalar(g: Graph, value: float, shape):
    """A float32 constant broadcast to ``shape``, as torch-mlir writes a tensor-scalar operand."""
    return g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(value), dtype="float32"), shape=shape, dims=())


def _splat_chain(value: float) -> Graph:
    g = Graph("chain")
    x = g.add_input("x", (4, 33), "float32")
    c = g.add1("constant", value=np.full((4, 33), value, np.float32), dtype="float32")
    y = g.add1("multiply", x, c)
    y = g.add1("add", y, c)
    y = g.add1("maximum", c, y)
    y = g.add1("exp", y)
    y = g.add1("divide", y, c)
    g.set_outputs([y], ["y"])
    return g


@pytest.mark.parametrize("value", [0.0, -0.0, 1.5, np.inf, np.nan, -np.nan, 1e-40])
def test_uniform_constants_give_the_same_bits(value):
    g = _splat_chain(value)
    _compare(g, {"x": _values((4, 33), 1)})
    assert explain(g).scalar_constants == (0 if np.isnan(value) else 1)  # NaN constants stay materialized


def test_non_uniform_and_int_constants_are_not_broadcast():
    g = Graph("consts")
    x = g.add_input("x", (8,), "float32")
    c = g.add1("constant", value=np.arange(8, dtype=np.float32), dtype="float32")
    z = g.add1("constant", value=np.array([0.0] * 7 + [-0.0], np.float32), dtype="float32")  # equal, not bitwise
    g.set_outputs([g.add1("add", g.add1("multiply", x, c), z)], ["y"])
    _compare(g, {"x": _values((8,), 2)})
    assert explain(g).scalar_constants == 0


def test_long_elementwise_chain_reuses_temporaries_across_launches():
    g = Graph("chain")
    x = g.add_input("x", (64, 128), "float32")
    y = x
    for i in range(12):
        y = g.add1(["add", "multiply", "subtract", "tanh"][i % 4], y, *([x] if i % 4 != 3 else []))
    g.set_outputs([y], ["y"])
    pool = BufferPool()
    for seed in range(3):
        _compare(g, {"x": _values((64, 128), seed)}, pool=pool)
    assert 0 < pool.pooled_bytes <= 3 * 64 * 128 * 4  # a couple of buffers, not one per node


def test_values_read_through_views_are_not_overwritten():
    # t is read through a reshape and a transpose after its producer's other readers are done:
    # its buffer must stay lent while those views live.
    g = Graph("views")
    x = g.add_input("x", (16, 8), "float32")
    t = g.add1("multiply", x, x)
    r = g.add1("reshape", t, shape=(8, 16))
    u = g.add1("add", x, x)
    v = g.add1("add", u, u)
    w = g.add1("transpose", r, perm=(1, 0))
    s = g.add1("add", w, g.add1("reshape", v, shape=(16, 8)))
    g.set_outputs([s, t], ["s", "t"])
    _compare(g, {"x": _values((16, 8), 3)}, pool=BufferPool())


def test_output_that_is_also_an_input_buffer_is_written_at_the_end():
    # An in-place op: the output buffer is the input buffer, read again after the output's node.
    g = Graph("inplace")
    p = g.add_input("p", (32,), "float32")
    d = g.add_input("d", (32,), "float32")
    new = g.add1("subtract", p, d)
    norm = g.add1("multiply", p, p)  # reads p after new is computed
    g.set_outputs([new, g.add1("add", norm, new)], ["p_out", "n"])
    params, grads = _values((32,), 4), _values((32,), 5)
    ref = {"p": params.copy(), "d": grads, "n": np.zeros(32, np.float32)}
    bufs = _flat(ref)
    bufs["p_out"] = bufs["p"]  # the same memory, as torch-neuronx binds an in-place op's target
    evaluate_reference(g, bufs)
    got = {"p": params.copy(), "d": grads, "n": np.zeros(32, np.float32)}
    gbufs = _flat(got)
    gbufs["p_out"] = gbufs["p"]
    evaluate(g, gbufs, BufferPool())
    assert np.array_equal(ref["p"].view(np.uint32), got["p"].view(np.uint32))
    assert np.array_equal(ref["n"].view(np.uint32), got["n"].view(np.uint32))


def test_output_read_by_later_nodes_and_matmul_into_outputs():
    g = Graph("mm")
    a = g.add_input("a", (2, 16, 24), "float32")
    b = g.add_input("b", (2, 32, 24), "float32")
    mm = g.add1("dot_general", a, b, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(2,))
    g.set_outputs([mm, g.add1("exp", mm)], ["mm", "e"])
    _compare(g, {"a": _values((2, 16, 24), 6), "b": _values((2, 32, 24), 7)}, pool=BufferPool())


def test_non_fp32_operands_use_the_ops_definition():
    g = Graph("mixed")
    x = g.add_input("x", (40,), "bfloat16")
    i = g.add_input("i", (40,), "int32")
    y = g.add1("add", x, x)  # bf16 result: rounded on write
    z = g.add1("multiply", g.add1("convert", i, dtype="float32"), g.add1("convert", x, dtype="float32"))
    w = g.add1("add", i, i)  # int32 result
    g.set_outputs([y, z, w], ["y", "z", "w"])
    import ml_dtypes

    inputs = {"x": _values((40,), 8).astype(ml_dtypes.bfloat16), "i": np.arange(40, dtype=np.int32) * 1000003}
    outputs = {"y": np.zeros(40, ml_dtypes.bfloat16), "z": np.zeros(40, np.float32), "w": np.zeros(40, np.int32)}
    ref = {k: v.copy() for k, v in outputs.items()}
    evaluate_reference(g, _flat(inputs) | {k: v.reshape(-1).view(np.uint8) for k, v in ref.items()})
    got = {k: v.copy() for k, v in outputs.items()}
    evaluate(g, _flat(inputs) | {k: v.reshape(-1).view(np.uint8) for k, v in got.items()}, BufferPool())
    for k in ref:
        assert np.array_equal(ref[k].view(np.uint8), got[k].view(np.uint8)), k


def test_plan_follows_a_graph_that_grew():
    g = Graph("grow")
    x = g.add_input("x", (8,), "float32")
    g.set_outputs([g.add1("add", x, x)], ["y"])
    assert explain(g).steps == ("add",)
    g.set_outputs([g.add1("multiply", x, x)], ["y"])
    assert explain(g).steps == ("add", "multiply")
    _compare(g, {"x": _values((8,), 9)})


def test_errors_name_the_op_as_before():
    g = Graph("bad")
    x = g.add_input("x", (4, 3), "float32")
    idx = g.add_input("i", (2,), "int32")
    g.set_outputs([g.add1("gather", x, idx, axis=0)], ["y"])
    bufs = _flat({"x": np.zeros((4, 3), np.float32), "i": np.array([0, 9], np.int32), "y": np.zeros((2, 3), np.float32)})
    with pytest.raises(Exception) as ref_err:
        evaluate_reference(g, dict(bufs))
    with pytest.raises(type(ref_err.value)) as got_err:
        FastExecutor().run(type("P", (), {"graph": g, "name": "bad"})(), dict(bufs))
    assert str(got_err.value) == str(ref_err.value)


@pytest.mark.parametrize("weight", [0.3, 0.7, 0.5, np.nan])
def test_a_select_on_a_broadcast_scalar_predicate_picks_one_operand(weight):
    # lerp's form: where(weight < 0.5, a, b) with a runtime 0-d weight. The predicate is compared
    # once and the chosen operand taken whole; the result is np.where's.
    g = Graph("lerp_select")
    w = g.add_input("w", (), "float32")
    a = g.add_input("a", (6, 40), "float32")
    b = g.add_input("b", (6, 40), "float32")
    half = _scalar(g, 0.5, (6, 40))
    pred = g.add1("compare", g.add1("broadcast_in_dim", w, shape=(6, 40), dims=()), half, direction="LT")
    picked = g.add1("select", pred, g.add1("exp", a), b)
    g.set_outputs([picked, pred], ["y", "p"])
    inputs = {"w": np.float32(weight), "a": _values((6, 40), 8), "b": _values((6, 40), 9)}
    out = {"y": np.zeros((6, 40), np.float32), "p": np.zeros((6, 40), np.bool_)}
    evaluate(g, _flat(inputs) | {k: v.reshape(-1).view(np.uint8) for k, v in out.items()})
    expected_pred = np.full((6, 40), np.float32(weight) < np.float32(0.5))
    np.testing.assert_array_equal(out["p"], expected_pred)
    with np.errstate(over="ignore"):
        expected = np.where(expected_pred, np.exp(inputs["a"]), inputs["b"])
    assert np.array_equal(out["y"].view(np.uint32), expected.view(np.uint32))


def test_an_exactly_rounded_function_of_a_broadcast_scalar_is_computed_once():
    # GELU's x * rsqrt(2): the rsqrt of a broadcast constant, computed once and broadcast, has the
    # bits of the elementwise computation (rsqrt = 1/sqrt, both correctly rounded).
    g = Graph("gelu_scale")
    x = g.add_input("x", (64, 300), "float32")
    scale = g.add1("rsqrt", _scalar(g, 2.0, (64, 300)))
    g.set_outputs([g.add1("multiply", x, scale), scale], ["y", "s"])
    inputs = {"x": _values((64, 300), 10)}
    got = _compare(g, inputs)
    expected = np.full((64, 300), np.float32(1.0) / np.sqrt(np.float32(2.0)), np.float32)
    assert np.array_equal(got["s"].view(np.uint32), expected.view(np.uint32))


def test_ops_of_constants_alone_are_evaluated_once_when_the_plan_is_made():
    # GELU's scale: rsqrt of a broadcast 2.0, and an iota-based mask; only the ops reading the
    # input remain as steps, with the bits of node-by-node evaluation.
    g = Graph("folded")
    x = g.add_input("x", (64, 300), "float32")
    scale = g.add1("rsqrt", _scalar(g, 2.0, (64, 300)))
    col = g.add1("convert", g.add1("iota", shape=(64, 300), dtype="int32", dim=1), dtype="float32")
    g.set_outputs([g.add1("multiply", g.add1("multiply", x, scale), col)], ["y"])
    _compare(g, {"x": _values((64, 300), 11)})
    summary = explain(g)
    assert summary.steps == ("multiply", "multiply") and summary.folded_ops == 5  # constant, broadcast, rsqrt, iota, convert


def test_large_materialized_results_of_constants_are_not_kept_in_the_plan():
    g = Graph("not_folded")
    x = g.add_input("x", (512, 512), "float32")
    ramp = g.add1("convert", g.add1("iota", shape=(512, 512), dtype="int32", dim=1), dtype="float32")
    g.set_outputs([g.add1("add", x, ramp)], ["y"])
    _compare(g, {"x": _values((512, 512), 12)})
    assert explain(g).kept_constant_bytes <= 4 << 16


def _run_in_place(g: Graph, params, grads):
    """Reference and plan results of ``g`` with output p_out bound to input p's buffer."""
    results = []
    for run in (evaluate_reference, lambda graph, bufs: evaluate(graph, bufs, BufferPool())):
        got = {"p": params.copy(), "d": grads.copy(), "n": np.zeros(params.shape, np.float32)}
        bufs = _flat(got)
        bufs["p_out"] = bufs["p"]
        run(g, bufs)
        results.append(got)
    for name in ("p", "n"):
        assert np.array_equal(results[0][name].view(np.uint32), results[1][name].view(np.uint32)), name


def test_an_in_place_result_is_written_straight_into_its_input_once_nothing_reads_the_input():
    # Adam's param.addcdiv_: the last reader of p computes the new p.
    shape = (64, 512)
    g = Graph("inplace_last")
    p = g.add_input("p", shape, "float32")
    d = g.add_input("d", shape, "float32")
    step = g.add1("multiply", g.add1("exp", d), d)
    g.set_outputs([g.add1("subtract", p, step), step], ["p_out", "n"])
    assert explain(g).in_place == {"p_out": frozenset({"p", "d"}), "n": frozenset({"d"})}
    _run_in_place(g, _values(shape, 13), _values(shape, 14))


def test_an_in_place_result_waits_while_a_view_of_its_input_is_read_later():
    shape = (64, 512)
    g = Graph("inplace_view")
    p = g.add_input("p", shape, "float32")
    d = g.add_input("d", shape, "float32")
    flat = g.add1("reshape", p, shape=(64 * 512,))
    new = g.add1("subtract", p, d)
    later = g.add1("multiply", g.add1("reshape", flat, shape=shape), d)  # reads p after new
    g.set_outputs([new, later], ["p_out", "n"])
    assert "p" not in explain(g).in_place["p_out"]
    _run_in_place(g, _values(shape, 15), _values(shape, 16))


def test_a_reshaped_output_is_computed_straight_into_its_buffer():
    # A saved activation: computed in one shape, read on by later nodes, output in another shape.
    g = Graph("through")
    x = g.add_input("x", (64, 512), "float32")
    h = g.add1("multiply", x, x)
    y = g.add1("add", h, x)
    g.set_outputs([g.add1("reshape", h, shape=(8, 8, 512)), y], ["saved", "y"])
    assert explain(g).written_through == {"saved": (64, 512)}
    outputs = {"saved": np.full((8, 8, 512), 7, np.float32), "y": np.full((64, 512), 7, np.float32)}
    got = _compare(g, {"x": _values((64, 512), 17)}, outputs=outputs)
    with np.errstate(over="ignore"):
        squares = _values((64, 512), 17) ** 2
    assert np.array_equal(got["saved"].reshape(64, 512), squares, equal_nan=True)


def test_overlaps_of_many_buffers_match_pairwise_checks():
    memory = np.zeros(4096, np.uint8)
    rng = np.random.default_rng(18)
    buffers = {f"b{i}": memory[a:a + n] for i, (a, n) in enumerate(zip(rng.integers(0, 4000, 60), rng.integers(0, 96, 60)))}
    buffers |= {"own": np.zeros(64, np.uint8), "strided": memory[100:900:8]}
    overlaps = overlapping(buffers)
    for name, buf in buffers.items():
        expected = {other for other, b in buffers.items() if other != name and np.may_share_memory(buf, b)}
        assert set(overlaps.get(name, ())) == expected, name
