"""Calls that write memory they also read: when only CPU's own kernel can say what they do.

CPU kernels check the memory a call writes against what it reads before they resize or compute
(ATen's ``assert_no_internal_overlap`` / ``assert_no_partial_overlap`` / ``assert_no_overlap``,
and TensorIterator's rule that an output which is also an input is never resized). Their answer
differs by op - an elementwise op may write the very tensor it reads, ``cat`` may not; a
reduction into part of its input is allowed - so rather than copy those rules op by op, a call
whose written and read memory overlap in a way that is not plain in-place is run by CPU's kernel
over host views of the same device memory, at the call: it raises CPU's error, or computes what
CPU computes with the same aliasing. Resizing an ``out=`` tensor that overlaps an input before
that check made the device path loop (``torch.cat([x, x], out=x)`` doubled ``x`` until the HBM
was exhausted).
"""

from __future__ import annotations

import functools

import torch

# Ops whose CPU kernels refuse any overlap of the written tensor with a (non-self) input, even the
# same tensor (ATen's assert_no_overlap), by schema name without the in-place underscore.
NO_OVERLAP_OPS = frozenset({
    "aten::cat", "aten::stack", "aten::index_select", "aten::gather", "aten::take", "aten::index_add", "aten::index_copy",
    "aten::scatter", "aten::scatter_add", "aten::scatter_reduce", "aten::put", "aten::cross", "aten::linalg_cross",
    "aten::index_put", "aten::_index_put_impl",
})
# Those of them that update ``self``: an out= tensor that is ``self`` itself is their in-place
# form (``x.scatter_(1, i, 1.0)`` reaches the device as ``scatter.value_out(x, ..., out=x)``),
# which CPU's kernels take; any other overlap is still CPU's to judge.
UPDATES_SELF_OPS = frozenset({
    "aten::scatter", "aten::scatter_add", "aten::scatter_reduce", "aten::index_add", "aten::index_copy", "aten::put",
    "aten::index_put", "aten::_index_put_impl",
})


@functools.cache
def _fills_its_output_first(op_name: str) -> bool:
    """A reduction (``torch.Tag.reduction``: sum, prod, amax, mean...): CPU's kernel fills its
    output with the reduction's identity before it reads the input, so a reduction whose out= is
    (an alias of) its input reads that - ``torch.sum(x, 0, out=x)`` of a 0-d ``x`` is 0."""
    namespace, _, base = op_name.removesuffix("_").partition("::")
    packet = getattr(getattr(torch.ops, namespace, None), base, None)
    return packet is not None and any(torch.Tag.reduction in getattr(packet, o).tags for o in packet.overloads())


def cpu_decides(op_name: str, in_place: bool, targets, inputs, result_shapes=None) -> bool:
    """Whether the call must run through CPU's kernel at once because what it writes overlaps
    what it reads. ``targets``: the tensors it writes (``self`` of an in-place op, or its out=
    tensors); ``inputs``: the tensors it reads (an in-place op's ``self`` among them);
    ``result_shapes``: the shape of each target's result, or None if not known yet (then an out=
    tensor overlapping an input at all is left to CPU).

    An out= tensor holding the same elements as an input (``cumsum(x, 0, out=x)``) is computed
    as the functional op and written back, as in-place ops are; CPU's kernels agree for every op
    but those that overwrite an operand while still reading it (``mm(a, a, out=a)``), whose
    result PyTorch leaves undefined - and reductions, which CPU's kernel computes from the
    output it first filled."""
    no_overlap = op_name.removesuffix("_") in NO_OVERLAP_OPS
    for j, target in enumerate(targets):
        if not isinstance(target, torch.Tensor) or target.numel() == 0:
            continue
        storage = target.untyped_storage().data_ptr()
        resized = result_shapes is not None and j < len(result_shapes) and tuple(target.shape) != tuple(result_shapes[j])
        if resized and in_place:
            return True  # CPU refuses to resize a tensor an op writes in place
        # an in-place op reads its own self once: that is not aliasing
        own_slot = in_place or (j == 0 and op_name.removesuffix("_") in UPDATES_SELF_OPS)
        for t in inputs:
            if not isinstance(t, torch.Tensor) or t.numel() == 0 or t.untyped_storage().data_ptr() != storage:
                continue
            if t is target and own_slot:
                own_slot = False
                continue
            if not _overlap(t, target):
                continue
            if result_shapes is None and not in_place:
                return True
            if resized or no_overlap or not _same_elements(t, target) or (not in_place and _fills_its_output_first(op_name)):
                return True
    return False


def _span(t: torch.Tensor) -> tuple[int, int]:
    """[first, last + 1) byte addresses of ``t``'s elements (strides are never negative)."""
    extent = sum((n - 1) * s for n, s in zip(t.shape, t.stride()) if n > 1)
    begin = t.data_ptr()
    return begin, begin + (extent + 1) * t.element_size()


def _overlap(a: torch.Tensor, b: torch.Tensor) -> bool:
    a_begin, a_end = _span(a)
    b_begin, b_end = _span(b)
    return a_begin < b_end and b_begin < a_end


def _same_elements(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same elements in the same order (ATen's "full" overlap, which elementwise ops allow)."""
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and torch._debug_has_internal_overlap(a) != 1)
