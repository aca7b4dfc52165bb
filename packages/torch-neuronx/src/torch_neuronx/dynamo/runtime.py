"""A compiled AOTAutograd graph: what runs before the launch, the launch, and its results.

Per call (boxed: AOTAutograd hands over the argument list and we free it):

1. host nodes run on their CPU values, then random ops draw on the device and dropout nodes
   reserve their draws (the NEFF computes their masks from the keys), in graph order, as eager
   draws them (same generator, same order: compiled and eager training see the same numbers);
2. the NEFF of the device graph for these input layouts is launched on the current stream, its
   inputs and outputs bound zero-copy to the tensors' device memory;
3. the graph's outputs are assembled: NEFF results, inputs passed through, views of inputs
   (replayed on the real tensors), broadcast views of NEFF results (replayed on them), host
   values, draws.

A call whose input strides differ from the compiled ones compiles a variant for them (logged).
"""

from __future__ import annotations

import operator
import time

import torch
from neuronxcc.compiler import CompileError, compile_neff
from torch import fx

from ..compiled.entry import CompiledNeff, OutputSpec
from ..compiled.in_place import in_place_pairs, may_write_in_place
from ..compiled.tracing import row_major_strides, storage_span
from ..device import state as _state
from ..device.random import default_generator, reserve
from ..execution import launch_neff
from ..kernels.random import philox
from . import metrics
from .errors import NeuronCompileError
from .graph_cache import CACHE, graph_key
from .host_operands import operand_builder
from .lowering import DeviceModule, device_module, output_perm, to_graph
from .partition import ARG, CONSTANT, DROPOUT, HOST, RANDOM, partition


