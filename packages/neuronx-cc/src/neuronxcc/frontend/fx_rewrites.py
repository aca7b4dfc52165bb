"""Rewrites of an ATen FX graph made before torch-mlir sees it: the patterns torch-mlir 20261001
loops, crashes or refuses on, rewritten into equivalent ATen it lowers, or refused with a clear
error (which eager mode answers with a CPU fallback, so CPU's own checks and errors apply).

* ``slice_scatter``: torch-mlir builds the scatter indices with a loop from ``start`` to ``end``
  without clamping ``end`` to the dim. PyTorch writes "to the end" as ``end = 2**63 - 1`` (the
  backward of ``x[..., 8:]``, every functionalized ``x[:, 1:] = y``), so that loop pushed 2^63
  indices: the lowering grew until the kernel killed it. Bounds are normalized as PyTorch
  normalizes them (negative from the end, clamped to the dim). A contiguous one (step 1) becomes
  a ``cat`` of ``self``'s two ends around ``src``: copies, where a scatter moves values through
  fp32 (int64 labels shifted by t5/bart/whisper were refused as inexact).
* ``clamp`` / ``clamp_min`` / ``clamp_max``: torch-mlir assumes the result has ``self``'s shape and
  dtype and broadcasts the bounds to ``self``; when tensor bounds broadcast ``self`` itself
  (``clamp_min(x[1], m[2])``) or bounds promote it (int ``self``, float bounds), building
  ``stablehlo.clamp`` aborts the process (LLVM ERROR: failed to infer result types) or fails
  (number bounds). ``self`` is expanded and converted to the result's shape and dtype first.
* ``fmax`` / ``fmin`` of operands that broadcast (``[2, 3]`` and ``[3]``) or promote: torch-mlir
  types its comparison by one operand (``chlo.broadcast_compare`` failed to verify); both
  operands are expanded and converted to the result's shape and dtype first.
* ``index_put`` with an empty index list: torch-mlir segfaults; CPU rejects every such call.
* ops with a ``dim`` argument over a 0-dim tensor (``sum(x, 0, keepdim=True)``): torch-mlir
  segfaults; they run over the tensor viewed as ``[1]``.
* uninitialized factories (``empty_strided``, ``new_empty``...): torch-mlir leaves their
  ``pin_memory`` flag unlowered (``failed to legalize 'torch.constant.bool'``); they become
  zeros of the same shape and dtype, one valid content of uninitialized memory.
* results with no elements (``fmod`` of an empty tensor, ``repeat`` by 0): torch-mlir folds some
  of them into unlowerable constants or wrong shapes; they become ``full`` of their shape. A
  ``gather`` / ``index_select`` reading a size-0 dim with a non-empty index (every index out of
  bounds, CPU raises) aborted the process; it is refused.
* scatters with an empty index (``scatter_reduce``, ``scatter_add``, ``index_add``, ...): they
  write nothing, so they are ``self``; torch-mlir has no lowering of some (``scatter_reduce``) and
  cannot legalize the empty index constant of others.
* ``amax`` / ``amin`` / ``max`` / ``min`` of bools: torch-mlir starts the i1 reduction from the
  signed extreme (``true`` for max), so a max of all-false was true; they reduce int32 values.
* ``abs`` of unsigned integers is the identity (``stablehlo.abs`` refuses them); of bools it is
  refused (CPU raises too).
* ``cumsum`` to int8 / uint8: torch-mlir's pipeline segfaults; it sums in int32 and converts
  (the same values modulo 2**8).
* negative advanced indices (``x[tensor([-1])]``, ``index_put``): wrapped by the dim's size, as
  CPU wraps them; torch-mlir gathers them as they are (an out-of-bounds launch).
* float16 / bfloat16 ops torch-mlir expands into several StableHLO ops (``gelu``, ``asinh``,
  ``_softmax``, ``mean``, ``var``...): each step was rounded to the 16-bit dtype, where CPU computes
  the whole op in fp32 and rounds once (``gelu(-4.0)`` was -0.0, CPU -1.267e-4). They compute over
  their operands converted to float32, and their results are converted back. Ops that lower to one
  graph op (which computes in fp32 and rounds once) or only move data keep their dtype
  (``ROUNDS_ONCE``).
* a number multiplying or dividing a float16 / bfloat16 tensor (``x * 0.1``, ``x / 3.3``):
  torch-mlir converts the number to the tensor's dtype first (bf16 * -3.4028e38 multiplied by
  -inf, ``x * 0.1`` by 0.10009765625), where CPU's mul and div kernels take it as a float (their
  "opmath" type) and round the result once. (CPU's add, sub and pow do round the number to the
  16-bit dtype first, as torch-mlir does.) When the number is not exact in the 16-bit dtype, the
  op computes over its operands converted to float32 and its result is converted back.
* ``prod`` of float16 / bfloat16: CPU's kernel multiplies in index order and rounds each product
  to the 16-bit dtype (``[60800, 11088, 18864, 0]`` in float16 is NaN: 60800 * 11088 = inf, inf * 0
  = NaN); the graph's one reduction rounded once (0). Over fewer than ``SEQUENTIAL_PROD_MAX``
  elements it is written out as those multiplies. (CPU splits a longer contiguous row over the
  lanes of its vector unit, an order that depends on the host's SIMD width: not modeled.)
* ``var`` / ``std`` / ``var_mean`` / ``std_mean`` of float16 / bfloat16 / float32: CPU's kernel is
  Welford's in float64 (``WelfordOps<scalar_t, double>``), so ``[1e38] * 4`` in bfloat16 has std 0.0
  and ``[1e38, -1e38]`` std 1.4e38, float32 ``[2e19, -2e19, 1.0]`` std 2e19; in fp32 the sum of the
  values and of the squared deviations overflowed to inf. The values are scaled by their largest magnitude first (in fp32: two passes
  over ``x / s``, each deviation at most 2), and the variance is ``var(x / s) * s * s``, the std
  ``std(x / s) * s``, the mean ``mean(x / s) * s`` - finite wherever CPU's 16-bit result is, and
  within an fp32 rounding or two of CPU's float64 value before the one 16-bit rounding.
* float -> integer conversions (``_to_copy``, ``convert_element_type``): the NeuronCore's write
  saturates; CPU converts to int64 (for int64) or int32 (for the rest) - NaN and values out of
  that range become its minimum - and an 8- or 16-bit result wraps those bits (-1.0 -> 255 as
  uint8, 300.0 -> 44, 1e10 -> 0). Written out as those steps, which the compiler lowers exactly.
* ``diagonal`` / ``diagonal_copy`` (also ``diag``'s and ``trace``'s) and ``unfold``: torch-mlir has no StableHLO
  lowering of these views of a computed value and leaves them with their dims as
  ``torch.constant.int``. A diagonal is the two dims moved last and flattened, read with a step
  of one row plus one; an unfold is its windows (or the window's positions, whichever are fewer)
  as strided slices, stacked.
* ``index_select`` of one index over a dim of size 1 (also ``take`` of a one-element tensor and
  ``embedding`` of a one-row table, both index_selects here): torch-mlir folds it into its operand
  (StableHLO clamps gather indices, so any index reads row 0), and the index was never checked -
  ``index_select(x[1, 3], 0, [1])`` returned row 0 where CPU raises IndexError. It becomes
  ``aten.index`` of ``x`` viewed as ``[1, the other dims]`` (views only, the same row gather),
  which torch-mlir keeps: an out-of-range index - a negative one too, which ``index_select``
  refuses and which is not wrapped here - stops the launch as any gather's does.
* comparisons (``eq`` ... ``ge``, with a number or a tensor) whose operands promote: torch-mlir
  converts a number to the tensor's dtype (``bool_x != -1`` compared ``x`` with ``True``) and of
  two tensors the narrower to the wider (uint8 vs int8 compared in int8). Both operands are
  converted to PyTorch's result dtype first (int64 for bool vs an int, int16 for uint8 vs int8).
  Two bools compare as int32: torch-mlir folds a comparison of a constant (splat) bool tensor
  reading its ``true`` as the signed i1 -1, so ``v > False`` of an all-true ``v`` folded to false.

* ``detach_`` (the in-place detach ``make_fx`` records after ``lift_fresh_copy`` when a
  decomposition makes a constant with ``torch.tensor``): torch-mlir has no lowering of it; it only
  drops autograd history, so its uses read its operand. ``prims.device_put`` (a host constant
  copied to the device, what ``.to(device)`` of a decomposition's constant re-traces to): a graph's
  values all live in the one memory its program runs on, so it is its operand too.

torch-mlir's pass pipeline also runs in a bounded worker process (``pipeline``), so a pattern
missing here costs a clear error, never the process.
"""

