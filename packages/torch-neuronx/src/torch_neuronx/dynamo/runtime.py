"""A compiled AOTAutograd graph: what runs before the launch, the launch, and its results.

Per call (boxed: AOTAutograd hands over the argument list and we free it):

1. host nodes run on their CPU values, then random draws are made on the device and dropout masks
   on the host with the device's generator, in graph order, as eager makes them (same generator,
   same order: compiled and eager training see the same numbers); the masks are uploaded together
   in one host-to-device copy;
2. the NEFF of the device graph for these input layouts is launched on the current stream, its
   inputs and outputs bound zero-copy to the tensors' device memory;
3. the graph's outputs are assembled: NEFF results, inputs passed through, views of inputs
   (replayed on the real tensors), host values, draws.

A call whose input strides differ from the compiled ones compiles a variant for them (logged).
"""

from __future__ import annotations

import operator
import time

import torch
from torch import fx
from torch.utils._pytree import tree_map

from .. import _state
from ..compiled.tracing import storage_span
from ..ops import fallback, kernels
from . import metrics
from .errors import NeuronCompileError
from .graph_cache import CACHE, GraphNeff, OutputBuffer, graph_key
from .lowering import DeviceModule, device_module, output_perm, to_graph
from .partition import CONSTANT, DROPOUT, HOST, RANDOM, partition

_MASK_ALIGN = 64  # bytes between the masks packed into one upload


def _row_major(shape) -> tuple:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


