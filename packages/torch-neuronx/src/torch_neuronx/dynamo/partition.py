"""Splitting an AOTAutograd graph into what runs where.

A graph AOTAutograd hands the backend computes mostly on ``neuron`` tensors, but not only:

* **host nodes** compute on CPU tensors: 0-dim scalars a program keeps on the host (the ``step``
  counters of a non-capturable optimizer, a learning rate) and everything derived from them.
  They run on the host before the launch, as eager runs them; the values the device part reads
  are uploaded as inputs of the NEFF.
* **dropout nodes**: the draw is reserved from the device's generator before the launch, in
  graph order, as eager reserves it; its key (seed, offset) is an input of the NEFF, which
  computes the mask (Philox, the op eager dropout runs) and the masking - compiled and eager
  training see the same masks.
* **random nodes** (``rand``, ``bernoulli``) draw on the device from the device's generator
  before the launch, in graph order, as eager draws them, and enter the NEFF as inputs.
* **input mutations** (``copy_(argument, new value)`` at the end of a graph: AOTAutograd keeps
  them in the graph, ``keep_inference_input_mutations``; an optimizer step updating parameters and
  states): the NEFF writes the new value straight into the argument's memory where that is safe
  (``runtime``), else the value is copied into it after the launch. A host argument's mutation
  runs on the host after the launch.
* everything else is the **device graph**, compiled into one NEFF.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import torch
from torch import fx

from ..compiled.tracing import dense_permutation, is_row_major
from .errors import unsupported

ARG, HOST, RANDOM, CONSTANT, DEVICE, DROPOUT = "arg", "host", "random", "constant", "device", "dropout"
MUTATION = "mutation"

# Random ops whose tensor argument only gives the result's shape, dtype and device: they can be
# drawn before the launch even when that argument is computed inside the graph.
METADATA_ONLY_RANDOM = {"aten::native_dropout", "aten::rand_like", "aten::randn_like", "aten::randint_like"}


def is_view(node: fx.Node) -> bool:
    """An ATen call whose result aliases its first argument (view, permute, expand, select...)."""
    if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
        return False
    returns = node.target._schema.returns
    return len(returns) == 1 and returns[0].alias_info is not None and not returns[0].alias_info.is_write


def is_dropout(node: fx.Node) -> bool:
    """Training dropout: its draw is reserved before the launch (as eager reserves it), its mask
    and scaling are computed in the NEFF (its input is usually computed in the graph)."""
    if node.op != "call_function" or node.target is not torch.ops.aten.native_dropout.default:
        return False
    p = node.args[1] if len(node.args) > 1 else node.kwargs.get("p")
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train", True)
    return train is not False and isinstance(p, (int, float)) and 0 < p < 1


def is_input_mutation(node: fx.Node) -> bool:
    """``copy_(placeholder, value)``: AOTAutograd's write of a mutated argument's new value."""
    return (node.op == "call_function" and node.target is torch.ops.aten.copy_.default
            and isinstance(node.args[0], fx.Node) and node.args[0].op == "placeholder"
            and isinstance(node.args[1], fx.Node) and not node.kwargs.get("non_blocking", False))


def is_random(node: fx.Node) -> bool:
    return (node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded in node.target.tags)


def devices_of(value) -> set[str]:
    if isinstance(value, torch.Tensor):
        return {value.device.type}
    if isinstance(value, (list, tuple)):
        return set().union(set(), *(devices_of(v) for v in value))
    return set()


@dataclass
class Partition:
    gm: fx.GraphModule
    placeholders: list[fx.Node]
    outputs: list  # the output node's flat list: fx.Node or None
    kind: dict = field(default_factory=dict)  # node -> ARG / HOST / RANDOM / CONSTANT / DEVICE / DROPOUT
    device_outputs: list = field(default_factory=list)  # device nodes the NEFF writes, in output order
    input_views: dict = field(default_factory=dict)  # output node -> (placeholder, view nodes to replay)
    # output node -> (device node, view nodes to replay): a broadcast or gapped view of a computed value
    output_views: dict = field(default_factory=dict)
    mutations: dict = field(default_factory=dict)  # copy_ node -> (placeholder it writes, node of the new value)

    def nodes_of(self, kind: str) -> list[fx.Node]:
        return [n for n in self.gm.graph.nodes if self.kind.get(n) == kind]


def partition(gm: fx.GraphModule) -> Partition:
    """Classify every node of ``gm``; raises NeuronCompileError for what cannot run compiled."""
    nodes = list(gm.graph.nodes)
    out_node = nodes[-1]
    outputs = out_node.args[0]
    outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
    part = Partition(gm, [n for n in nodes if n.op == "placeholder"], outputs)
    kind = part.kind
    for node in nodes:
        if node.op == "output":
            continue
        if node.op == "placeholder":
            value = node.meta.get("val")
            kind[node] = ARG if devices_of(value) == {"neuron"} else HOST
        elif node.op == "get_attr":
            if not isinstance(getattr(gm, node.target), torch.Tensor):
                raise unsupported(node, f"a graph attribute of type {type(getattr(gm, node.target)).__name__}")
            kind[node] = CONSTANT
        elif node.op != "call_function":
            raise unsupported(node, f"an FX {node.op} node (AOTAutograd graphs hold ATen calls only)")
        elif is_input_mutation(node):
            target = node.args[0]
            if any(u.op != "output" for u in node.users):
                raise unsupported(node, "a graph that reads an argument after writing it")
            kind[node] = MUTATION
            part.mutations[node] = (target, node.args[1])
        elif node.target is operator.getitem and kind.get(node.args[0]) in (HOST, RANDOM):
            kind[node] = kind[node.args[0]]
        elif is_dropout(node):
            kind[node] = DROPOUT
        elif is_random(node):
            _check_random(node, kind)
            kind[node] = RANDOM
        elif _is_host(node, kind):
            kind[node] = HOST
        else:
            _check_device(node, kind)
            kind[node] = DEVICE

    # A view of an argument (a transposed weight saved for the backward) is made by replaying its
    # view ops on the real argument after the launch: zero-copy, with eager's strides. A view of a
    # computed value with no dense layout (``(x * 2).expand(2, 3)``: a stride 0) is replayed the
    # same way on the NEFF's result for the value it views, so it keeps eager's strides and aliasing
    # instead of being written out row-major. Other outputs, dense views of computed values
    # included, are written by the NEFF with their traced strides.
    for out in outputs:
        found = _view_chain(out, kind)
        if found is not None and kind.get(found[0]) == ARG:
            part.input_views[out] = found
        elif found is not None and kind.get(found[0]) == DEVICE and not _dense(out.meta.get("val")):
            part.output_views[out] = found
    written = [*(part.output_views[o][0] if o in part.output_views else o for o in outputs),
               *(value for _target, value in part.mutations.values())]
    part.device_outputs = list(dict.fromkeys(o for o in written if kind.get(o) == DEVICE and o not in part.input_views))
    return part


def _dense(value) -> bool:
    """Whether a traced tensor's elements fill their storage span one to one, in some dim order."""
    if not isinstance(value, torch.Tensor):
        return True
    shape, strides = tuple(value.shape), tuple(value.stride())
    return is_row_major(shape, strides) or dense_permutation(shape, strides) is not None


