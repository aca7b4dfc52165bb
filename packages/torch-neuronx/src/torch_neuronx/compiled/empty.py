"""Calls over empty tensors: nothing to compute, only results to make.

A NEFF cannot bind a zero-byte buffer, and none is needed: when every tensor a call produces is
empty (``torch.rsqrt`` of a ``[0, 3]`` tensor, ``fill_`` of an empty one, ``new_zeros(0)``), no
kernel runs on the device. The call runs CPU's kernel over uninitialized CPU stand-ins of its
operands (their values cannot matter: the results hold none), which gives exactly CPU's result
shapes, strides and dtypes - and CPU's errors, for a dtype its kernel lacks - and the results are
allocated on the device to match. A call that produces values from empty inputs (a sum over an
empty dim is zeros), or reads integer operands that may be indices (whose bounds CPU checks), goes
through the CPU fallback instead.
"""

from __future__ import annotations

import torch
from torch.utils._pytree import tree_flatten, tree_unflatten

from ..ops.schema import mutated_arguments
from ..ops.stand_ins import resize_as, stand_ins
from .dtypes import NotLowerable


class EmptyOperand(NotLowerable):
    """A neuron tensor operand (or result) holds no elements."""


def run_without_kernel(op, args, kwargs, targets: list[torch.Tensor] | None, device: torch.device):
    """The results of ``op`` if all of them are empty, else raise NotLowerable."""
    operands = [x for x in tree_flatten((args, kwargs))[0] if isinstance(x, torch.Tensor)]
    if any(x.numel() and not (x.is_floating_point() or x.dtype == torch.bool) for x in operands):
        raise NotLowerable("integer operands of an op over an empty tensor (index bounds are checked by CPU's kernel)")
    cpu_args, cpu_kwargs = stand_ins(args, kwargs)  # one per tensor: an out= tensor that is an input too is not resized
    result = op(*cpu_args, **cpu_kwargs)  # CPU's own errors (a dtype it lacks...) propagate as they are
    leaves, spec = tree_flatten(result)
    if any(isinstance(x, torch.Tensor) and x.numel() for x in leaves):
        raise NotLowerable("values computed from an empty tensor (a reduction over an empty dim)")
    if mutated_arguments(op):  # in place or out=: the written tensors are the results, resized as CPU's were
        written = {id(x): x for x in tree_flatten((cpu_args, cpu_kwargs))[0] if isinstance(x, torch.Tensor)}
        by_identity = [id(x) for x in leaves if isinstance(x, torch.Tensor)]
        for target, cpu in zip(targets, [written[i] for i in dict.fromkeys(by_identity) if i in written]):
            resize_as(target, cpu)
        return targets[0] if len(targets) == 1 else tuple(targets)
    made = [torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device=device) if isinstance(x, torch.Tensor) else x
            for x in leaves]
    return tree_unflatten(made, spec)