from __future__ import annotations

import math
import operator

from .errors import UnsupportedOp

_INT64_MAX = 2**63 - 1
# ATen ops (overload packets) that lower to one graph op, which computes in fp32 and rounds once,
# or that only move data: a 16-bit float result of these is CPU's fp32 result rounded once. Every
# other pointwise op, and the reductions of _COMPUTED_IN_FP32, computes in fp32 (``_in_fp32``).
ROUNDS_ONCE = frozenset({
    "abs", "add", "amax", "amin", "atan", "atan2", "ceil", "clamp", "clamp_max", "clamp_min", "clone", "cos", "cumsum",
    "div", "erf", "exp", "expm1", "fill", "floor", "log", "log1p", "masked_fill", "maximum", "minimum", "mul", "neg",
    "pow", "prod", "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sin", "sqrt", "sub", "sum", "tan", "tanh",
    "where"})
_COMPUTED_IN_FP32 = frozenset({"_softmax", "_log_softmax", "mean", "var", "std", "var_mean", "std_mean", "logsumexp",
                               "native_layer_norm", "norm", "linalg_vector_norm"})
# ATen ops (overload packets) whose numbers CPU computes with in fp32 for 16-bit float tensors.
_NUMBERS_IN_OPMATH = frozenset({"mul", "div"})
# CPU's reduction kernels reduce a contiguous row of 4 vectors or more lane by lane (AVX2: 4 x 16
# 16-bit floats); below that, and along any other dim, in index order.
SEQUENTIAL_PROD_MAX = 64
_HALF_NAMES = ("float16", "bfloat16")
_UNSIGNED_NAMES = ("uint8", "uint16", "uint32", "uint64")


def rewrite(gm) -> None:
    """Rewrite ``gm`` (an ATen graph whose nodes carry ``meta["val"]``) in place."""
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    # New nodes' values are computed on the graph's own (fake) values, whatever mode is active.
    with unset_fake_temporarily():
        _rewrite(gm)