def _view_chain(node, kind: dict):
    """(base, view nodes from it to ``node``) when ``node`` is device views of ``base``, each taking
    nothing else from the graph; else None."""
    chain = []
    while isinstance(node, fx.Node) and kind.get(node) == DEVICE and is_view(node):
        if any(n is not node.args[0] for n in node.all_input_nodes):
            return None
        chain.append(node)
        node = node.args[0]
    if not chain or not isinstance(node, fx.Node):
        return None
    return node, chain[::-1]


def _is_host(node: fx.Node, kind: dict) -> bool:
    """A call on host values whose result is on the host. A CPU factory (``scalar_tensor(...,
    device='cpu')``) read only by device nodes is a constant of the device graph instead."""
    if devices_of(node.meta.get("val")) - {"cpu"}:
        return False
    if not isinstance(node.meta.get("val"), (torch.Tensor, list, tuple)):
        return any(kind.get(n) == HOST for n in node.all_input_nodes)  # a Python value of host values
    reads = [kind.get(n) for n in node.all_input_nodes]
    if any(k == HOST for k in reads):
        return True
    if any(k != CONSTANT for k in reads):
        return False
    return not node.users or any(u.op == "output" or devices_of(u.meta.get("val")) == {"cpu"} for u in node.users)


def _check_device(node: fx.Node, kind: dict) -> None:
    if devices_of(node.meta.get("val")) == {"cpu"} and any(kind.get(n) in (ARG, DEVICE, RANDOM) for n in node.all_input_nodes):
        raise unsupported(node, "a copy from the device to the host inside the graph (it would wait for the device)")
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and any(a.alias_info is not None and a.alias_info.is_write
                                                          for a in target._schema.arguments):
        raise unsupported(node, "an in-place op left in a functional graph")


def _check_random(node: fx.Node, kind: dict) -> None:
    """Random draws run before the launch: their arguments must be known by then."""
    if node.target._schema.name in METADATA_ONLY_RANDOM:
        return
    if all(kind.get(n) in (ARG, HOST, CONSTANT) for n in node.all_input_nodes):
        return
    raise unsupported(node, "a random op whose distribution depends on values computed inside the graph "
                            "(random numbers are drawn before the NEFF runs)")
