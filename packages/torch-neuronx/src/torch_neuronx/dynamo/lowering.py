"""An AOTAutograd graph's device part -> one ``neuron_sim`` graph (through torch-mlir StableHLO).

The device nodes are copied into a graph of their own whose placeholders are what the device
part reads from elsewhere (the call's neuron tensors, host values, random draws, the keys of
dropout draws, graph constants). That graph is re-traced with ``make_fx`` on CPU fake tensors and neuronx-cc's
decomposition table, so it arrives as the core ATen torch-mlir lowers, and each node keeps its
user source line (``preserve_node_meta``) for error messages. The eager path's tracing helpers do
the rest: torch-mlir import, buffers bound by layout (``compiled.tracing``).
"""

from __future__ import annotations

import operator
import re
from dataclasses import dataclass

import torch
from neuronxcc.frontend import FrontendError, LoweringStopped, from_fx
from neuronxcc.frontend.fx import sdpa_math
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx import traceback as fx_traceback
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._pytree import tree_map

from ..compiled.tracing import _over_buffers, dense_permutation, is_row_major
from .decompositions import decompositions
from .errors import NeuronCompileError, source_line
from .partition import ARG, CONSTANT, DEVICE, DROPOUT, HOST, RANDOM, Partition

_CPU = torch.device("cpu")


@dataclass(frozen=True)
class Source:
    """Where a device-graph input comes from at call time: ``arg`` (the call's argument at
    ``ref``), ``host`` / ``random`` / ``constant`` (the value of node ``ref``), ``key`` (the
    Philox key - seed, offset - of dropout node ``ref``'s draw)."""

    kind: str
    ref: object


@dataclass
class DeviceModule:
    gm: fx.GraphModule  # placeholders in ``sources`` order; returns the values of ``outputs``
    sources: list[Source]
    outputs: list[fx.Node]  # the AOT graph's nodes the NEFF writes
    passthrough: dict  # AOT output node -> index of the source it is (an input returned as it is)


def device_module(part: Partition) -> DeviceModule:
    graph = fx.Graph()
    env: dict[fx.Node, fx.Node] = {}
    sources: list[Source] = []
    placeholders = {n: i for i, n in enumerate(part.placeholders)}

    def external(node: fx.Node, kind: str, ref) -> fx.Node:
        key = (kind, node)
        if key not in env:
            ph = graph.placeholder(f"in{len(sources)}_{node.name}")
            ph.meta = {k: node.meta[k] for k in ("val", "stack_trace") if k in node.meta}
            sources.append(Source(kind, ref))
            env[key] = ph
        return env[key]

    def value_of(node: fx.Node) -> fx.Node:
        if node in env:
            return env[node]
        kind = part.kind[node]
        if kind == ARG:
            return external(node, "arg", placeholders[node])
        if kind in (HOST, RANDOM, CONSTANT):
            return external(node, kind, node)
        raise AssertionError(f"{node} ({kind}) read before it is computed")

    dropouts: dict[fx.Node, tuple[fx.Node, fx.Node]] = {}
    for node in part.gm.graph.nodes:
        kind = part.kind.get(node)
        if kind == DROPOUT:
            # The mask is computed in the NEFF from the draw's key (seed, offset: an input), by the
            # op eager dropout runs: the same numbers for the same draw.
            x, p = node.args[0], node.args[1] if len(node.args) > 1 else node.kwargs["p"]
            key = external(node, "key", node)
            key.meta = {}
            pair = graph.call_function(torch.ops.neuron_rng.dropout.default, (value_of(x), key, float(p)))
            out, mask = (graph.call_function(operator.getitem, (pair, i)) for i in (0, 1))
            for n in (pair, out, mask):
                n.meta = {k: node.meta[k] for k in ("stack_trace",) if k in node.meta}
            dropouts[node] = (out, mask)
        elif kind == DEVICE:
            if node.target is operator.getitem and node.args[0] in dropouts:
                env[node] = dropouts[node.args[0]][node.args[1]]
                continue
            new = graph.node_copy(node, value_of)
            # The re-trace runs on CPU fake tensors: factories must make CPU tensors too.
            new.args = tree_map(lambda a: _CPU if isinstance(a, torch.device) else a, new.args)
            new.kwargs = tree_map(lambda a: _CPU if isinstance(a, torch.device) else a, new.kwargs)
            env[node] = new
    # A placeholder returned as it is would be an output the NEFF never writes: handed back directly.
    inputs = {ph: i for i, ph in enumerate(n for n in graph.nodes if n.op == "placeholder")}
    passthrough = {n: inputs[env[n]] for n in part.device_outputs if env[n] in inputs}
    outputs = [n for n in part.device_outputs if n not in passthrough]
    graph.output(tuple(env[n] for n in outputs))
    return DeviceModule(fx.GraphModule(part.gm, graph), sources, outputs, passthrough)


