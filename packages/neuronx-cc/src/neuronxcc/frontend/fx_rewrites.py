"""Rewrites of an ATen FX graph made before torch-mlir sees it: the patterns torch-mlir 20261001
loops, crashes or refuses on, rewritten into equivalent ATen it lowers, or refused with a clear
error (which eager mode answers with a CPU fallback, so CPU's own checks and errors apply).

* ``slice_scatter``: torch-mlir builds the scatter indices with a loop from ``start`` to ``end``
  without clamping ``end`` to the dim. PyTorch writes "to the end" as ``end = 2**63 - 1`` (the
  backward of ``x[..., 8:]``, every functionalized ``x[:, 1:] = y``), so that loop pushed 2^63
  indices: the lowering grew until the kernel killed it. Bounds are normalized as PyTorch
  normalizes them (negative from the end, clamped to the dim).
* ``clamp`` / ``clamp_min`` / ``clamp_max`` with tensor bounds: torch-mlir assumes the result has
  ``self``'s shape and dtype and broadcasts the bounds to ``self``; when the bounds broadcast
  ``self`` itself (``clamp_min(x[1], m[2])``) or promote it (int ``self``, float bounds), building
  ``stablehlo.clamp`` aborts the process (LLVM ERROR: failed to infer result types). ``self`` is
  expanded and converted to the result's shape and dtype first.
* ``index_put`` with an empty index list: torch-mlir segfaults; CPU rejects every such call.
* ops with a ``dim`` argument over a 0-dim tensor (``sum(x, 0, keepdim=True)``): torch-mlir
  segfaults; they run over the tensor viewed as ``[1]``.
* uninitialized factories (``empty_strided``, ``new_empty``...): torch-mlir leaves their
  ``pin_memory`` flag unlowered (``failed to legalize 'torch.constant.bool'``); they become
  zeros of the same shape and dtype, one valid content of uninitialized memory.

torch-mlir's pass pipeline also runs in a bounded worker process (``pipeline``), so a pattern
missing here costs a clear error, never the process.
"""

from __future__ import annotations

import operator

from .errors import UnsupportedOp

_INT64_MAX = 2**63 - 1


