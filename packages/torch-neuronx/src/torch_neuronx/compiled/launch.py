"""Launching a compiled op on the current stream: bind device buffers, queue the NEFF, return tensors.

Buffers are the tensors' own device memory (zero-copy): each input from its first element over
its storage span, each output a new device tensor - or, for a mutating op, the written tensor
itself when the in-place plan allows it (``in_place``). Otherwise results go to a temporary and are
copied in after the launch, in stream order.
"""

from __future__ import annotations

import torch

from ..execution import launch_neff
from .dtypes import NotLowerable
from .entry import CompiledNeff
from .in_place import in_place_pairs, may_write_in_place

_IN_NAMES: list[str] = []
_OUT_NAMES: list[str] = []


class OverlappingTarget(NotLowerable):
    """A written tensor whose elements share memory (an expanded view): a result computed into a
    temporary cannot be copied into it, and only CPU's kernel says what the op does there
    (``fill_`` writes every element, ``add_`` refuses)."""


def _names(names: list[str], prefix: str, count: int) -> list[str]:
    """``prefix0, prefix1...``: the graph's tensor names, made once."""
    while len(names) < count:
        names.append(f"{prefix}{len(names)}")
    return names


def launch_op(entry: CompiledNeff, op, tensors: list[torch.Tensor], targets: list[torch.Tensor] | None, device: torch.device):
    """Launch ``entry`` over ``tensors``; ``targets`` are the tensors a mutating op writes."""
    buffers = {}  # the program's own constants bind themselves (neuron_sim.runtime.constants)
    for name, t, nbytes in zip(_names(_IN_NAMES, "in", len(tensors)), tensors, entry.in_nbytes):
        buffers[name] = (t, nbytes)
    written = entry.output_targets(targets) if targets is not None else None
    in_place = [writes_in_place(entry, j, t, targets, tensors) for j, t in enumerate(written)] \
        if targets is not None else None
    if in_place is not None and not all(in_place) and any(
            torch._debug_has_internal_overlap(t) == 1 for t, ok in zip(written, in_place) if not ok):
        raise OverlappingTarget(f"{op._schema.name} writes a tensor whose elements share memory")
    results, copies = [], []
    out_names = _names(_OUT_NAMES, "out", len(entry.outputs))
    for j, spec in enumerate(entry.outputs):
        target = written[j] if targets is not None else None
        if target is not None and in_place[j]:
            out = target
        else:
            out = torch.empty_strided(spec.shape, spec.strides, dtype=spec.dtype, device=device)
            if target is not None:
                copies.append((target, out))
        buffers[out_names[j]] = (out, spec.nbytes)
        results.append(out)
    launch_neff(entry.neff, buffers, device=device, name=op._schema.name, context=entry.context, framework="eager",
                errors=entry.errors)
    for target, out in copies:
        target.copy_(out)
    if targets is not None:
        leaves = targets[: entry.out_spec.num_leaves]
    else:
        leaves = entry.result_leaves(results, device)
    return entry.out_spec.unflatten(leaves)


def writes_in_place(entry: CompiledNeff, j: int, target: torch.Tensor, targets, tensors) -> bool:
    """Whether output ``j`` of ``entry`` may be written straight into ``target``, one of the
    ``targets`` a mutating op writes, with ``tensors`` its inputs."""
    return may_write_in_place(in_place_pairs(entry.neff), j, target, entry.outputs[j].strides, tensors, targets)
