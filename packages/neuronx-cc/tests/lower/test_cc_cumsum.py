"""cumsum along any dim: log-step VectorE scans with a carry between tiles, fp32 accumulation."""

import numpy as np
import pytest
from cc_helpers import Graph, check, random_inputs

CASES = [((1000,), 0), ((40, 3000), 1), ((40, 3000), 0), ((4, 130, 9), 1), ((2, 3, 5, 7), 2), ((7,), 0), ((1, 5), 0),
         ((30000,), 0), ((3, 9000), 1), ((200, 5), 0), ((100,), 0), ((1 << 20,), 0)]


def _tolerance(x, dim):
    # fp32 rounding of partial sums taken in a different order: a few ulps of the running |sum|.
    return float(4e-7 * np.cumsum(np.abs(x.astype(np.float64)), axis=dim).max() + 1e-6)


@pytest.mark.parametrize("shape,dim", CASES, ids=str)
def test_cumsum(shape, dim):
    g = Graph("cumsum")
    x = g.add_input("x", shape, "float32")
    g.set_outputs([g.add1("cumsum", x, dim=dim)], ["out"])
    inputs = random_inputs(g, 0)
    check(g, inputs, atol=_tolerance(inputs["x"], dim))


@pytest.mark.parametrize("dtype,out", [("bfloat16", None), ("float16", "float32"), ("int16", "int32"), ("bool", "int32"),
                                       ("bool", "int64")])
def test_cumsum_dtypes(dtype, out):
    g = Graph("cumsum")
    x = g.add_input("x", (33, 257), dtype)
    attrs = {"dtype": out} if out else {}
    g.set_outputs([g.add1("cumsum", x, dim=1, **attrs)], ["out"])
    inputs = random_inputs(g, 1)
    narrow = (out or dtype) in ("bfloat16", "float16")
    check(g, inputs, atol=_tolerance(inputs["x"], 1), rtol=1e-2 if narrow else 0.0)


def test_cumsum_of_small_integers_is_exact():
    g = Graph("cumsum")
    x = g.add1("convert", g.add_input("x", (8, 5000), "int8"), dtype="int32")  # |sums| <= 5000 * 128 < 2**24
    g.set_outputs([g.add1("cumsum", x, dim=1)], ["out"])
    inputs = {"x": np.random.default_rng(0).integers(-128, 128, (8, 5000)).astype(np.int8)}
    check(g, inputs)  # sums of small integers stay exact in fp32


@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_cumsum_of_integers_of_any_range_is_exact(dtype):
    # not the fp32 scan: shifted adds on GpSimd's integer ALU (int64 by words; ``integer_expand.py``)
    g = Graph("cumsum")
    g.set_outputs([g.add1("cumsum", g.add_input("x", (3, 7), dtype), dim=1)], ["out"])
    info = np.iinfo(dtype)
    values = np.random.default_rng(0).integers(info.min, info.max, (3, 7), dtype=dtype, endpoint=True)
    check(g, {"x": values})


def test_long_scans_use_partitions_and_tensor_engine_offsets():
    from neuron_sim.isa import AffineSelect, Matmul

    g = Graph("cumsum")
    x = g.add_input("x", (2, 200_000), "float32")
    g.set_outputs([g.add1("cumsum", x, dim=1)], ["out"])
    inputs = random_inputs(g, 0)
    program = check(g, inputs, atol=_tolerance(inputs["x"], 1))
    assert any(isinstance(i, AffineSelect) for i in program.instructions)  # the triangular matrix
    assert any(isinstance(i, Matmul) for i in program.instructions)
    assert max(i.dst.partition_count for i in program.instructions if i.opcode == "DMA_COPY" and i.dst.memory == "sbuf") == 128
