"""Random graphs: chains and DAGs of elementwise ops over random shapes, with broadcasts, views,
dtype changes and trailing reductions - compiled and checked against the fast executor."""

import numpy as np
import pytest
from cc_helpers import Graph, check

EXACT_UNARY = ["abs", "negate", "exp", "tanh", "sigmoid", "sin", "relu", "square", "floor", "round", "sign", "gelu", "silu"]
EXACT_BINARY = ["add", "subtract", "multiply", "maximum", "minimum", "divide"]
SIZES = [1, 2, 3, 5, 7, 31, 64, 129, 200]


def random_graph(seed: int):
    rng = np.random.default_rng(seed)
    rank = int(rng.integers(1, 5))
    shape = tuple(int(rng.choice(SIZES)) for _ in range(rank))
    while np.prod(shape) > 300_000:
        shape = shape[1:]
    rank = len(shape)
    g = Graph(f"fuzz{seed}")
    dtype = str(rng.choice(["float32", "float32", "bfloat16", "float16"]))
    values = [g.add_input("x0", shape, dtype)]
    for k in range(1, int(rng.integers(1, 4))):
        kind = rng.integers(0, 3)
        if kind == 0:  # a full operand
            values.append(g.add_input(f"x{k}", shape, dtype))
        elif kind == 1:  # broadcast from a subset of dims
            dims = tuple(d for d in range(rank) if rng.random() < 0.5)
            src = g.add_input(f"x{k}", tuple(shape[d] for d in dims), dtype)
            values.append(g.add1("broadcast_in_dim", src, shape=shape, dims=dims))
        else:  # transposed operand
            perm = tuple(int(p) for p in rng.permutation(rank))
            src = g.add_input(f"x{k}", tuple(shape[p] for p in np.argsort(perm)), dtype)
            values.append(g.add1("transpose", src, perm=perm))
    outputs = []
    for _ in range(int(rng.integers(2, 9))):
        r = rng.random()
        a = values[int(rng.integers(len(values)))]
        if r < 0.35:
            v = g.add1(str(rng.choice(EXACT_UNARY)), a)
        elif r < 0.75:
            b = values[int(rng.integers(len(values)))]
            if b.type.dtype != a.type.dtype:
                b = g.add1("convert", b, dtype=a.type.dtype)
            v = g.add1(str(rng.choice(EXACT_BINARY)), a, b)
        elif r < 0.85:
            b = values[int(rng.integers(len(values)))]
            if b.type.dtype != a.type.dtype:
                b = g.add1("convert", b, dtype=a.type.dtype)
            p = g.add1("compare", a, b, direction=str(rng.choice(["LT", "GE", "EQ"])))
            v = g.add1("select", p, a, b)
        else:
            v = g.add1("convert", a, dtype=str(rng.choice(["float32", "bfloat16", "float16"])))
        values.append(v)
        if rng.random() < 0.25:
            outputs.append(v)
    last = values[-1]
    outputs.append(last)
    tol = {}
    if rng.random() < 0.5 and rank:
        dims = tuple(d for d in range(rank) if rng.random() < 0.5) or (rank - 1,)
        kind = str(rng.choice(["max", "min", "sum"]))
        outputs.append(g.add1("reduce", g.add1("convert", last, dtype="float32"), kind=kind, dims=dims))
        if kind == "sum":
            tol = {"rtol": 1e-5, "atol": 1e-2}
    names = [f"out{i}" for i in range(len(outputs))]
    g.set_outputs(outputs, names)
    return g, tol


def random_dag(seed: int):
    """Wider op mix: reductions in the middle, views of computed values, integers, argmax, cumsum."""
    rng = np.random.default_rng(10_000 + seed)
    rank = int(rng.integers(1, 4))
    shape = tuple(int(rng.choice(SIZES)) for _ in range(rank))
    g = Graph(f"dag{seed}")
    x = g.add_input("x", shape, "float32")
    i = g.add_input("i", shape, "int32")
    values = [x, g.add1("exp", x), g.add1("convert", i, dtype="float32")]
    outputs = [values[1]]
    for _ in range(int(rng.integers(2, 7))):
        a = values[int(rng.integers(len(values)))]
        r = rng.random()
        if r < 0.2 and a.type.rank:
            dim = int(rng.integers(a.type.rank))
            red = g.add1("reduce", a, kind=str(rng.choice(["max", "min"])), dims=(dim,), keepdims=True)
            v = g.add1("subtract", a, g.add1("broadcast_in_dim", red, shape=a.type.shape, dims=tuple(range(a.type.rank))))
        elif r < 0.35 and a.type.rank >= 2:
            perm = tuple(int(p) for p in rng.permutation(a.type.rank))
            t = g.add1("transpose", a, perm=perm)
            v = g.add1("negate", t)
        elif r < 0.45 and a.type.rank:
            start = [int(rng.integers(0, s)) for s in a.type.shape]
            sl = g.add1("slice", a, start=start, limit=list(a.type.shape))
            v = g.add1("abs", sl)
        elif r < 0.55 and a.type.rank:
            v = g.add1("argmax" if rng.random() < 0.5 else "argmin", a, dim=int(rng.integers(a.type.rank)), dtype="int32")
        elif r < 0.65:
            v = g.add1("floor", g.add1("multiply", a, a))
        elif r < 0.75 and a.type.rank:
            v = g.add1("pad", a, low=[1] * a.type.rank, high=[0] * a.type.rank, value=-1.0)
        else:
            b = values[int(rng.integers(len(values)))]
            if b.type.shape == a.type.shape and b.type.dtype == a.type.dtype:
                v = g.add1(str(rng.choice(["maximum", "add", "multiply"])), a, b)
            else:
                v = g.add1("sigmoid", a)
        values.append(v)
        if rng.random() < 0.5:
            outputs.append(v)
    outputs.append(values[-1])
    unique = []
    for v in outputs:
        if all(v is not u for u in unique):
            unique.append(v)
    g.set_outputs(unique, [f"out{k}" for k in range(len(unique))])
    return g


@pytest.mark.parametrize("seed", range(60))
def test_random_dag(seed):
    check(random_dag(seed), seed=seed)


@pytest.mark.parametrize("seed", list(range(80)) + [474])  # 474: group ids reused after a merge
def test_random_graph(seed):
    g, tol = random_graph(seed)
    inputs = None
    if any(n.op in ("divide",) for n in g.nodes):  # keep quotients finite and comparable
        from neuronxcc.compiler.testing import random_inputs

        inputs = random_inputs(g, seed, low=0.5, high=3.0)
    check(g, inputs, seed=seed, **tol)