def output_perm(value: torch.Tensor):
    """The dim order of an output buffer: None for row-major, else its dense permutation (a
    non-dense layout - expanded, gapped - is written row-major)."""
    shape, strides = tuple(value.shape), tuple(value.stride())
    return None if is_row_major(shape, strides) else dense_permutation(shape, strides)


def to_graph(dm: DeviceModule, specs: list, out_perms: list, name: str, aot_gm: fx.GraphModule):
    """The ``neuron_sim`` graph of ``dm`` over buffers of ``specs`` ((shape, strides, dtype) per
    source); NeuronCompileError naming the op and its source line when it cannot be lowered."""
    def run(*inputs):
        with fx_traceback.preserve_node_meta():
            return fx.Interpreter(dm.gm).run(*inputs)

    # A fake mode of our own, without a ShapeEnv: under AOTAutograd's tracing context (a lazily
    # compiled backward) make_fx's own fake mode would make every size symbolic, and torch-mlir
    # then lowers dynamic shapes.
    mode = FakeTensorMode()
    with mode:
        fakes = [torch.empty(shape, dtype=dtype) for shape, _strides, dtype in specs]
    try:
        with torch._guards.tracing(None), mode, sdpa_math():
            traced = make_fx(run, decomposition_table=decompositions(), tracing_mode="real")(*fakes)
    except Exception as err:  # noqa: BLE001 - what make_fx cannot trace, reported at its node
        raise _trace_error(err, aot_gm, name) from err
    # Keep the user's source line only: other preserved metadata (the original node's value,
    # ``original_aten``) describes the node before decomposition and misleads torch-mlir.
    for node in traced.graph.nodes:
        node.meta = {k: v for k, v in node.meta.items() if k in ("val", "tensor_meta", "stack_trace")}
    try:
        body = from_fx(traced, None, func_name="main")  # already decomposed: a failure is final
    except LoweringStopped as err:  # a crash or a bound of torch-mlir's pipeline: no op to blame
        raise NeuronCompileError(err.op, err.reason, graph=name) from None
    except FrontendError as err:
        op = getattr(err, "op", "torch-mlir")
        named = re.search(r'name = "(?:torch\.)?([\w.]+)"', str(err))  # torch.operator "torch.aten.foo"
        if named:
            op = named.group(1)
        raise NeuronCompileError(op, getattr(err, "reason", None) or str(err), getattr(err, "location", None)
                                 or _location_of(op, aot_gm), graph=name) from None
    if getattr(body, "none_outputs", None):
        raise NeuronCompileError("output", "the device graph returns None", graph=name)
    return _over_buffers(body, specs, out_perms, name)


def _location_of(op: str, gm: fx.GraphModule) -> str | None:
    """The source line of the first node of ``gm`` calling ``op`` (an ATen or torch-mlir name)."""
    short = op.removeprefix("torch.").removeprefix("aten.").split(".")[0]
    for node in gm.graph.nodes:
        if node.op == "call_function" and str(node.target).removeprefix("aten.").split(".")[0] == short:
            return source_line(node)
    return None


def _trace_error(err: Exception, gm: fx.GraphModule, name: str) -> NeuronCompileError:
    first = str(err).strip().splitlines()[0][:300] if str(err).strip() else type(err).__name__
    return NeuronCompileError(type(err).__name__, f"cannot trace the graph: {first}", graph=name)