class CompiledGraph:
    """``__call__(args)`` runs the AOTAutograd graph ``gm`` on the NeuronCore (boxed convention)."""

    def __init__(self, gm: fx.GraphModule, example_inputs, name: str, kind: str):
        # An instance attribute: dynamo's disable() wrapper copies __dict__, not class attributes.
        self._boxed_call = True
        self.gm, self.name, self.kind = gm, name, kind
        self.ops = sum(n.op == "call_function" for n in gm.graph.nodes)
        self.part = partition(gm)
        self.dm: DeviceModule = device_module(self.part)
        self.pre_launch = [n for n in gm.graph.nodes
                           if n.op == "call_function" and self.part.kind.get(n) in (HOST, RANDOM, DROPOUT)]
        self.placeholder_index = {n: i for i, n in enumerate(self.part.placeholders)}
        self.out_layouts = [self._layout(n.meta["val"]) for n in self.dm.outputs]
        self._variants: dict[tuple, GraphNeff] = {}
        self._constants: dict[str, torch.Tensor] = {}
        self.device = next((t.device for t in example_inputs if isinstance(t, torch.Tensor) and t.device.type == "neuron"),
                           None)
        if self.dm.outputs:  # a graph of host work and aliases only has nothing to launch
            self._variant(tuple(self._spec_of_source(src, example_inputs) for src in self.dm.sources))
        else:
            metrics.record(metrics.GraphRecord(name, kind, self.ops, "host", 0.0))

    # -- compile ---------------------------------------------------------------------------
    @staticmethod
    def _layout(value: torch.Tensor) -> tuple:
        shape, perm = tuple(value.shape), output_perm(value)
        strides = tuple(value.stride()) if perm is not None or tuple(value.stride()) == _row_major(shape) else _row_major(shape)
        return shape, strides, value.dtype, perm

    def _spec_of_source(self, src, example_inputs) -> tuple:
        if src.kind == "arg":
            t = example_inputs[src.ref]
            return tuple(t.shape), tuple(t.stride()), t.dtype
        if src.kind == "constant":
            t = getattr(self.gm, src.ref.target)
            return tuple(t.shape), tuple(t.stride()), t.dtype
        value = src.ref.meta["val"][1] if src.kind == "mask" else src.ref.meta["val"]
        if src.kind == "host":  # uploaded contiguous
            return tuple(value.shape), _row_major(value.shape), value.dtype
        return tuple(value.shape), tuple(value.stride()), value.dtype

    def _variant(self, specs: tuple) -> GraphNeff:
        entry = self._variants.get(specs)
        if entry is not None:
            return entry
        from neuronxcc.compiler import CompileError, compile_neff

        started = time.perf_counter()
        arch = _state.bridge().runtime.config.arch
        key = graph_key(self.dm.gm.code, list(specs), [lay[:3] for lay in self.out_layouts], arch.name)
        entry, where = CACHE.get(key)
        if entry is None:
            graph = to_graph(self.dm, list(specs), [lay[3] for lay in self.out_layouts], self.name, self.gm)
            try:
                neff = compile_neff(graph, arch, name=self.name)
            except CompileError as err:
                raise NeuronCompileError(getattr(err, "op", None) or "graph", str(err), getattr(err, "location", None),
                                         graph=self.name) from None
            outputs = [OutputBuffer(shape, strides, dtype, storage_span(shape, strides) * _itemsize(dtype))
                       for shape, strides, dtype, _ in self.out_layouts]
            entry = GraphNeff(neff, [storage_span(s, st) * _itemsize(d) for s, st, d in specs], outputs)
            CACHE.put(key, entry)
            where = "compiled"
        self._variants[specs] = entry
        timing = entry.neff.timing_summary or {}
        metrics.record(metrics.GraphRecord(self.name if len(self._variants) == 1 else f"{self.name} (variant {len(self._variants)})",
                                           self.kind, self.ops, where, time.perf_counter() - started,
                                           len(entry.neff.program.instructions), _device_us(timing)))
        return entry

    # -- run -------------------------------------------------------------------------------
    def __call__(self, args: list):
        args = list(args)
        values = self._run_pre_launch(args)
        inputs = [self._input(src, args, values) for src in self.dm.sources]
        if self.dm.outputs:
            self._upload_host_values(inputs)
            specs = tuple((tuple(t.shape), tuple(t.stride()), t.dtype) for t in inputs)
            entry = self._variants.get(specs) or self._variant(specs)
            for node, tensor in zip(self.dm.outputs, self._launch(entry, inputs)):
                values[node] = tensor
        for node, (base, chain) in self.part.input_views.items():
            t = args[self.placeholder_index[base]]
            for view in chain:
                t = view.target(t, *view.args[1:], **view.kwargs)
            values[node] = t
        out = []
        for node in self.part.outputs:
            if node is None or not isinstance(node, fx.Node):
                out.append(node)
            elif node in self.dm.passthrough:
                out.append(inputs[self.dm.passthrough[node]])
            elif node in values:
                out.append(values[node])
            else:
                out.append(args[self.placeholder_index[node]])
        return out

    def _run_pre_launch(self, args: list) -> dict:
        values: dict = {}

        def value(n):
            if not isinstance(n, fx.Node):
                return n
            if n in values:
                return values[n]
            if n.op == "placeholder":
                return args[self.placeholder_index[n]]
            if self.part.kind.get(n) == CONSTANT:
                return getattr(self.gm, n.target)
            # Metadata-only operand computed in the graph (rand_like(x)): a tensor of its shape.
            meta = n.meta["val"]
            return torch.empty_strided(meta.shape, meta.stride(), dtype=meta.dtype, device=self._device(args))

        masks: list = []
        for node in self.pre_launch:
            kind = self.part.kind[node]
            if kind == DROPOUT:
                masks.append((node, self._draw_mask(node)))
            elif node.op == "call_function" and node.target is operator.getitem:
                values[node] = value(node.args[0])[node.args[1]]
            else:
                values[node] = node.target(*tree_map(value, node.args), **tree_map(value, node.kwargs))
        if masks:
            values.update(self._upload_masks(masks))
        return values

    def _draw_mask(self, node: fx.Node) -> torch.Tensor:
        """The bool mask of dropout ``node`` drawn on the host as eager's native_dropout draws it
        (ops/kernels.py: ``bernoulli_(1 - p)`` on the device generator's state, the input's
        layout), so compiled and eager runs see the same masks; the masking and scaling are in the
        NEFF."""
        mask = node.meta["val"][1]
        p = node.args[1] if len(node.args) > 1 else node.kwargs["p"]
        drawn = torch.empty_strided(mask.shape, mask.stride(), dtype=torch.bool)
        with fallback.device_generator(self._device(None)) as generator:
            drawn.bernoulli_(1.0 - p, generator=generator)
        return drawn

    def _upload_masks(self, masks: list) -> dict:
        """All of a call's masks cross the host link in one upload (one copy, not one per mask):
        each mask is a view of the packed device buffer, with its own layout."""
        offsets, total = [], 0
        for _node, drawn in masks:
            offsets.append(total)
            total += -(-storage_span(drawn.shape, drawn.stride()) // _MASK_ALIGN) * _MASK_ALIGN
        host = torch.empty(total, dtype=torch.bool)
        for (_node, drawn), offset in zip(masks, offsets):
            host.as_strided(drawn.shape, drawn.stride(), offset).copy_(drawn)
        device = self._device(None)
        packed = torch.empty(total, dtype=torch.bool, device=device)
        kernels.submit_upload(_state.current_queue(device.index), packed, host)
        return {node: packed.as_strided(drawn.shape, drawn.stride(), offset)
                for (node, drawn), offset in zip(masks, offsets)}

    def _input(self, src, args, values) -> torch.Tensor:
        if src.kind == "arg":
            return args[src.ref]
        if src.kind == "constant":
            name = src.ref.target
            if name not in self._constants:
                self._constants[name] = getattr(self.gm, name).to(self._device(args))
            return self._constants[name]
        if src.ref.op == "placeholder":  # a host argument (a CPU scalar tensor)
            return args[self.placeholder_index[src.ref]]
        return values[src.ref]  # host values are uploaded together (_upload_host_values)

    def _upload_host_values(self, inputs: list) -> None:
        """Host values the device graph reads (an optimizer's bias corrections: one per parameter)
        cross the host link in one upload per dtype, the NEFF reading each through a view."""
        device = self._device(None)
        by_dtype: dict = {}
        for i, src in enumerate(self.dm.sources):
            if src.kind == "host":
                by_dtype.setdefault(inputs[i].dtype, []).append(i)
        for positions in by_dtype.values():
            host = [inputs[i] for i in positions]
            if len(host) == 1 or any(t.dim() for t in host):
                for i in positions:
                    inputs[i] = inputs[i].to(device)
                continue
            packed = torch.stack(host).to(device)
            for j, i in enumerate(positions):
                inputs[i] = packed[j]

    def _device(self, args) -> torch.device:
        if self.device is None:
            self.device = torch.device("neuron", _state.shim().current_device())
        return self.device

    def _launch(self, entry: GraphNeff, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        numpy_bytes = _state.bridge().numpy_bytes
        device = self.device
        buffers = {f"in{i}": numpy_bytes(t.data_ptr(), n) for i, (t, n) in enumerate(zip(inputs, entry.in_nbytes))}
        results = []
        for j, spec in enumerate(entry.outputs):
            out = torch.empty_strided(spec.shape, spec.strides, dtype=spec.dtype, device=device)
            buffers[f"out{j}"] = numpy_bytes(out.data_ptr(), spec.nbytes)
            results.append(out)
        _state.current_queue(device.index).launch(entry.neff, buffers, name=self.name, context=f"torch.compile graph {self.name}")
        return results


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _device_us(timing) -> float:
    return float(timing.get("total_time_ns", 0.0)) / 1e3 if isinstance(timing, dict) else 0.0
