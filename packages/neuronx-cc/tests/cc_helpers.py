"""Shared test helpers: small graph builders, the differential check, and program inspection."""

from __future__ import annotations

import numpy as np
from neuron_sim import dtypes
from neuron_sim.graph import Graph
from neuron_sim.isa import DmaCopy
from neuron_sim.memory.access_pattern import HBM
from neuronxcc.compiler import compile_graph
from neuronxcc.compiler.testing import check_graph, random_inputs, run_exact, run_fast

# 1-D to 4-D, tiny, not multiples of 128, and more than one tile.
SHAPES = [(1,), (7,), (129,), (1000,), (3, 5), (128, 512), (257, 33), (2, 3, 4), (4, 130, 9), (2, 3, 5, 7), (1, 1, 300, 2)]
FLOATS = ["float32", "bfloat16", "float16"]


def unary(op: str, shape, in_dtype="float32", out_dtype=None, **attrs) -> Graph:
    g = Graph(f"{op}_{in_dtype}")
    x = g.add_input("x", shape, in_dtype)
    y = g.add1(op, x, **attrs)
    if out_dtype is not None:
        y = g.add1("convert", y, dtype=out_dtype)
    g.set_outputs([y], ["out"])
    return g


def binary(op: str, shape, in_dtype="float32", dtype_b=None, **attrs) -> Graph:
    g = Graph(f"{op}_{in_dtype}")
    x = g.add_input("x", shape, in_dtype)
    y = g.add_input("y", shape, dtype_b or in_dtype)
    g.set_outputs([g.add1(op, x, y, **attrs)], ["out"])
    return g


def check(graph: Graph, inputs=None, *, rtol=0.0, atol=0.0, seed=0, arch=None, program=None):
    """Compile, run exact and fast on the same inputs, compare; return the program."""
    program, _, _ = check_graph(graph, inputs, rtol=rtol, atol=atol, seed=seed, arch=arch, program=program)
    return program


def dma_counts(program) -> tuple[int, int]:
    """(loads from HBM, stores to HBM) of a program's DMA instructions."""
    loads = sum(1 for i in program.instructions if isinstance(i, DmaCopy) and i.src.memory == HBM and i.dst.memory != HBM)
    stores = sum(1 for i in program.instructions if isinstance(i, DmaCopy) and i.dst.memory == HBM and i.src.memory != HBM)
    return loads, stores


def positive_inputs(graph: Graph, seed=0, low=0.05, high=4.0) -> dict:
    return random_inputs(graph, seed, low=low, high=high)


def sum_tolerance(x: np.ndarray, axis=None, eps=2e-6) -> float:
    """An absolute tolerance for fp32 sums of ``x``: a few ulps of the sum of magnitudes."""
    return float(eps * np.abs(x.astype(np.float64)).sum(axis=axis).max() + 1e-6)


def as_dtype(a, dtype) -> np.ndarray:
    return dtypes.convert(np.asarray(a), dtype)


__all__ = ["SHAPES", "FLOATS", "unary", "binary", "check", "dma_counts", "positive_inputs", "sum_tolerance", "as_dtype",
           "compile_graph", "random_inputs", "run_exact", "run_fast", "Graph"]
