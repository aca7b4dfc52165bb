"""Kernel calls inside compiled graphs: an AOTAutograd graph that calls an NKI kernel op is split
around each kernel's launch.

A kernel op (``torch_neuronx.nki_op``, or any operator registered through ``torch.library`` in a
namespace of its own) is opaque to torch-mlir: its body launches the kernel's own NEFF. So the
graph is cut into segments at each kernel call - with ``torch.fx.passes.split_module``, in graph
order - and

* every segment of ATen ops is compiled into one NEFF as any graph is (``runtime.CompiledGraph``:
  host values, random draws, in-place writes of arguments...);
* every kernel call runs as itself between them, on the real tensors, so its kernel's NEFF is
  launched on the current stream right after the previous segment's NEFF.

A custom op that mutates its arguments reaches the graph functionalized
(``higher_order.auto_functionalized``); that node is the kernel call then (it clones what the op
writes and calls it, as eager functionalization does). Getting items of a kernel call's results
stays with the call.
"""

from __future__ import annotations

import operator

import torch
from torch import fx
from torch.fx.passes.split_module import split_module

from .runtime import CompiledGraph

# Operator namespaces torch-mlir lowers; an operator of any other namespace is a kernel call.
LOWERED_NAMESPACES = frozenset({"aten", "prims"})
_FUNCTIONALIZED = tuple(getattr(torch.ops.higher_order, name) for name in ("auto_functionalized", "auto_functionalized_v2")
                        if hasattr(torch.ops.higher_order, name))


def kernel_op(node: fx.Node) -> torch._ops.OpOverload | None:
    """The kernel operator ``node`` calls (directly or functionalized), or None."""
    if node.op != "call_function":
        return None
    target = node.target
    if target in _FUNCTIONALIZED and node.args:
        target = node.args[0]
    if isinstance(target, torch._ops.OpOverload) and target.namespace not in LOWERED_NAMESPACES:
        return target
    return None


def has_kernel_calls(gm: fx.GraphModule) -> bool:
    return any(kernel_op(n) is not None for n in gm.graph.nodes)


def _segments(gm: fx.GraphModule) -> dict[fx.Node, int]:
    """Node -> segment number: kernel calls (with the items taken of their results) get a segment
    each, the ATen ops between them share one; numbers grow along the graph, so every segment
    reads only values of earlier segments or of the graph's arguments."""
    segment, current, kernel_of = {}, 0, {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output"):
            continue
        if kernel_op(node) is not None:
            current += 1
            segment[node] = kernel_of[node] = current
            current += 1
        elif node.target is operator.getitem and node.args and node.args[0] in kernel_of:
            segment[node] = kernel_of[node.args[0]]
        else:
            segment[node] = current
    return segment


class _Segment(torch.nn.Module):
    """A compiled ATen segment (a boxed callable: CompiledGraph or the eager fallback's function)
    as a module of the split graph, which calls it with its arguments unboxed."""

    def __init__(self, compiled):
        super().__init__()
        self.compiled = compiled

    def forward(self, *args):
        return tuple(self.compiled(list(args)))


class GraphWithKernels:
    """``__call__(args)`` runs an AOTAutograd graph holding kernel calls (boxed convention): its
    ATen segments as NEFFs, its kernel calls as themselves, in graph order on the current stream.

    ``compile_segment(gm, example_inputs, name, kind)`` compiles one ATen segment (the backend's
    compiler: a CompiledGraph, or its eager fallback)."""

    def __init__(self, gm: fx.GraphModule, name: str, kind: str, compile_segment=CompiledGraph):
        self._boxed_call = True  # an instance attribute, as CompiledGraph's
        self.name, self.kind = name, kind
        segment = _segments(gm)
        self.split = split_module(gm, None, lambda node: segment[node], keep_original_order=True, tuple_return=True)
        self.segments: list = []  # the compiled ATen segments, in graph order
        for child_name, child in list(self.split.named_children()):
            if any(kernel_op(n) is not None for n in child.graph.nodes):
                continue  # a kernel call: runs as itself
            examples = [n.meta["val"] for n in child.graph.nodes if n.op == "placeholder"]
            compiled = compile_segment(child, examples, f"{name}_{len(self.segments)}", kind)
            self.segments.append(compiled)
            setattr(self.split, child_name, _Segment(compiled))

    def __call__(self, args: list):
        values = list(args)
        args.clear()  # boxed: the caller's list is ours to free
        result = self.split(*values)
        return list(result) if isinstance(result, (list, tuple)) else [result]