def _rewrite(gm) -> None:
    import torch

    aten = torch.ops.aten
    clamps = {aten.clamp.Tensor, aten.clamp_min.Tensor, aten.clamp_max.Tensor, aten.clamp.default,
              aten.clamp_min.default, aten.clamp_max.default}
    uninitialized = {aten.empty.memory_format, aten.empty_strided.default, aten.empty_like.default,
                     aten.empty_permuted.default, aten.new_empty.default, aten.new_empty_strided.default}
    bool_reductions = {aten.amax.default, aten.amin.default, aten.max.default, aten.min.default, aten.max.dim,
                       aten.min.dim}
    unsigned = {getattr(torch, name) for name in _UNSIGNED_NAMES if hasattr(torch, name)}
    halves = {getattr(torch, name) for name in _HALF_NAMES}
    compares = {getattr(getattr(aten, name), overload) for name in ("eq", "ne", "lt", "le", "gt", "ge")
                for overload in ("Scalar", "Tensor")}
    logical_reductions = {getattr(getattr(aten, name), overload) for name in ("any", "all")
                          for overload in ("default", "dim", "dims")}
    variances = {aten.var.correction, aten.std.correction, aten.var_mean.correction, aten.std_mean.correction}
    changed = _zero_size_results(gm.graph)
    changed |= _empty_index_scatters(gm.graph)
    for node in list(gm.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is aten.slice_scatter.default:
            changed |= _bound_slice_scatter(gm.graph, node)
        elif node.target in clamps:
            changed |= _clamp_over_result(gm.graph, node)
        elif node.target in logical_reductions and _dtype(node.args[0]) == torch.uint8:
            changed |= _logical_reduction_of_bools(gm.graph, node)
        elif node.target in (aten.fmax.default, aten.fmin.default):
            changed |= _operands_over_result(gm.graph, node)
        elif node.target in uninitialized and isinstance(node.meta.get("val"), torch.Tensor):
            changed |= _zeros_for_empty(gm.graph, node)
        elif node.target in (aten.index_put.default, aten._unsafe_index_put.default) and not _arg(node, 1, "indices"):
            raise UnsupportedOp(str(node.target), "an empty index list (torch-mlir crashes on it; CPU rejects it)",
                                location=node_location(node))
        elif node.target in (aten.index.Tensor, aten.index_put.default, aten._index_put_impl.default):
            changed |= _wrap_negative_indices(gm.graph, node)
        elif node.target in bool_reductions and _dtype(node.args[0]) == torch.bool:
            changed |= _reduce_as(gm.graph, node, torch.int32)
        elif node.target is aten.cumsum.default and _dtype(node) in (torch.int8, torch.uint8):
            changed |= _reduce_as(gm.graph, node, torch.int32)
        elif node.target is aten.abs.default and _dtype(node.args[0]) == torch.bool:
            raise UnsupportedOp(str(node.target), "abs of a bool tensor (CPU raises NotImplementedError too)",
                                location=node_location(node))
        elif node.target is aten.abs.default and _dtype(node.args[0]) in unsigned:
            node.target = aten.clone.default  # the identity
            changed = True
        elif node.target in compares:
            changed |= _compare_in_result_dtype(gm.graph, node)
        elif node.target in (aten._to_copy.default, torch.ops.prims.convert_element_type.default):
            changed |= _float_to_integer_as_cpu(gm.graph, node)
        elif node.target in (aten.diagonal.default, aten.diagonal_copy.default):
            changed |= _diagonal_as_slices(gm.graph, node)
        elif node.target in (aten.detach_.default, torch.ops.prims.device_put.default):
            node.replace_all_uses_with(node.args[0])
            gm.graph.erase_node(node)
            changed = True
        elif node.target is aten.unfold.default:
            changed |= _unfold_as_slices(gm.graph, node)
        elif node.target in variances and _of_16_bit_floats(node.args[0], halves):
            changed |= _scaled_variance(gm.graph, node)
        elif node.target in variances and _dtype(node.args[0]) == torch.float32:
            changed |= _scaled_variance(gm.graph, node, cpu_all_reduce=True)
        elif node.target in (aten.prod.default, aten.prod.dim_int) and _dtype(node) in halves:
            changed |= _prod_rounding_each_product(gm.graph, node)
        elif _rounds_per_step(node, halves) or _number_rounded_first(node, halves):
            changed |= _reduce_as(gm.graph, node, torch.float32, halves)
    changed |= _lift_dim_ops_over_0dim(gm.graph)
    changed |= _index_select_over_size_1_dims(gm.graph)  # also those the lift made
    if changed:
        gm.recompile()


def node_location(node) -> str | None:
    """``file:line`` of the user code an FX node came from (the innermost frame of its stack trace)."""
    import re

    frames = re.findall(r'File "([^"]+)", line (\d+)', node.stack_trace or "")
    return f"{frames[-1][0]}:{frames[-1][1]}" if frames else None


def _dtype(node):
    """The dtype of a node's (single tensor) value, None for anything else."""
    return getattr(node.meta.get("val"), "dtype", None) if hasattr(node, "meta") else None


def _call(graph, target, args, kwargs=None, like=None):
    """A new node calling ``target``, its value computed from its arguments' (fake) values."""
    import torch
    from torch.utils._pytree import tree_map

    kwargs = kwargs or {}
    node = graph.call_function(target, tuple(args), kwargs)
    values = tree_map(lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a, (tuple(args), kwargs))
    node.meta["val"] = target(*values[0], **values[1])
    if like is not None and "stack_trace" in like.meta:
        node.meta["stack_trace"] = like.meta["stack_trace"]
    return node


def _recompute(node) -> None:
    import torch
    from torch.utils._pytree import tree_map

    values = tree_map(lambda a: a.meta["val"] if isinstance(a, torch.fx.Node) else a, (node.args, node.kwargs))
    node.meta["val"] = node.target(*values[0], **values[1])
    node.meta.pop("tensor_meta", None)  # torch-mlir's importer would type the result from the stale one


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
    if step == 1:
        return _slice_scatter_as_cat(graph, node, dim, start, end, size)
    node.args = (node.args[0], node.args[1], dim, start, end, step)
    node.kwargs = {}
    return True


def _slice_scatter_as_cat(graph, node, dim: int, start: int, end: int, size: int) -> bool:
    """A contiguous ``slice_scatter`` is ``cat(self[:start], src, self[end:])`` along ``dim``: data
    movement the compiler lays out as copies, where torch-mlir's scatter computes an index per
    element and moves the values through the engines' fp32 (an int64 scatter - Transformers'
    ``shift_tokens_right`` of the labels in t5, bart, whisper - was refused as inexact)."""
    import torch

    aten = torch.ops.aten
    self_node, src = node.args[0], node.args[1]
    with graph.inserting_before(node):
        if tuple(src.meta["val"].shape) != tuple(node.meta["val"].shape[:dim]) + (end - start,) + tuple(
                node.meta["val"].shape[dim + 1:]):
            src = _call(graph, aten.expand.default, (src, [*node.meta["val"].shape[:dim], end - start,
                                                           *node.meta["val"].shape[dim + 1:]]), like=node)
        parts = [_call(graph, aten.slice.Tensor, (self_node, dim, 0, start), like=node)] if start > 0 else []
        parts.append(src)
        if end < size:
            parts.append(_call(graph, aten.slice.Tensor, (self_node, dim, end, size), like=node))
        new = (_call(graph, aten.cat.default, (parts, dim), like=node) if len(parts) > 1
               else _call(graph, aten.clone.default, (src,), like=node))
    node.replace_all_uses_with(new)
    graph.erase_node(node)
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
    changed = any(isinstance(b, bool) for b in node.args[1:])
    if changed:  # torch-mlir takes no bool Scalar; CPU clamps by its value 0 or 1
        node.args = (x, *(int(b) if isinstance(b, bool) else b for b in node.args[1:]))
    if x_val.shape == result.shape and x_val.dtype == result.dtype:
        return changed
    with graph.inserting_before(node):
        node.args = (_over_result(graph, x, result), *node.args[1:])
    return True


def _logical_reduction_of_bools(graph, node) -> bool:
    """``any`` / ``all`` of uint8 (CPU's result is uint8 0 or 1): the graph reduces only bools, so
    it reduces ``x != 0`` and converts the result back."""
    import torch

    aten = torch.ops.aten
    users = list(node.users)
    with graph.inserting_before(node):
        node.args = (_call(graph, aten.ne.Scalar, (node.args[0], 0), like=node), *node.args[1:])
    _recompute(node)
    with graph.inserting_before(node.next):
        back = _call(graph, aten._to_copy.default, (node,), {"dtype": torch.uint8}, like=node)
    for user in users:
        user.replace_input_with(node, back)
    return True


def _operands_over_result(graph, node) -> bool:
    """``fmax`` / ``fmin`` of operands that broadcast or promote: torch-mlir types the comparison
    it builds by one operand's shape (``'chlo.broadcast_compare' op inferred type(s) 'tensor<3xi1>'
    are incompatible with return type(s) 'tensor<2x3xi1>'``); both are made the result's first."""
    import torch

    result = node.meta.get("val")
    if not isinstance(result, torch.Tensor):
        return False
    operands = [a for a in node.args[:2] if isinstance(a, torch.fx.Node)]
    if all(a.meta["val"].shape == result.shape and a.meta["val"].dtype == result.dtype for a in operands):
        return False
    with graph.inserting_before(node):
        node.args = tuple(_over_result(graph, a, result) if isinstance(a, torch.fx.Node) else a for a in node.args)
    return True


def _over_result(graph, x, result):
    """``x`` converted to ``result``'s dtype and expanded to its shape."""
    import torch

    x_val = x.meta["val"]
    if x_val.dtype != result.dtype:
        x = graph.call_function(torch.ops.aten._to_copy.default, (x,), {"dtype": result.dtype})
        x.meta["val"] = x_val.to(result.dtype)
    if x_val.shape != result.shape:
        expanded = graph.call_function(torch.ops.aten.expand.default, (x, list(result.shape)))
        expanded.meta["val"] = x.meta["val"].expand(result.shape)
        x = expanded
    return x


def _lift_dim_ops_over_0dim(graph) -> bool:
    """An op with a ``dim`` argument over 0-dim tensors runs over them viewed as ``[1]`` (dims 0
    and -1 name that axis, as they name the 0-dim tensor's), and its results are viewed back to
    their own shapes: same values. ``topk`` of a 0-dim tensor returns its one value for ``k`` 0
    or 1, as CPU does; ``index_select``'s one index is lifted with it (then checked as an index
    over a size-1 dim). An op that cannot be rewritten so (0-dim and other tensor operands, or a
    lifted result of another size) is refused rather than crashing the process."""
    import torch

    changed = False
    for n in list(graph.nodes):
        schema = getattr(n.target, "_schema", None)
        if n.op != "call_function" or schema is None or not n.args:
            continue
        if not any(a.name == "dim" for a in schema.arguments):
            continue
        val = n.args[0].meta.get("val") if hasattr(n.args[0], "meta") else None
        if not isinstance(val, torch.Tensor) or val.dim() != 0:
            continue
        tensor_inputs = [a for a in n.all_input_nodes if isinstance(a.meta.get("val"), torch.Tensor)]
        result = n.meta.get("val")
        # One tensor result, or several read through getitem (max.dim's values and indices).
        readers = [n] if isinstance(result, torch.Tensor) else list(n.users)

        if any(a.meta["val"].dim() != 0 and not _one_index_of_index_select(n, a) for a in tensor_inputs):
            raise _refuse_0dim(n, "with operands of other ranks")
        if not all(r is n or (r.target is operator.getitem and isinstance(r.meta.get("val"), torch.Tensor))
                   for r in readers):
            raise _refuse_0dim(n, "a result read other than by getitem")
        shapes = [list(r.meta["val"].shape) for r in readers]
        lifted = {}
        with graph.inserting_before(n):
            for a in tensor_inputs:
                lifted[a] = _call(graph, torch.ops.aten.view.default, (a, [1]), like=n)
        n.args = tuple(lifted.get(a, a) if isinstance(a, torch.fx.Node) else a for a in n.args)
        n.kwargs = {k: lifted.get(a, a) if isinstance(a, torch.fx.Node) else a for k, a in n.kwargs.items()}
        if n.target is torch.ops.aten.topk.default and n.args[1] == 0:
            n.args = (n.args[0], 1, *n.args[2:])
        _recompute(n)
        for reader, shape in zip(readers, shapes):
            if reader is not n:
                _recompute(reader)
            if reader.meta["val"].numel() != math.prod(shape):
                raise _refuse_0dim(n, f"its result of shape {shape} has {reader.meta['val'].numel()} elements over [1]")
            with graph.inserting_after(reader):
                back = _call(graph, torch.ops.aten.view.default, (reader, shape), like=n)
            reader.replace_all_uses_with(back, delete_user_cb=lambda user, back=back: user is not back)
        changed = True
    return changed


def _index_select_over_size_1_dims(graph) -> bool:
    """``index_select(x, d, i)`` of one index over a dim of size 1 (the result has ``x``'s shape: the
    case torch-mlir folds) as ``aten.index(x viewed as [1, ...the other dims], [i viewed as [1]])``
    viewed back: the same row, but a gather torch-mlir keeps, so the launch checks ``i`` (see the
    module docstring). Its index is not wrapped: a negative one is out of bounds, as
    ``index_select`` has it."""
    import torch

    aten = torch.ops.aten
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target is not aten.index_select.default:
            continue
        x, dim, index = node.args[0], _arg(node, 1, "dim"), _arg(node, 2, "index")
        x_val, index_val = x.meta.get("val"), index.meta.get("val")
        if not (isinstance(x_val, torch.Tensor) and x_val.dim() and isinstance(index_val, torch.Tensor)
                and isinstance(dim, int) and x_val.shape[dim % x_val.dim()] == 1 and index_val.numel() == 1):
            continue
        others = [s for d, s in enumerate(x_val.shape) if d != dim % x_val.dim()]
        with graph.inserting_before(node):
            table = _call(graph, aten.view.default, (x, [1, *others]), like=node)
            index = _call(graph, aten.view.default, (index, [1]), like=node)
            row = _call(graph, aten.index.Tensor, (table, [index]), like=node)
            result = _call(graph, aten.view.default, (row, list(node.meta["val"].shape)), like=node)
        node.replace_all_uses_with(result)
        graph.erase_node(node)
        changed = True
    return changed


def _one_index_of_index_select(node, operand) -> bool:
    """Whether ``operand`` is the index of an ``index_select`` over a 0-dim tensor that CPU takes: one
    index, 0-d or ``[1]`` (a vector), lifted to ``[1]`` with the tensor - then an index over a size-1 dim."""
    import torch

    return (node.target is torch.ops.aten.index_select.default and operand is _arg(node, 2, "index")
            and operand.meta["val"].dim() <= 1 and operand.meta["val"].numel() == 1)


def _refuse_0dim(node, why: str) -> UnsupportedOp:
    return UnsupportedOp(str(node.target), f"a dim argument over a 0-dim tensor ({why}; torch-mlir cannot import it)",
                         location=node_location(node))


def _zero_size_results(graph) -> bool:
    """Every op whose one result has no elements becomes ``full`` of that shape (its values are
    none); a gather-like op whose index is non-empty over a size-0 dim is refused (CPU raises:
    every index is out of bounds)."""
    import torch

    aten = torch.ops.aten
    gathers = {aten.gather.default: (1, 2), aten.index_select.default: (1, 2)}  # positions of dim, index
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in gathers:
            dim_at, index_at = gathers[node.target]
            src, dim, index = node.args[0].meta.get("val"), node.args[dim_at], node.args[index_at].meta.get("val")
            if (isinstance(src, torch.Tensor) and isinstance(index, torch.Tensor) and src.dim() and index.numel()
                    and src.shape[dim % src.dim()] == 0):
                raise UnsupportedOp(str(node.target), f"index into dimension {dim} of size 0 (shape {list(src.shape)}) "
                                    f"with a non-empty index: every index is out of bounds", location=node_location(node))
        val = node.meta.get("val")
        if (isinstance(val, torch.Tensor) and val.numel() == 0 and node.target is not aten.full.default
                and all(isinstance(d, int) for d in val.shape)):
            changed |= _zeros_for_empty(graph, node)
    if changed:  # what only fed them (topk's tuple when both its results are empty) is imported too
        graph.eliminate_dead_code()
    return changed


def _empty_index_scatters(graph) -> bool:
    """Each scatter-like op whose index has no elements becomes a copy of its ``self``."""
    import torch

    aten = torch.ops.aten
    names = ("scatter", "scatter_add", "scatter_reduce", "index_add", "index_copy", "index_fill", "index_reduce")
    scatters = {getattr(getattr(aten, name), overload) for name in names for overload in getattr(aten, name).overloads()
                if not overload.endswith("out")}  # all take (self, dim, index, ...)
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in scatters or len(node.args) < 3:
            continue
        self_val, index, val = node.args[0].meta.get("val"), node.args[2].meta.get("val"), node.meta.get("val")
        if (isinstance(index, torch.Tensor) and index.numel() == 0 and isinstance(self_val, torch.Tensor)
                and isinstance(val, torch.Tensor) and self_val.dtype == val.dtype and self_val.shape == val.shape):
            with graph.inserting_before(node):
                changed |= _replace(graph, node, _call(graph, aten.clone.default, (node.args[0],), like=node))
    if changed:  # the index itself, now unused, is not imported
        graph.eliminate_dead_code()
    return changed


def _rounds_per_step(node, halves) -> bool:
    """Whether ``node`` is an ATen op on 16-bit floats that torch-mlir would round step by step."""
    import torch

    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return False
    name = target.overloadpacket.__name__
    if name in ROUNDS_ONCE or not (torch.Tag.pointwise in target.tags or name in _COMPUTED_IN_FP32):
        return False
    results = node.meta.get("val")
    results = results if isinstance(results, (tuple, list)) else [results]
    operands = [a.meta.get("val") for a in node.all_input_nodes]
    return (any(getattr(r, "dtype", None) in halves for r in results)
            and all(v.dtype in halves for v in operands if isinstance(v, torch.Tensor) and v.dtype.is_floating_point))


def _prod_rounding_each_product(graph, node) -> bool:
    """A 16-bit ``prod`` as CPU's kernel computes it: ``acc = round(acc * x[i])`` in index order."""
    import torch

    aten = torch.ops.aten
    x = node.args[0]
    if _dtype(x) != _dtype(node) or x.meta["val"].dim() == 0:
        return False
    full = node.target is aten.prod.default
    dim = 0 if full else node.args[1] % x.meta["val"].dim()
    keepdim = False if full else _arg(node, 2, "keepdim", False)
    n = x.meta["val"].numel() if full else x.meta["val"].shape[dim]
    if not 0 < n < SEQUENTIAL_PROD_MAX:
        return False
    with graph.inserting_before(node):
        if full:
            x = _call(graph, aten.reshape.default, (x, [n]), like=node)
        acc = _call(graph, aten.select.int, (x, dim, 0), like=node)
        for i in range(1, n):
            acc = _call(graph, aten.mul.Tensor, (acc, _call(graph, aten.select.int, (x, dim, i), like=node)), like=node)
        if keepdim:
            acc = _call(graph, aten.unsqueeze.default, (acc, dim), like=node)
    return _replace(graph, node, acc)


def _number_rounded_first(node, halves) -> bool:
    """Whether ``node`` is arithmetic of a 16-bit float tensor with a number that the 16-bit dtype
    does not hold exactly (torch-mlir would round the number to it before computing)."""
    import torch

    target = node.target
    if (not isinstance(target, torch._ops.OpOverload) or target.overloadpacket.__name__ not in _NUMBERS_IN_OPMATH
            or target._schema.is_mutable):
        return False
    dtype = _dtype(node)
    if dtype not in halves:
        return False
    numbers = [a for a in (*node.args, *node.kwargs.values()) if isinstance(a, (int, float)) and not isinstance(a, bool)]
    return any(not _holds_exactly(dtype, v) for v in numbers)


def _holds_exactly(dtype, number) -> bool:
    import torch

    try:
        value = float(number)
    except OverflowError:  # an int past float64's range
        return False
    return math.isnan(value) or torch.tensor(value, dtype=torch.float64).to(dtype).item() == value


def _reduce_as(graph, node, dtype, sources=None) -> bool:
    """``node`` run over its first operand converted to ``dtype`` (or over each tensor operand of
    a dtype in ``sources``), its results that had the original result dtype converted back (bool
    max/min; int8 cumsum, which keeps its ``dtype=``; 16-bit float ops computed in fp32)."""
    import torch

    results = [node] if isinstance(node.meta.get("val"), torch.Tensor) else [
        u for u in node.users if u.target is operator.getitem]
    wanted = {r: r.meta["val"].dtype for r in results}
    converted = {}
    with graph.inserting_before(node):
        for x in node.all_input_nodes if sources is not None else [node.args[0]]:
            if sources is None or _dtype(x) in sources:
                converted[x] = _call(graph, torch.ops.aten._to_copy.default, (x,), {"dtype": dtype}, like=node)
    node.args = tuple(converted.get(a, a) if isinstance(a, torch.fx.Node) else a for a in node.args)
    node.kwargs = {k: converted.get(a, a) if isinstance(a, torch.fx.Node) else a for k, a in node.kwargs.items()}
    if "dtype" in node.kwargs:
        node.kwargs = {**node.kwargs, "dtype": dtype}
    _recompute(node)
    for r in results:
        if r is not node:
            _recompute(r)
        if r.meta["val"].dtype == wanted[r]:
            continue
        users = list(r.users)
        with graph.inserting_before(r.next):  # inserting_after(r) would put the steps in reverse order
            back = _narrowed(graph, r, wanted[r], like=node)
        for user in users:
            user.replace_input_with(r, back)
    return True


def _of_16_bit_floats(x, halves) -> bool:
    """Whether ``x`` holds 16-bit float values: of a 16-bit dtype, or converted from one to fp32
    (torch's ``std`` decomposition upcasts before its ``var``)."""
    import torch

    if _dtype(x) in halves:
        return True
    converts = (torch.ops.prims.convert_element_type.default, torch.ops.aten._to_copy.default)
    return (getattr(x, "target", None) in converts and _dtype(x) == torch.float32 and bool(x.args)
            and _dtype(x.args[0]) in halves)


def _scaled_variance(graph, node, cpu_all_reduce: bool = False) -> bool:
    """``var``/``std``/``var_mean``/``std_mean`` (``.correction``) of a 16-bit float ``x`` over ``dim``
    as CPU's float64 Welford gives it, in fp32: ``s = max(|x|)`` (at least fp32's smallest normal,
    so all-zero rows stay 0; NaN and inf make NaN, as in CPU's), ``y = x / s``, the two-pass
    variance of ``y`` divided by ``max(0, n - correction)``, scaled back by ``s`` (see the module
    docstring). Results are rounded to the result dtype once.

    float32 (``cpu_all_reduce``) takes the same form, and where CPU reduces a float32 var/std to
    one element its all-reduce kernel subtracts ``x.mean()`` computed in float32: where that mean
    overflows (``[1e38] * 4``), CPU's result is inf; so is ours."""
    import torch

    aten = torch.ops.aten
    x = node.args[0]
    val = x.meta["val"]
    dims = _arg(node, 1, "dim")
    dims = list(range(val.dim())) if dims is None or len(dims) == 0 else [d % max(val.dim(), 1) for d in dims]
    correction = node.kwargs.get("correction", 1)
    correction = 1 if correction is None else correction
    keepdim = node.kwargs.get("keepdim", False)
    count = math.prod(val.shape[d] for d in dims) if val.dim() else 1
    if val.dim() == 0 or count == 0:
        return False  # a 0-d or empty reduction: nothing overflows, torch-mlir's form is CPU's
    name = node.target.overloadpacket.__name__
    if name.endswith("_mean"):
        if any(u.target is not operator.getitem for u in node.users):
            return False
        parts = {u.args[1]: u for u in node.users}  # the nodes standing for the variance (0) and the mean (1)
    else:
        parts = {0: node}
    spread_of = parts.get(0)
    roots = list(spread_of.users) if spread_of is not None else []
    # torch's std decompositions are sqrt(var(x)): var itself may overflow fp32 where the std does not
    rooted = name.startswith("var") and bool(roots) and all(u.target is aten.sqrt.default for u in roots)
    take_sqrt = name.startswith("std") or rooted
    with graph.inserting_before(node):
        x32 = _call(graph, aten._to_copy.default, (x,), {"dtype": torch.float32}, like=node)
        s = _call(graph, aten.amax.default, (_call(graph, aten.abs.default, (x32,), like=node), dims, True), like=node)
        s = _call(graph, aten.clamp_min.default, (s, torch.finfo(torch.float32).tiny), like=node)
        y = _call(graph, aten.div.Tensor, (x32, s), like=node)
        mean_y = _call(graph, aten.mean.dim, (y, dims, True), like=node)
        d = _call(graph, aten.sub.Tensor, (y, mean_y), like=node)
        squares = _call(graph, aten.sum.dim_IntList, (_call(graph, aten.mul.Tensor, (d, d), like=node), dims, keepdim),
                        like=node)
        var_y = _call(graph, aten.div.Tensor, (squares, float(max(0, count - correction))), like=node)
        reduced = [n for i, n in enumerate(val.shape) if i not in dims]
        scale = s if keepdim else _call(graph, aten.view.default, (s, reduced), like=node)
        if take_sqrt:
            spread = _call(graph, aten.mul.Tensor, (_call(graph, aten.sqrt.default, (var_y,), like=node), scale), like=node)
        else:
            spread = _call(graph, aten.mul.Tensor, (_call(graph, aten.mul.Tensor, (var_y, scale), like=node), scale),
                           like=node)
        mean_of = parts.get(1)
        if cpu_all_reduce and mean_of is None and spread.meta["val"].numel() == 1:
            mean_x = _call(graph, aten.abs.default, (_call(graph, aten.mean.dim, (x32, dims, keepdim), like=node),),
                           like=node)
            spread_x = _call(graph, aten.abs.default, (spread,), like=node)
            overflowed = _call(graph, aten.bitwise_and.Tensor, (  # the mean is inf, the spread finite
                _call(graph, aten.eq.Scalar, (mean_x, math.inf), like=node),
                _call(graph, aten.lt.Scalar, (spread_x, math.inf), like=node)), like=node)
            spread = _call(graph, aten.where.self, (overflowed, mean_x, spread), like=node)
        if mean_of is not None:
            mean = mean_y if keepdim else _call(graph, aten.view.default, (mean_y, reduced), like=node)
            mean = _call(graph, aten.mul.Tensor, (mean, scale), like=node)
    replaced = [(r, spread) for r in roots] if rooted else ([(spread_of, spread)] if spread_of is not None else [])
    if mean_of is not None:
        replaced.append((mean_of, mean))
    for old, new in replaced:
        dtype = old.meta["val"].dtype
        if dtype != torch.float32:
            with graph.inserting_before(old):
                new = _call(graph, aten._to_copy.default, (new,), {"dtype": dtype}, like=node)
        old.replace_all_uses_with(new)
    # the replaced nodes (roots or results), then var_mean's item 0 (or var itself), then the op
    for old in dict.fromkeys([r for r, _ in replaced] + ([spread_of] if rooted else []) + [node]):
        graph.erase_node(old)
    return True


def _float_to_integer_as_cpu(graph, node) -> bool:
    """A float -> integer conversion as CPU's: truncated to int64 or int32 (NaN and values out of
    range: its minimum, x86's "integer indefinite"), then wrapped to a narrower integer."""
    import torch

    x, src, dst = node.args[0], _dtype(node.args[0]), _dtype(node)
    if (src is None or dst is None or not src.is_floating_point or src == torch.float64 or dst.is_floating_point
            or dst in (torch.bool, torch.uint16, torch.uint32, torch.uint64) or len(node.args) != (
            1 if node.target is torch.ops.aten._to_copy.default else 2)):
        return False
    aten = torch.ops.aten
    wide = torch.int64 if dst == torch.int64 else torch.int32
    limit = float(2 ** (63 if wide == torch.int64 else 31))
    with graph.inserting_before(node):
        f = _call(graph, aten._to_copy.default, (x,), {"dtype": torch.float32}, like=node) if src != torch.float32 else x
        out_of_range = _call(graph, aten.logical_or.default, (
            _call(graph, aten.isnan.default, (f,), like=node),
            _call(graph, aten.logical_or.default, (_call(graph, aten.ge.Scalar, (f, limit), like=node),
                                                    _call(graph, aten.lt.Scalar, (f, -limit), like=node)), like=node)),
            like=node)
        inside = _call(graph, aten.masked_fill.Scalar, (f, out_of_range, 0.0), like=node)
        converted = _call(graph, aten._to_copy.default, (inside,), {"dtype": wide}, like=node)
        converted = _call(graph, aten.masked_fill.Scalar, (converted, out_of_range, -int(limit)), like=node)
        if dst != wide:
            converted = _call(graph, aten._to_copy.default, (converted,), {"dtype": dst}, like=node)
    node.replace_all_uses_with(converted)
    graph.erase_node(node)
    return True


def _replace(graph, node, new) -> bool:
    node.replace_all_uses_with(new)
    graph.erase_node(node)
    return True


def _diagonal_as_slices(graph, node) -> bool:
    """``diagonal(x, offset, dim1, dim2)`` as ``x`` with ``dim1``, ``dim2`` moved last, the offset
    cut off (columns for a positive one, rows for a negative one), the last two dims (n, m)
    flattened and read from 0 with a step of ``m + 1``: ``min(n, m)`` elements."""
    import torch

    aten = torch.ops.aten
    x = node.args[0]
    val = x.meta.get("val")
    offset, d1, d2 = _arg(node, 1, "offset", 0), _arg(node, 2, "dim1", 0), _arg(node, 3, "dim2", 1)
    if (not isinstance(val, torch.Tensor) or val.dim() < 2 or not all(isinstance(v, int) for v in (offset, d1, d2))
            or not all(isinstance(s, int) for s in val.shape)):
        return False
    d1, d2 = d1 % val.dim(), d2 % val.dim()
    batch = [k for k in range(val.dim()) if k not in (d1, d2)]
    n, m = val.shape[d1], val.shape[d2]
    with graph.inserting_before(node):
        y = _call(graph, aten.permute.default, (x, [*batch, d1, d2]), like=node)
        if offset > 0:
            y = _call(graph, aten.slice.Tensor, (y, -1, min(offset, m), m), like=node)
            m = max(m - offset, 0)
        elif offset < 0:
            y = _call(graph, aten.slice.Tensor, (y, -2, min(-offset, n), n), like=node)
            n = max(n + offset, 0)
        y = _call(graph, aten.reshape.default, (y, [val.shape[k] for k in batch] + [n * m]), like=node)
        k = min(n, m)
        y = _call(graph, aten.slice.Tensor, (y, -1, 0, (k - 1) * (m + 1) + 1 if k else 0, m + 1), like=node)
    return _replace(graph, node, y)


def _unfold_as_slices(graph, node) -> bool:
    """``x.unfold(dim, size, step)``: window ``w`` of ``n`` is ``x[..., w * step : w * step + size, ...]``.
    Stacked at ``dim`` (the window's elements moved last), or, with fewer positions than windows,
    position ``j`` of every window (a slice with ``step``) stacked last."""
    import torch

    aten = torch.ops.aten
    x, dim, size, step = node.args[0], node.args[1], node.args[2], node.args[3]
    val, result = x.meta.get("val"), node.meta.get("val")
    if (not isinstance(val, torch.Tensor) or val.dim() == 0 or not all(isinstance(v, int) for v in (dim, size, step))
            or not all(isinstance(s, int) for s in result.shape)):
        return False  # a 0-dim x unfolds to [size]: left to torch-mlir
    dim %= val.dim()
    n = result.shape[dim]
    with graph.inserting_before(node):
        if n <= size:
            windows = [_call(graph, aten.slice.Tensor, (x, dim, w * step, w * step + size), like=node) for w in range(n)]
            y = _call(graph, aten.stack.default, (windows, dim), like=node)
            order = [*range(dim + 1), *range(dim + 2, val.dim() + 1), dim + 1]
            y = _call(graph, aten.permute.default, (y, order), like=node)
        else:
            positions = [_call(graph, aten.slice.Tensor, (x, dim, j, j + (n - 1) * step + 1, step), like=node)
                         for j in range(size)]
            y = _call(graph, aten.stack.default, (positions, -1), like=node)
    return _replace(graph, node, y)


def _compare_in_result_dtype(graph, node) -> bool:
    """A comparison's tensor operands converted to ``torch.result_type`` of its two operands (a
    number then takes that dtype in torch-mlir's lowering, wrapped as CPU wraps it); bools to int32."""
    import torch

    a, b = node.args[0], node.args[1]
    a_val = a.meta.get("val") if isinstance(a, torch.fx.Node) else None
    b_val = b.meta.get("val") if isinstance(b, torch.fx.Node) else b
    if not isinstance(a_val, torch.Tensor) or not isinstance(b_val, (torch.Tensor, bool, int, float)):
        return False
    dtype = torch.result_type(a_val, b_val)
    if dtype == torch.bool:  # torch-mlir folds a constant i1 tensor's true as -1 (``v > False`` -> false)
        dtype = torch.int32
    operands, changed = [], False
    for operand, val in ((a, a_val), (b, b_val)):
        if isinstance(val, torch.Tensor) and val.dtype != dtype:
            with graph.inserting_before(node):
                operand = _call(graph, torch.ops.aten._to_copy.default, (operand,), {"dtype": dtype}, like=node)
            changed = True
        operands.append(operand)
    if changed:
        node.args = (*operands, *node.args[2:])
    return changed


def _narrowed(graph, node, dtype, like):
    """``node``'s integers converted to ``dtype``, wrapped modulo 2**8 for (u)int8 as CPU's
    conversion wraps (the NeuronCore's saturates)."""
    import torch

    aten = torch.ops.aten
    steps, x = [], node
    if dtype == torch.int8:  # ((x + 128) & 255) - 128
        steps = [(aten.add.Scalar, 128), (aten.bitwise_and.Scalar, 255), (aten.sub.Scalar, 128)]
    elif dtype == torch.uint8:
        steps = [(aten.bitwise_and.Scalar, 255)]
    for op, value in steps:
        x = _call(graph, op, (x, value), like=like)
    return _call(graph, aten._to_copy.default, (x,), {"dtype": dtype}, like=like)


def _wrap_negative_indices(graph, node) -> bool:
    """Integer indices of ``index`` / ``index_put`` wrapped: ``where(i < 0, i + size, i)``."""
    import torch

    x, indices = node.args[0], list(node.args[1])
    shape = getattr(x.meta.get("val"), "shape", None)
    if shape is None or len(indices) > len(shape):
        return False
    kinds = [_dtype(i) for i in indices if i is not None]
    if any(d is None or not (d.is_signed and not d.is_floating_point) for d in kinds):
        return False  # a mask (bool / uint8) indexes several dims, or a value we cannot see
    changed = False
    with graph.inserting_before(node):
        for d, i in enumerate(indices):
            if i is None or not isinstance(shape[d], int):
                continue
            negative = _call(graph, torch.ops.aten.lt.Scalar, (i, 0), like=node)
            shifted = _call(graph, torch.ops.aten.add.Scalar, (i, shape[d]), like=node)
            indices[d] = _call(graph, torch.ops.aten.where.self, (negative, shifted, i), like=node)
            changed = True
    node.args = (x, indices, *node.args[2:])
    return changed
