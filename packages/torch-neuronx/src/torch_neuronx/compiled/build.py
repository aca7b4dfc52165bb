"""Compiling one op signature into a launchable NEFF (the slow path, once per signature).

What the call must produce comes from the op's meta kernel on the call's own shapes and strides,
so results have CPU's shapes, dtypes and strides (and bad arguments raise CPU's errors). A
mutating overload (``add_``, ``add.out``, ``_foreach_mul_``) is compiled as its functional
overload followed by a cast to each written tensor's dtype; whether the results are written
straight into those tensors or through a temporary is decided per call (``launch``), from how
the call's tensors alias.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from .dtypes import NotLowerable, sim_dtype
from .entry import METADATA_KEY, CompiledOp, OutputSpec
from .tracing import dense_permutation, graph_for, is_row_major, storage_span
from .variants import arguments_by_name, functional_variant, mutated_arguments


def _meta(x):
    if isinstance(x, torch.Tensor):
        return torch.empty_strided(x.size(), x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


def build(op, args, kwargs, tensors: list[torch.Tensor], arch, compile_graph) -> CompiledOp:
    """Trace, import and compile (``compile_graph(graph, arch) -> Neff``) ``op`` for this call."""
    flat, spec = tree_flatten((args, kwargs))
    positions = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    specs = [(tuple(t.shape), tuple(t.stride()), t.dtype) for t in tensors]
    mutated = mutated_arguments(op)
    functional = functional_variant(op) if mutated else op
    if functional is None:
        raise NotLowerable(f"{op} writes {mutated} and has no functional overload")

    meta_args, meta_kwargs = tree_unflatten([_meta(x) for x in flat], spec)
    meta_result = op(*meta_args, **meta_kwargs)  # out= tensors are resized here, as CPU would
    _, out_spec = tree_flatten(meta_result)
    if mutated:
        by_name = arguments_by_name(op, meta_args, meta_kwargs)
        produced, _ = tree_flatten([by_name[n] for n in mutated])
    else:
        produced, _ = tree_flatten(meta_result)
    if any(x is not None and not isinstance(x, torch.Tensor) for x in produced):
        raise NotLowerable(f"{op} returns non-tensor values")
    written_dtypes = [x.dtype for x in produced] if mutated else None
    drop = set(mutated) if mutated and not op._schema.name.endswith("_") else set()  # out= arguments

    traced = [torch.device("cpu") if isinstance(x, torch.device) else x for x in flat]  # factories: make_fx builds on CPU

    def call(*inputs):
        values = list(traced)
        for pos, t in zip(positions, inputs):
            values[pos] = t
        a, k = tree_unflatten(values, spec)
        results, _ = tree_flatten(functional(*a, **{n: v for n, v in k.items() if n not in drop}))
        if written_dtypes is not None:  # written tensors keep their dtype: results are cast on the way in
            results = [r if r.dtype == d else r.to(d) for r, d in zip(results, written_dtypes)]
        return results

    outputs, perms = [], []
    for x in produced:
        if x is None:
            continue
        shape, strides = tuple(x.shape), tuple(x.stride())
        perm = None if is_row_major(shape, strides) else dense_permutation(shape, strides)
        if perm is None and not is_row_major(shape, strides):
            strides = _row_major_strides(shape)  # overlapping or gapped: a contiguous result
        sim_dtype(x.dtype)
        nbytes = storage_span(shape, strides) * x.element_size()
        if nbytes == 0:
            raise NotLowerable("an empty result")
        outputs.append(OutputSpec(shape, strides, x.dtype, nbytes))
        perms.append(perm)

    name = op._schema.name.split("::", 1)[1] + ("" if op._overloadname == "default" else "_" + op._overloadname)
    graph, none_positions = graph_for(call, specs, perms, name)
    if len(none_positions) + len(outputs) != len(produced) or any(produced[p] is not None for p in none_positions):
        raise NotLowerable(f"{op}: the traced results do not match its meta results")
    neff = compile_graph(graph, arch)
    entry = CompiledOp(
        neff=neff,
        in_nbytes=[storage_span(s, st) * _itemsize(d) for s, st, d in specs],
        outputs=outputs,
        none_positions=none_positions,
        out_spec=out_spec,
        mutated=mutated,
        elementwise=_is_elementwise(graph),
        input_readers=_input_readers(graph),
    )
    neff.metadata[METADATA_KEY] = entry.metadata()
    return CompiledOp.from_neff(neff)  # the form a disk hit gives: one path for both


def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _row_major_strides(shape) -> tuple:
    strides, step = [], 1
    for d in reversed(shape):
        strides.append(step)
        step *= max(d, 1)
    return tuple(reversed(strides))


_POINTWISE = {"constant", "iota", "copy"}
_SMALLER_OPERAND_VIEWS = {"broadcast_in_dim", "reshape"}


def _is_elementwise(graph) -> bool:
    """Every output element depends only on input elements at its own index (and on smaller
    operands broadcast to it): results may then overwrite an input that is read the same way."""
    from neuronxcc.compiler.lower.elementwise_ops import ELEMENTWISE_OPS

    for node in graph.nodes:
        if node.op in ELEMENTWISE_OPS or node.op in _POINTWISE:
            if any(v.type.shape != node.outputs[0].type.shape for v in node.inputs):
                return False
        elif node.op in _SMALLER_OPERAND_VIEWS:
            if not _smaller_than_outputs(node.inputs[0], graph):
                return False
        else:
            return False
    return True


def _smaller_than_outputs(value, graph) -> bool:
    """A broadcast or reshaped operand smaller than every output cannot be one of the written
    tensors (those have an output's shape), and launch refuses partial overlaps."""
    return all(value.type.num_elements < v.type.num_elements for v in graph.outputs)


def _input_readers(graph) -> list[list[int]]:
    """For each graph input, the outputs whose values depend on it."""
    producer = {v.id: n for n in graph.nodes for v in n.outputs}
    input_index = {v.id: i for i, v in enumerate(graph.inputs)}
    readers = [set() for _ in graph.inputs]
    for j, out in enumerate(graph.outputs):
        seen, stack = set(), [out.id]
        while stack:
            vid = stack.pop()
            if vid in seen:
                continue
            seen.add(vid)
            if vid in input_index:
                readers[input_index[vid]].add(j)
            node = producer.get(vid)
            if node is not None:
                stack.extend(v.id for v in node.inputs)
    return [sorted(r) for r in readers]
