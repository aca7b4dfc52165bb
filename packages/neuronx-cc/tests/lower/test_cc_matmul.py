"""dot_general on TensorE: every layout, dtype and odd shape agrees with the graph's numerics.

The exact executor accumulates K in 128-row passes in PSUM, the reference in one fp32 matmul: they
differ by fp32 rounding (bounded by a few ulps of sum |a||b|), plus one ulp of a bf16/fp16 result
rounded from slightly different fp32 values.
"""

import numpy as np
import pytest
from cc_helpers import Graph, compile_graph, dma_counts, random_inputs, run_exact, run_fast
from neuron_sim import estimate
from neuron_sim.isa import Matmul, Transpose

ULP = {"float32": 0.0, "bfloat16": 2.0**-7, "float16": 2.0**-10}


def dot_graph(lshape, rshape, dtype="float32", rdtype=None, out=None, **dims) -> Graph:
    g = Graph("dot")
    a = g.add_input("a", lshape, dtype)
    b = g.add_input("b", rshape, rdtype or dtype)
    attrs = dict(dims, **({"dtype": out} if out else {}))
    g.set_outputs([g.add1("dot_general", a, b, **attrs)], ["out"])
    return g


def check_dot(g: Graph, seed=0, inputs=None, program=None):
    """Compile, run exact and fast, compare within fp32-accumulation tolerances; return the program."""
    inputs = inputs or random_inputs(g, seed)
    program = program or compile_graph(g)
    exact = run_exact(program, inputs)["out"]
    fast = run_fast(g, inputs)["out"]
    assert exact.dtype == fast.dtype and exact.shape == fast.shape
    # sum |a||b| per result element, with the graph's own contraction
    magnitude = run_fast(g, {k: np.abs(v.astype(np.float32)) for k, v in inputs.items()})["out"].astype(np.float64)
    e, f = exact.astype(np.float64), fast.astype(np.float64)
    tol = 1e-6 * 8 * magnitude + ULP.get(str(g.outputs[0].type.dtype), 0.0) * np.abs(f) + 1e-30
    bad = ~((np.abs(e - f) <= tol) | (e == f))
    assert not bad.any(), f"{int(bad.sum())} of {e.size} differ; first at {np.argwhere(bad)[:3].tolist()}: {e[bad][:3]} vs {f[bad][:3]}"
    return program


MK_KN = dict(lhs_contract=(1,), rhs_contract=(0,))
LAYOUTS = {
    "mk,kn": ((37, 53), (53, 29), MK_KN),
    "km,kn": ((200, 130), (200, 600), dict(lhs_contract=(0,), rhs_contract=(0,))),
    "mk,nk": ((130, 300), (520, 300), dict(lhs_contract=(1,), rhs_contract=(1,))),
    "km,nk": ((129, 7), (513, 129), dict(lhs_contract=(0,), rhs_contract=(1,))),
    "bmk,bkn": ((6, 20, 33), (6, 33, 17), dict(lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))),
    "attention qk": ((2, 3, 40, 16), (2, 3, 16, 40),
                     dict(lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(2,))),
    "attention q.kT": ((2, 3, 40, 16), (2, 3, 40, 16),
                       dict(lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(3,))),
    "attention pv": ((2, 2, 70, 70), (2, 2, 70, 24),
                     dict(lhs_batch=(0, 1), rhs_batch=(0, 1), lhs_contract=(3,), rhs_contract=(2,))),
    "batch dim last": ((20, 33, 6), (33, 17, 6), dict(lhs_batch=(2,), rhs_batch=(2,), lhs_contract=(1,), rhs_contract=(0,))),
    "contract 2 dims": ((12, 5, 30), (5, 30, 9), dict(lhs_contract=(1, 2), rhs_contract=(0, 1))),
    "contract 2 dims swapped": ((12, 5, 30), (30, 9, 5), dict(lhs_contract=(2, 1), rhs_contract=(0, 2))),
    "vector-matrix": ((300,), (300, 700), dict(lhs_contract=(0,), rhs_contract=(0,))),
    "matrix-vector": ((700, 300), (300,), dict(lhs_contract=(1,), rhs_contract=(0,))),
    "vector dot": ((1000,), (1000,), dict(lhs_contract=(0,), rhs_contract=(0,))),
    "outer product": ((30,), (40,), {}),
    "1xK @ Kx1": ((1, 64), (64, 1), MK_KN),
    "batch of 64 tiny": ((64, 4, 8), (64, 8, 4), dict(lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))),
    "two M dims": ((3, 50, 7, 20), (20, 45), dict(lhs_contract=(3,), rhs_contract=(0,))),
    "two N dims": ((20, 45), (3, 20, 7, 50), dict(lhs_contract=(0,), rhs_contract=(1,))),
    "long K": ((64, 3000), (3000, 48), MK_KN),
    "multi tile": ((300, 260), (260, 1100), MK_KN),
}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
@pytest.mark.parametrize("layout", list(LAYOUTS), ids=str)
def test_layouts_and_dtypes(layout, dtype):
    lshape, rshape, dims = LAYOUTS[layout]
    program = check_dot(dot_graph(lshape, rshape, dtype, **dims))
    (group,) = program.metadata["groups"]
    assert group["kind"] == "matmul"


