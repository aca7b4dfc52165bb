"""Differential testing: the compiled ISA program on the exact executor vs the graph on the fast one.

    program, exact, fast = check_graph(graph)              # random inputs, compare, raise on mismatch
    check_graph(graph, inputs, rtol=1e-6, atol=1e-6)       # tolerances for transcendentals/reductions

Both executors get the same input bytes. The exact run binds scratch tensors poisoned (NaN bytes)
and refuses reads of SBUF/PSUM nothing wrote (``uninitialized="error"``), so a lowering that reads
what it never computed fails loudly instead of passing by luck. Without tolerances the comparison
is exact: equal values, NaN where NaN (-0.0 and +0.0 count as equal).
"""

from __future__ import annotations

import numpy as np
from neuron_sim import ExactExecutor, dtypes, get_architecture
from neuron_sim.executor.fast import evaluate
from neuron_sim.graph import Graph, graph_of

from .constants import constant_arrays
from .driver import compile_graph


def random_inputs(graph, seed: int = 0, *, low: float = -3.0, high: float = 3.0) -> dict[str, np.ndarray]:
    """Random arrays for the graph's inputs: normal floats, small integers, random bools."""
    rng = np.random.default_rng(seed)
    out = {}
    for v in graph.inputs:
        shape, dtype = v.type.shape, v.type.dtype
        if dtype == "bool":
            a = rng.random(shape) < 0.5
        elif dtypes.is_int(dtype):
            info = np.iinfo(dtypes.to_numpy(dtype))
            lo, hi = max(int(low * 10), info.min), min(int(high * 10), info.max)
            a = rng.integers(lo, hi + 1, size=shape)
        else:
            a = rng.uniform(low, high, size=shape)
        out[v.name] = dtypes.convert(np.asarray(a), dtype) if dtype != "bool" else np.asarray(a)
    return out


def _buffers(program, inputs: dict, poison_internal: bool = True) -> dict[str, np.ndarray]:
    given = dict(inputs)
    given.update(constant_arrays(program))
    buffers = {}
    for t in program.tensors:
        if t.kind in ("input", "inout"):
            array = np.ascontiguousarray(np.asarray(given[t.name]).astype(dtypes.to_numpy(t.dtype), copy=False))
            if array.shape != tuple(t.shape):
                array = array.reshape(t.shape)
            buffers[t.name] = array.reshape(-1).view(np.uint8).copy()
        else:
            buffers[t.name] = np.full(max(t.nbytes, 1), 0xFF if poison_internal else 0, dtype=np.uint8)
    return buffers


def _outputs(program, buffers) -> dict[str, np.ndarray]:
    return {t.name: buffers[t.name][: t.nbytes].view(dtypes.to_numpy(t.dtype)).reshape(t.shape).copy()
            for t in program.tensors if t.kind in ("output", "inout")}


def run_exact(program, inputs: dict, arch=None, uninitialized: str | None = "error") -> dict[str, np.ndarray]:
    """Run ``program`` on the exact executor; returns its outputs by name."""
    arch = arch or get_architecture(program.target)
    buffers = _buffers(program, inputs)
    ExactExecutor(arch, uninitialized=uninitialized).run(program, buffers)
    return _outputs(program, buffers)


def run_fast(program_or_graph, inputs: dict) -> dict[str, np.ndarray]:
    """Evaluate the graph-level form (a Program's ``graph``, or a Graph) on the fast executor."""
    graph = program_or_graph if isinstance(program_or_graph, Graph) else graph_of(program_or_graph)
    buffers = {}
    for v in graph.inputs:
        array = np.ascontiguousarray(np.asarray(inputs[v.name]).astype(dtypes.to_numpy(v.type.dtype), copy=False))
        buffers[v.name] = array.reshape(-1).view(np.uint8).copy()
    for v in graph.outputs:
        if v.name not in buffers:  # an input returned under its own name is read and "written" in place
            buffers[v.name] = np.full(max(v.type.num_elements * dtypes.itemsize(v.type.dtype), 1), 0xFF, dtype=np.uint8)
    evaluate(graph, buffers)
    return {v.name: buffers[v.name][: v.type.num_elements * dtypes.itemsize(v.type.dtype)]
            .view(dtypes.to_numpy(v.type.dtype)).reshape(v.type.shape).copy() for v in graph.outputs}


def assert_agree(actual: np.ndarray, expected: np.ndarray, *, rtol: float = 0.0, atol: float = 0.0, name: str = "") -> None:
    """Equal (or within ``rtol``/``atol``), NaN where NaN, infinities of the same sign."""
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, (
        f"{name}: {actual.shape} {actual.dtype} vs {expected.shape} {expected.dtype}")
    a = actual.astype(np.float64) if actual.dtype.kind not in "iub" else actual.astype(np.int64)
    e = expected.astype(np.float64) if expected.dtype.kind not in "iub" else expected.astype(np.int64)
    if rtol == 0 and atol == 0:
        same = (a == e) | (np.isnan(a) & np.isnan(e)) if a.dtype.kind == "f" else a == e
    else:
        with np.errstate(invalid="ignore"):
            same = (np.abs(a - e) <= atol + rtol * np.abs(e)) | (a == e) | (np.isnan(a) & np.isnan(e))
    if not np.all(same):
        bad = np.argwhere(~np.asarray(same))
        first = [tuple(int(i) for i in idx) for idx in bad[:5]]
        raise AssertionError(
            f"{name}: {len(bad)} of {a.size} element(s) differ (rtol={rtol}, atol={atol}); first at {first}: "
            f"exact {[actual[i] for i in first]} vs fast {[expected[i] for i in first]}")


def check_graph(graph, inputs: dict | None = None, *, arch=None, rtol: float = 0.0, atol: float = 0.0, seed: int = 0,
                program=None):
    """Compile ``graph``, run both executors on the same inputs and compare every output.

    Returns ``(program, exact_outputs, fast_outputs)``; raises AssertionError on disagreement.
    """
    program = program or compile_graph(graph, arch)
    inputs = inputs if inputs is not None else random_inputs(graph, seed)
    exact = run_exact(program, inputs, arch)
    fast = run_fast(graph, inputs)
    for name, expected in fast.items():
        assert_agree(exact[name], expected, rtol=rtol, atol=atol, name=name)
    return program, exact, fast
