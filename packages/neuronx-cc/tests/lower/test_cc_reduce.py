"""Reductions: any dims, every kind, fp32 accumulation; fused behind elementwise chains."""

import numpy as np
import pytest
from cc_helpers import Graph, check, random_inputs, sum_tolerance
from neuron_sim.isa import Matmul, PartitionReduce

KINDS = ["sum", "max", "min", "prod", "and", "or"]
CASES = [
    ((1000,), (0,)),
    ((300, 700), (1,)),
    ((300, 700), (0,)),  # column sums: across partitions
    ((300, 700), (0, 1)),
    ((7, 5), (0,)),
    ((2, 3, 4), (1,)),
    ((4, 130, 9), (0, 2)),
    ((6, 50, 7, 9), (1, 3)),
    ((2, 3, 5, 7), (0, 1, 2, 3)),
    ((3, 1, 40), (1,)),  # a size-1 reduced dim
    ((40000,), (0,)),  # long: many tiles accumulate
    ((3, 20000), (1,)),
    ((20000, 3), (0,)),
]


def _tolerance(kind, x, dims, dtype):
    if kind == "sum":
        return {"atol": sum_tolerance(x, tuple(dims)) * (256 if dtype != "float32" else 1), "rtol": 1e-2 if dtype != "float32" else 0}
    if kind == "prod":  # rounding errors of n fp32 products, in different orders
        n = int(np.prod([x.shape[d] for d in dims]))
        return {"rtol": max(1e-6, 6e-8 * n) if dtype == "float32" else 1e-2, "atol": 1e-30}
    return {}


@pytest.mark.parametrize("shape,dims", CASES, ids=str)
@pytest.mark.parametrize("kind", KINDS)
def test_reduce_float32(kind, shape, dims):
    g = Graph("reduce")
    x = g.add_input("x", shape, "float32")
    g.set_outputs([g.add1("reduce", x, kind=kind, dims=dims)], ["out"])
    inputs = random_inputs(g, 1, low=0.999, high=1.001) if kind == "prod" else random_inputs(g, 1)
    if kind in ("and", "or"):  # some zeros, so the answers vary
        inputs["x"] = np.where(np.random.default_rng(0).random(shape) < 0.02, 0.0, inputs["x"]).astype(np.float32)
    check(g, inputs, **_tolerance(kind, inputs["x"], dims, "float32"))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "int8", "bool"])
@pytest.mark.parametrize("kind", ["sum", "max", "and"])
@pytest.mark.parametrize("shape,dims", [((257, 33), (1,)), ((257, 33), (0,)), ((4, 130, 9), (0, 1, 2))], ids=str)
def test_reduce_dtypes(kind, dtype, shape, dims):
    g = Graph("reduce")
    x = g.add_input("x", shape, dtype)
    if dtype == "int8":  # summed in int32 (as torch sums int8), small enough for fp32 to be exact
        x = g.add1("convert", x, dtype="int32")
    g.set_outputs([g.add1("reduce", x, kind=kind, dims=dims)], ["out"])
    inputs = random_inputs(g, 2)
    check(g, inputs, **_tolerance(kind, inputs["x"].astype(np.float64), dims, dtype))


@pytest.mark.parametrize("kind", ["sum", "max"])
def test_int32_reductions_of_any_range_are_exact(kind):
    # not through fp32: pairwise steps on GpSimd's integer ALU (``integer_expand.py``), wrapping as int32
    g = Graph("reduce")
    g.set_outputs([g.add1("reduce", g.add_input("x", (5, 6), "int32"), kind=kind, dims=(1,))], ["out"])
    x = np.random.default_rng(0).integers(-(2**31), 2**31, (5, 6)).astype(np.int32)
    x[0] = 2**31 - 1
    x[1, :2] = [16777217, 16777216]
    program = check(g, {"x": x})
    assert any(i.engine == "gpsimd" and i.opcode == "TENSOR_TENSOR" for i in program.instructions)


def test_and_of_int32_of_any_range_is_a_nonzero_test():
    g = Graph("reduce")
    g.set_outputs([g.add1("reduce", g.add_input("x", (5, 6), "int32"), kind="and", dims=(1,))], ["out"])
    x = np.full((5, 6), 2**31 - 1, np.int32)
    x[1, 3] = 0
    check(g, {"x": x})


@pytest.mark.parametrize("keepdims", [False, True])
def test_reduce_keepdims_and_dtype(keepdims):
    g = Graph("reduce")
    x = g.add_input("x", (64, 96), "bfloat16")
    g.set_outputs([g.add1("reduce", x, kind="sum", dims=(1,), keepdims=keepdims, dtype="float32"),
                   g.add1("reduce", x, kind="max", dims=(-2,), keepdims=keepdims)], ["s", "m"])
    inputs = random_inputs(g, 0)
    check(g, inputs, atol=sum_tolerance(inputs["x"].astype(np.float64), 1))