def rewrite(gm) -> None:
    """Rewrite ``gm`` (an ATen graph whose nodes carry ``meta["val"]``) in place."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # New nodes' values are computed on the graph's own (fake) values, whatever mode is active.
    with unset_fake_temporarily():
        _rewrite(gm)


def _rewrite(gm) -> None:
    import torch

    aten = torch.ops.aten
    clamps = {aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor}
    uninitialized = {aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
                     aten.empty_permuted.default, aten.new_empty.default, aten.new_empty_strided.default}
    changed = False
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is aten.slice_scatter.default:
            changed |= _bound_slice_scatter(gm.graph, node)
        elif node.target in clamps:
            changed |= _clamp_over_result(gm.graph, node)
        elif node.target in uninitialized and isinstance(node.meta.get("val"), torch.Tensor):
            changed |= _zeros_for_empty(gm.graph, node)
        elif node.target in (aten.index_put.default, aten._unsafe_index_put.default) and not _arg(node, 1, "indices"):
            raise UnsupportedOp(str(node.target), "an empty index list (torch-mlir crashes on it; CPU rejects it)",
                                location=node_location(node))
    changed |= _lift_dim_ops_over_0dim(gm.graph)
    if changed:
        gm.recompile()


def node_location(node) -> str | None:
    """``file:line`` of the user code an FX node came from (the innermost frame of its stack trace)."""
    import re

    frames = re.findall(r'File "([^"]+)", line (\d+)', node.stack_trace or "")
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else None


def _arg(node, position: int, name: str, default=None):
    if len(node.args) > position:
        return node.args[position]
    return node.kwargs.get(name, default)


def _bound_slice_scatter(graph, node) -> bool:
    """``slice_scatter(self, src, dim, start, end, step)`` with ``0 <= start <= end <= size``; an
    empty slice (nothing scattered) becomes a copy of ``self``."""
    import torch

    self_val = node.args[0].meta.get("val")
    if not isinstance(self_val, torch.Tensor) or self_val.dim() == 0:
        return False
    dim = _arg(node, 2, "dim", 0)
    start, end, step = _arg(node, 3, "start"), _arg(node, 4, "end"), _arg(node, 5, "step", 1)
    if not all(isinstance(v, int) or v is None for v in (dim, start, end, step)):
        return False  # symbolic bounds: left to torch-mlir's own checks
    dim %= self_val.dim()
    size = self_val.shape[dim]
    start = 0 if start is None else start
    end = size if end is None or end == _INT64_MAX else end
    start = min(max(start + size if start < 0 else start, 0), size)
    end = min(max(end + size if end < 0 else end, start), size)
    if start == end:
        with graph.inserting_before(node):
            copy = graph.call_function(torch.ops.aten.clone.default, (node.args[0],))
        copy.meta = dict(node.meta)
        node.replace_all_uses_with(copy)
        graph.erase_node(node)
        return True
    node.args = (node.args[0], node.args[1], dim, start, end, step)
    node.kwargs = {}
    return True


def _zeros_for_empty(graph, node) -> bool:
    import torch

    val = node.meta["val"]
    with graph.inserting_before(node):
        zeros = graph.call_function(torch.ops.aten.full.default, (list(val.shape), False if val.dtype == torch.bool else 0),
                                    {"dtype": val.dtype, "device": torch.device("cpu")})
    zeros.meta = dict(node.meta)
    node.replace_all_uses_with(zeros)
    graph.erase_node(node)
    return True


def _clamp_over_result(graph, node) -> bool:
    import torch

    x = node.args[0]
    x_val, result = x.meta.get("val"), node.meta.get("val")
    if not isinstance(x_val, torch.Tensor) or not isinstance(result, torch.Tensor):
        return False
    if x_val.shape == result.shape and x_val.dtype == result.dtype:
        return False
    with graph.inserting_before(node):
        if x_val.dtype != result.dtype:
            x = graph.call_function(torch.ops.aten._to_copy.default, (x,), {"dtype": result.dtype})
            x.meta["val"] = x_val.to(result.dtype)
        if x_val.shape != result.shape:
            expanded = graph.call_function(torch.ops.aten.expand.default, (x, list(result.shape)))
            expanded.meta["val"] = x.meta["val"].expand(result.shape)
            x = expanded
    node.args = (x, *node.args[1:])
    return True


def _lift_dim_ops_over_0dim(graph) -> bool:
    """An op with a ``dim`` argument over a 0-dim tensor runs over the tensor viewed as ``[1]``
    (dims 0 and -1 name that axis, as they name the 0-dim tensor's), and its result is viewed back
    to its own shape: same values. An op that cannot be rewritten so (several tensor operands or
    results) is refused rather than crashing the process."""
    import torch
    from torch.utils._pytree import tree_map

    changed = False
    for n in list(graph.nodes):
        schema = getattr(n.target, "_schema", None)
        if n.op != "call_function" or schema is None or not n.args:
            continue
        if not any(a.name == "dim" for a in schema.arguments):
            continue
        first = n.args[0]
        val = first.meta.get("val") if hasattr(first, "meta") else None
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            continue
        tensor_inputs = [a for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        result = n.meta.get("val")
        # One tensor result, or several read through getitem (max.dim's values and indices).
        readers = [n] if isinstance(result, torch.Tensor) else list(n.users)
        if tensor_inputs != [first] or not all(
                r is n or (r.target is operator.getitem and isinstance(r.meta.get("val"), torch.Tensor)) for r in readers):
            raise UnsupportedOp(str(n.target), "a dim argument over a 0-dim tensor (torch-mlir cannot import it)",
                                location=node_location(n))
        shapes = [list(r.meta["val"].shape) for r in readers]
        with graph.inserting_before(n):
            lifted = graph.call_function(torch.ops.aten.view.default, (first, [1]))
        lifted.meta["val"] = val.view(1)
        n.args = (lifted, *n.args[1:])
        values = tree_map(lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a, (n.args, n.kwargs))
        n.meta["val"] = n.target(*values[0], **values[1])
        for reader, shape in zip(readers, shapes):
            if reader is not n:
                reader.meta["val"] = n.meta["val"][reader.args[1]]
            with graph.inserting_after(reader):
                back = graph.call_function(torch.ops.aten.view.default, (reader, shape))
            back.meta["val"] = reader.meta["val"].view(shape)
            reader.replace_all_uses_with(back, delete_user_cb=lambda user, back=back: user is not back)
        changed = True
    return changed