@pytest.mark.parametrize("ldt,rdt,out", [
    ("bfloat16", "float32", None), ("bfloat16", "float16", "float32"), ("float32", "float32", "bfloat16"),
    ("int8", "int8", "int32"), ("int8", "bfloat16", "float32"), ("bool", "float32", "float32"),
])
def test_mixed_and_integer_dtypes(ldt, rdt, out):
    """fp32 with anything runs in fp32; integers and bools are cast to fp32 by the load DMA (an
    integer result only where every sum is exact in fp32: 40 int8 products)."""
    g = dot_graph((33, 40), (40, 20), ldt, rdtype=rdt, out=out, **MK_KN)
    program = check_dot(g)
    kinds = {(i.stationary.dtype, i.moving.dtype) for i in program.instructions if isinstance(i, Matmul)}
    if "float32" in (ldt, rdt) or "int" in ldt or ldt == "bool":
        assert kinds == {("float32", "float32")}


def test_contraction_over_nothing_is_zero():
    g = dot_graph((5, 0), (0, 6), "float32", **MK_KN)
    program = check_dot(g)
    assert not any(isinstance(i, Matmul) for i in program.instructions)


def test_empty_result():
    program = compile_graph(dot_graph((0, 5), (5, 6), "float32", **MK_KN))
    assert not any(isinstance(i, Matmul) for i in program.instructions)


def test_batch_of_tiny_matmuls_runs_on_vector_engine():
    """64 x [4x8]@[8x4]: the batch on partitions, one contiguous load per operand, K multiply-adds."""
    g = dot_graph((64, 4, 8), (64, 8, 4), "bfloat16",
                  lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))
    program = check_dot(g)
    (group,) = program.metadata["groups"]
    assert group["engine"] == "vector" and group["tiles"] == 1
    assert not any(isinstance(i, Matmul) for i in program.instructions)
    assert dma_counts(program) == (2, 1)
    assert estimate(program).total_ns < 8000


def test_batch_of_narrow_matmuls_packs_one_psum_bank():
    """64 x [4x64]@[64x4] (K too long for VectorE): 64 matmuls write one PSUM bank side by side,
    so the batch shares its loads, one evacuation and one store."""
    g = dot_graph((64, 4, 64), (64, 64, 4), "bfloat16",
                  lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(1,))
    program = check_dot(g)
    (group,) = program.metadata["groups"]
    assert group["engine"] == "tensor" and group["pack"] == 64
    assert sum(isinstance(i, Matmul) for i in program.instructions) == 64
    loads, stores = dma_counts(program)
    assert loads <= 3 and stores == 1


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "int8"])
def test_vector_engine_batches_with_epilogue_and_odd_layouts(dtype):
    g = Graph("small")
    a = g.add_input("a", (300, 3, 5), dtype)
    b = g.add_input("b", (5, 300, 7), dtype)  # batch dim in the middle
    wide = {"dtype": "int32"} if dtype == "int8" else {}  # int8 products summed in int32: exact in fp32
    y = g.add1("dot_general", a, b, lhs_batch=(0,), rhs_batch=(1,), lhs_contract=(2,), rhs_contract=(0,), **wide)
    out_dtype = "float32" if dtype == "int8" else dtype
    y = g.add1("tanh", g.add1("convert", y, dtype=out_dtype))
    g.set_outputs([y], ["out"])
    program = check_dot(g)
    assert program.metadata["groups"][0]["engine"] == "vector"


def test_one_by_k_times_k_by_one():
    g = dot_graph((1, 500), (500, 1), "float32", **MK_KN)
    program = check_dot(g)
    assert sum(isinstance(i, Matmul) for i in program.instructions) == 4  # ceil(500 / 128) K passes
    assert dma_counts(program) == (2, 1)
    assert not any(isinstance(i, Transpose) for i in program.instructions)