def test_sum_accumulates_in_fp32():
    # 2**24 + many ones: a bf16 or fp16 accumulator would lose them all.
    g = Graph("acc")
    x = g.add_input("x", (4096,), "float32")
    g.set_outputs([g.add1("reduce", x, kind="sum", dims=(0,), dtype="bfloat16")], ["out"])
    values = np.ones(4096, np.float32) * 0.25
    from neuronxcc.compiler.testing import run_exact

    program = check(g, {"x": values})
    assert float(run_exact(program, {"x": values})["out"]) == 1024.0


def test_column_sums_use_tensor_engine_and_max_uses_partition_reduce():
    g = Graph("cols")
    x = g.add_input("x", (512, 300), "float32")
    g.set_outputs([g.add1("reduce", x, kind="sum", dims=(0,))], ["s"])
    inputs = random_inputs(g, 0)
    program = check(g, inputs, atol=sum_tolerance(inputs["x"], 0))
    assert any(isinstance(i, Matmul) for i in program.instructions)
    g = Graph("cols")
    x = g.add_input("x", (512, 300), "float32")
    g.set_outputs([g.add1("reduce", x, kind="max", dims=(0,))], ["m"])
    program = check(g)
    assert any(isinstance(i, PartitionReduce) for i in program.instructions)


def test_chain_ending_in_reductions_is_one_loop():
    g = Graph("chain")
    x = g.add_input("x", (300, 1000), "float32")
    y = g.add_input("y", (300, 1000), "float32")
    d = g.add1("subtract", x, y)
    sq = g.add1("multiply", d, d)
    s = g.add1("reduce", sq, kind="sum", dims=(1,))
    m = g.add1("reduce", sq, kind="max", dims=(1,))
    g.set_outputs([s, m], ["sse", "worst"])
    inputs = random_inputs(g, 0)
    program = check(g, inputs, atol=1e-3)
    assert len(program.metadata["groups"]) == 1
    assert not [t for t in program.tensors if t.kind == "internal"]  # d, sq never reach HBM


def test_softmax():
    g = Graph("softmax")
    x = g.add_input("x", (100, 1000), "float32")
    m = g.add1("reduce", x, kind="max", dims=(1,), keepdims=True)
    e = g.add1("exp", g.add1("subtract", x, g.add1("broadcast_in_dim", m, shape=(100, 1000), dims=(0, 1))))
    s = g.add1("reduce", e, kind="sum", dims=(1,), keepdims=True)
    g.set_outputs([g.add1("divide", e, g.add1("broadcast_in_dim", s, shape=(100, 1000), dims=(0, 1)))], ["out"])
    check(g, rtol=1e-5, atol=1e-7)


def test_layernorm_like():
    g = Graph("layernorm")
    x = g.add_input("x", (64, 768), "bfloat16")
    xf = g.add1("convert", x, dtype="float32")
    mean = g.add1("divide", g.add1("reduce", xf, kind="sum", dims=(1,)),
                  g.add1("broadcast_in_dim", g.add1("constant", value=np.float32(768.0)), shape=(64,), dims=()))
    c = g.add1("subtract", xf, g.add1("broadcast_in_dim", mean, shape=(64, 768), dims=(0,)))
    var = g.add1("reduce", g.add1("multiply", c, c), kind="sum", dims=(1,))
    inv = g.add1("rsqrt", g.add1("add", g.add1("divide", var, g.add1("broadcast_in_dim", g.add1(
        "constant", value=np.float32(768.0)), shape=(64,), dims=())), g.add1("broadcast_in_dim", g.add1(
            "constant", value=np.float32(1e-5)), shape=(64,), dims=())))
    y = g.add1("multiply", c, g.add1("broadcast_in_dim", inv, shape=(64, 768), dims=(0,)))
    g.set_outputs([g.add1("convert", y, dtype="bfloat16")], ["out"])
    check(g, rtol=1e-2, atol=1e-2)


def test_empty_reductions_give_the_identity():
    g = Graph("empty")
    x = g.add_input("x", (0, 5), "float32")
    g.set_outputs([g.add1("reduce", x, kind="sum", dims=(0,)), g.add1("reduce", x, kind="prod", dims=(0,))], ["s", "p"])
    check(g)


@pytest.mark.parametrize("shape", [(6000, 300), (700, 9000), (3, 200, 3000)], ids=str)
def test_many_accumulation_runs_in_flight(shape):
    """Tiles of several runs are in flight at once: each run keeps its own accumulator."""
    g = Graph("runs")
    x = g.add_input("x", shape, "float32")
    e = g.add1("exp", x)
    g.set_outputs([g.add1("reduce", e, kind="max", dims=(len(shape) - 1,)),
                   g.add1("reduce", e, kind="sum", dims=(len(shape) - 1,))], ["m", "s"])
    inputs = random_inputs(g, 0)
    program = check(g, inputs, rtol=2e-6, atol=1e-3)
    assert program.metadata["groups"][0]["tiles"] > 3
