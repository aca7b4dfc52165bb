"""One ATen op call -> a neuron_sim graph, through the same compiler path as torch.compile.

The call is traced with ``make_fx`` on fake tensors (with torch-mlir's decomposition table, so
composite ops arrive as core ATen ops), imported to StableHLO by torch-mlir and from there into
the compiler's graph IR (``neuronxcc.frontend.from_fx``). Tensor arguments become graph inputs;
every other argument is baked into the graph (and into the cache key).

Graph inputs and outputs are the tensors' buffers as they lie in device memory: an input whose
strides are not row-major is bound as its flat storage span and read through ``as_strided``; an
output with a dense permuted layout (channels-last, a transposed result) is written transposed
into a buffer of that layout.
"""

from __future__ import annotations

import math

import torch
from neuron_sim.graph import Graph
from neuronxcc.frontend import FrontendError, from_fx
from neuronxcc.frontend.fx import decompositions
from torch.fx.experimental.proxy_tensor import make_fx

from .dtypes import NotLowerable, sim_dtype

TensorSpec = tuple  # (shape, strides, torch dtype)


def storage_span(shape, strides) -> int:
    """Elements from a tensor's first element to its last (what its buffer must cover)."""
    if math.prod(shape) == 0:
        return 0
    return 1 + sum((d - 1) * s for d, s in zip(shape, strides))


def is_row_major(shape, strides) -> bool:
    expected = 1
    for d, s in zip(reversed(shape), reversed(strides)):
        if d != 1 and s != expected:
            return False
        expected *= d
    return True


def row_major_strides(shape) -> tuple:
    """The strides of a contiguous tensor of ``shape`` (size-0 dims counted as 1, as torch does)."""
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


def dense_permutation(shape, strides) -> tuple[int, ...] | None:
    """The dim order (outermost first) of a dense, non-overlapping layout, or None if there is none."""
    perm = tuple(sorted(range(len(shape)), key=lambda d: (-strides[d], -shape[d])))
    expected = 1
    for d in reversed(perm):
        if shape[d] != 1 and strides[d] != expected:
            return None
        expected *= shape[d]
    return perm


def trace(fn, specs: list[TensorSpec]) -> torch.fx.GraphModule:
    """FX graph of ``fn`` (tensors -> flat list of tensors or None) on fake inputs of ``specs``."""
    examples = [torch.empty(shape, dtype=dtype) for shape, _strides, dtype in specs]
    try:
        return make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*examples)
    except Exception as err:  # noqa: BLE001 - an op make_fx cannot trace (data-dependent...)
        raise NotLowerable(f"cannot trace: {type(err).__name__}: {err}") from None


def graph_for(fn, specs: list[TensorSpec], out_perms: list, name: str) -> tuple[Graph, list[int]]:
    """The graph of ``fn`` over buffers: inputs ``in{i}``, outputs ``out{j}``, one per result of
    ``fn`` that is not None (``out_perms[r]``: the dim order of result r's buffer, None for
    row-major). Also returns the positions of ``fn``'s None results, which have no graph output."""
    gm = trace(fn, specs)
    examples = [torch.empty(shape, dtype=dtype) for shape, _strides, dtype in specs]
    try:
        body = from_fx(gm, examples)
    except FrontendError as err:
        raise NotLowerable(str(err)) from None
    none_positions = list(getattr(body, "none_outputs", None) or [])
    perms = [perm for r, perm in enumerate(out_perms) if r not in none_positions]
    return _over_buffers(body, specs, perms, name), none_positions


def _over_buffers(body: Graph, specs, out_perms, name: str) -> Graph:
    g = Graph(name)
    mapping = {}
    for i, (value, (shape, strides, dtype)) in enumerate(zip(body.inputs, specs)):
        dt = sim_dtype(dtype)
        if is_row_major(shape, strides):
            mapping[value.id] = g.add_input(f"in{i}", tuple(shape), dt)
        else:
            flat = g.add_input(f"in{i}", (storage_span(shape, strides),), dt)
            mapping[value.id] = g.add1("as_strided", flat, shape=tuple(shape), strides=tuple(strides), offset=0)
    for node in body.nodes:
        outs = g.add(node.op, [mapping[v.id] for v in node.inputs], node.attrs, node.location)
        for old, new in zip(node.outputs, outs):
            mapping[old.id] = new
    outputs = []
    for value, perm in zip(body.outputs, out_perms):
        out = mapping[value.id]
        if perm is not None and list(perm) != sorted(perm):
            out = g.add1("transpose", out, perm=tuple(perm))
        outputs.append(out)
    g.set_outputs(outputs, [f"out{j}" for j in range(len(outputs))])
    return g