def test_k_contiguous_operands_are_transposed_on_tensor_engine():
    """x @ W.T (torch Linear): both operands have K contiguous; TensorE transposes them blockwise."""
    g = dot_graph((256, 384), (320, 384), "bfloat16", lhs_contract=(1,), rhs_contract=(1,))
    program = check_dot(g)
    (group,) = program.metadata["groups"]
    assert group["transposed"] == [True, True]
    # every element transposed exactly once: (256 + 320) x 384 in 128x128 blocks
    assert sum(isinstance(i, Transpose) for i in program.instructions) == 2 * 3 + 3 * 3


def test_views_feed_the_access_patterns():
    """A transposed / sliced / broadcast operand is read through its strides, never copied first."""
    g = Graph("views")
    x = g.add_input("x", (70, 90), "float32")
    w = g.add_input("w", (3, 90, 40), "float32")
    xt = g.add1("transpose", x, perm=(1, 0))  # [90, 70]
    ws = g.add1("slice", w, start=(1, 0, 0), limit=(2, 90, 40))  # [1, 90, 40]
    wr = g.add1("reshape", ws, shape=(90, 40))
    xb = g.add1("broadcast_in_dim", xt, shape=(2, 90, 70), dims=(1, 2))
    wb = g.add1("broadcast_in_dim", wr, shape=(2, 90, 40), dims=(1, 2))
    y = g.add1("dot_general", xb, wb, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(1,), rhs_contract=(1,))
    g.set_outputs([y], ["out"])
    program = check_dot(g)
    assert not [t for t in program.tensors if t.kind == "internal"]


def test_constant_operands():
    g = Graph("const")
    x = g.add_input("x", (40, 64), "float32")
    ones = g.add1("constant", value=np.ones((64, 8), np.float32))
    ramp = g.add1("iota", shape=(8, 64), dim=1, dtype="float32")
    y = g.add1("dot_general", x, ones, **MK_KN)
    z = g.add1("dot_general", y, ramp, **MK_KN)
    g.set_outputs([z], ["out"])
    check_dot(g)


@pytest.mark.parametrize("arch", ["trn2", "trn3"])
def test_targets(arch):
    from neuron_sim import get_architecture

    g = dot_graph((150, 200), (200, 300), "bfloat16", **MK_KN)
    check_dot(g, program=compile_graph(g, get_architecture(arch)))


def test_random_shapes():
    rng = np.random.default_rng(7)
    for _ in range(12):
        b, m, k, n = (int(v) for v in rng.integers(1, [4, 200, 300, 700]))
        dtype = str(rng.choice(["float32", "bfloat16", "float16"]))
        lhs_t, rhs_t = (bool(v) for v in rng.integers(0, 2, 2))
        lshape = (b, k, m) if lhs_t else (b, m, k)
        rshape = (b, n, k) if rhs_t else (b, k, n)
        g = dot_graph(lshape, rshape, dtype, lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(1 if lhs_t else 2,),
                      rhs_contract=(2 if rhs_t else 1,))
        check_dot(g, seed=int(rng.integers(1000)))


def test_very_long_contraction_streams_k_groups():
    """K too long to keep a stripe in SBUF: K groups go outermost, each output tile keeps its own
    PSUM bank across them, and every stripe is still loaded once."""
    g = dot_graph((200, 40000), (40000, 300), "float32", **MK_KN)
    program = check_dot(g)
    (group,) = program.metadata["groups"]
    assert group["k_groups"] > 1 and group["resident"].endswith("k-outer")
    per_group = group["loads"] / group["k_groups"]
    assert per_group == 2 + 1  # two lhs M tiles and one rhs N tile per K group, each loaded once


def test_operand_transposed_once_into_hbm_when_it_would_stream_many_times(monkeypatch):
    """Neither operand of a large x @ w.T fits SBUF transposed: x is transposed once into an HBM
    scratch (TensorE, whole PSUM banks) and then streamed directly instead of re-transposed per stripe."""
    g = dot_graph((4096, 4096), (16384, 4096), "bfloat16", lhs_contract=(1,), rhs_contract=(1,))
    program = compile_graph(g)
    kinds = [grp["kind"] for grp in program.metadata["groups"]]
    assert kinds == ["transpose", "matmul"] and program.metadata["groups"][1]["pretransposed"] == 0
    assert estimate(program).summary["mfu_estimated_percent"] > 88.0


def test_pretransposed_operands_agree(monkeypatch):
    from neuronxcc.compiler.lower import matmul

    monkeypatch.setattr(matmul, "PRETRANSPOSE_MIN", 0)
    monkeypatch.setattr(matmul, "PRETRANSPOSE_REPEATS", 0.0)
    monkeypatch.setattr(matmul, "PRETRANSPOSE_GAIN", 100.0)
    g = dot_graph((2, 300, 200), (2, 500, 200), "bfloat16",
                  lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(2,))
    program = check_dot(g)
    assert program.metadata["groups"][-1]["pretransposed"] in (0, 1)