class CompiledGraph:
    """``__call__(args)`` runs the AOTAutograd graph ``gm`` on the NeuronCore (boxed convention)."""

    def __init__(self, gm: fx.GraphModule, example_inputs, name: str, kind: str):
        # An instance attribute: dynamo's disable() wrapper copies __dict__, not class attributes.
        self._boxed_call = True
        self.gm, self.name, self.kind = gm, name, kind
        self.ops = sum(n.op == "call_function" for n in gm.graph.nodes)
        self.part = partition(gm)
        self.dm: DeviceModule = device_module(self.part)
        self._operand_builders: dict = {}
        self.pre_launch = [n for n in gm.graph.nodes
                           if n.op == "call_function" and self.part.kind.get(n) in (HOST, RANDOM, DROPOUT)]
        self.placeholder_index = {n: i for i, n in enumerate(self.part.placeholders)}
        self.out_layouts = [self._layout(n.meta["val"]) for n in self.dm.outputs]
        self.mutation_candidates = self._mutation_candidates()
        self.mutated = {target for target, _value in self.part.mutations.values()}
        self._variants: dict[tuple, CompiledNeff] = {}
        self._constants: dict[str, torch.Tensor] = {}
        self.device = next((t.device for t in example_inputs if isinstance(t, torch.Tensor) and t.device.type == "neuron"),
                           None)
        if self.dm.outputs:  # a graph of host work and aliases only has nothing to launch
            self._variant(tuple(self._spec_of_source(src, example_inputs) for src in self.dm.sources))
        else:
            metrics.record(metrics.GraphRecord(name, kind, self.ops, "host", 0.0))

    # -- compile ---------------------------------------------------------------------------
    def _mutation_candidates(self) -> list[int]:
        """The NEFF outputs j that overwrite a device argument of the graph: written straight into
        it where the in-place plan allows it (``compiled.in_place``: the compiler's aliasing facts
        and the call's tensors)."""
        out_index = {n: j for j, n in enumerate(self.dm.outputs)}
        values = [value for _target, value in self.part.mutations.values()]
        candidates = []
        for target, value in self.part.mutations.values():
            if (self.part.kind.get(target) != ARG or value not in out_index or values.count(value) > 1
                    or value in self.part.outputs):
                continue  # a user output would alias the argument, or one value written twice
            candidates.append(out_index[value])
        return candidates

    @staticmethod
    def _layout(value: torch.Tensor) -> tuple:
        shape, perm = tuple(value.shape), output_perm(value)
        strides = tuple(value.stride()) if perm is not None or tuple(value.stride()) == row_major_strides(shape) else row_major_strides(shape)
        return shape, strides, value.dtype, perm

    def _spec_of_source(self, src, example_inputs) -> tuple:
        if src.kind == "arg":
            t = example_inputs[src.ref]
            return tuple(t.shape), tuple(t.stride()), t.dtype
        if src.kind == "constant":
            t = getattr(self.gm, src.ref.target)
            return tuple(t.shape), tuple(t.stride()), t.dtype
        if src.kind == "key":
            return (4,), (1,), torch.int32
        value = src.ref.meta["val"]
        if src.kind == "host":  # uploaded contiguous
            return tuple(value.shape), row_major_strides(value.shape), value.dtype
        return tuple(value.shape), tuple(value.stride()), value.dtype

    def _variant(self, specs: tuple) -> CompiledNeff:
        entry = self._variants.get(specs)
        if entry is not None:
            return entry
        started = time.perf_counter()
        arch = _state.bridge().runtime.config.arch
        key = graph_key(self.dm.gm.code + repr(self.mutation_candidates), list(specs),
                        [lay[:3] for lay in self.out_layouts], arch.name)
        entry, where = CACHE.get(key)
        if entry is None:
            graph = to_graph(self.dm, list(specs), [lay[3] for lay in self.out_layouts], self.name, self.gm)
            try:
                neff = compile_neff(graph, arch, name=self.name)
            except CompileError as err:
                raise NeuronCompileError(getattr(err, "op", None) or "graph", str(err), getattr(err, "location", None),
                                         graph=self.name, rule=err.rule) from None
            outputs = [OutputSpec(shape, strides, dtype, storage_span(shape, strides) * dtype.itemsize)
                       for shape, strides, dtype, _ in self.out_layouts]
            entry = CACHE.put(key, CompiledNeff(neff, [storage_span(s, st) * d.itemsize for s, st, d in specs], outputs))
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
            results, written = self._launch(entry, inputs, args)
            for node, tensor in zip(self.dm.outputs, results):
                values[node] = tensor
        else:
            written = set()
        for node, (base, chain) in self.part.input_views.items():
            t = args[self.placeholder_index[base]]
            for view in chain:
                t = view.target(t, *view.args[1:], **view.kwargs)
            values[node] = t

        def result(node):
            if node in self.dm.passthrough:
                return inputs[self.dm.passthrough[node]]
            if node in values:
                return values[node]
            if node in self.part.mutations:  # copy_ returns the argument it wrote
                node = self.part.mutations[node][0]
            return args[self.placeholder_index[node]]

        for node, (base, chain) in self.part.output_views.items():  # broadcast views of computed values
            t = result(base)
            for view in chain:
                t = view.target(t, *view.args[1:], **view.kwargs)
            values[node] = t

        # Mutations the NEFF did not write in place: copied in after the launch (queue order).
        for target, value in self.part.mutations.values():
            if value not in written:
                args[self.placeholder_index[target]].copy_(result(value))
        return [node if node is None or not isinstance(node, fx.Node) else result(node) for node in self.part.outputs]

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

        keys: list = []
        for node in self.pre_launch:
            kind = self.part.kind[node]
            if kind == DROPOUT:  # its draw reserved in graph order, as eager reserves it
                keys.append((node, philox.key_words(*reserve(default_generator(self._device(args))))))
            elif node.op == "call_function" and node.target is operator.getitem:
                values[node] = value(node.args[0])[node.args[1]]
            else:
                args_of, kwargs_of = self._operands_of(node)
                values[node] = node.target(*args_of(value), **kwargs_of(value))
        if keys:  # every dropout's key in one upload
            packed = torch.tensor([words for _node, words in keys], dtype=torch.int32).to(self._device(args))
            values.update({node: packed[i] for i, (node, _words) in enumerate(keys)})
        return values

    def _operands_of(self, node: fx.Node):
        """(args, kwargs) builders of a host node, from a function giving each operand node's value:
        made once per node (tree_map walked every argument structure on every call, ~20 us per
        node: an optimizer step has a thousand host nodes, its bias corrections)."""
        builders = self._operand_builders.get(node)
        if builders is None:
            builders = self._operand_builders[node] = (operand_builder(node.args), operand_builder(node.kwargs))
        return builders

    def _input(self, src, args, values) -> torch.Tensor:
        if src.kind == "arg":
            return args[src.ref]
        if src.kind == "constant":
            name = src.ref.target
            if name not in self._constants:
                self._constants[name] = getattr(self.gm, name).to(self._device(args))
            return self._constants[name]
        if src.ref.op == "placeholder":  # a host argument (a CPU scalar tensor)
            t = args[self.placeholder_index[src.ref]]
            return t.clone() if src.ref in self.mutated else t  # its old value, whatever the upload's timing
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

    def _launch(self, entry: CompiledNeff, inputs: list[torch.Tensor], args: list) -> tuple[list[torch.Tensor], set]:
        """(the NEFF's outputs, the mutation values it wrote straight into their arguments)."""
        device = self.device
        buffers = {f"in{i}": (t, n) for i, (t, n) in enumerate(zip(inputs, entry.in_nbytes))}
        in_place = self._in_place_targets(entry, inputs, args)
        results = []
        for j, spec in enumerate(entry.outputs):
            out = in_place.get(j)
            if out is None:
                out = torch.empty_strided(spec.shape, spec.strides, dtype=spec.dtype, device=device)
            buffers[f"out{j}"] = (out, spec.nbytes)
            results.append(out)
        launch_neff(entry.neff, buffers, device=device, name=self.name, context=f"torch.compile graph {self.name}",
                    framework="torch.compile")
        return results, {self.dm.outputs[j] for j in in_place}

    def _in_place_targets(self, entry: CompiledNeff, inputs: list[torch.Tensor], args: list) -> dict:
        """Output j -> the argument it overwrites, for the mutations the NEFF may write in place:
        the argument is on the device with the output's dtype and shape, and the in-place plan
        allows it (the graph reads the argument only at each element's own index, nothing else in
        the call shares its memory)."""
        if not self.mutation_candidates:
            return {}
        by_value = {value: target for target, value in self.part.mutations.values()}
        candidates = {}
        for j in self.mutation_candidates:
            t = args[self.placeholder_index[by_value[self.dm.outputs[j]]]]
            spec = entry.outputs[j]
            if t.device == self.device and t.dtype == spec.dtype and tuple(t.shape) == spec.shape:
                candidates[j] = t
        pairs = in_place_pairs(entry.neff)
        written = list(candidates.values())
        return {j: t for j, t in candidates.items()
                if may_write_in_place(pairs, j, t, entry.outputs[j].strides, inputs, written)}

def _device_us(timing) -> float:
    return float(timing.get("total_time_ns", 0.0)) / 1e3 if isinstance(timing, dict) else 0.0
