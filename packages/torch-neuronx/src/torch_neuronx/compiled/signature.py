"""The signature of one op call: what its compiled NEFF depends on, and its device tensors.

A NEFF depends on each tensor argument's shape, strides and dtype (not its address or storage
offset: buffers are bound at launch) and on every other argument's value. Walking the arguments
by hand instead of with pytree keeps this cheap: it runs on every op call.
"""

from __future__ import annotations

import math

import torch

from .dtypes import NotLowerable
from .empty import EmptyOperand

_SCALARS = (bool, int, float, str, type(None), torch.dtype, torch.layout, torch.memory_format)


def call_signature(args, kwargs, out_names: frozenset = frozenset()) -> tuple[tuple, list[torch.Tensor]]:
    """(hashable key of the arguments, their non-empty neuron tensors in pytree leaf order).
    ``out=`` arguments (``out_names``) are in the key but not among the tensors: they are written,
    not read, and may be empty until resized. An empty operand beside non-empty ones is in the
    key only (its shape, strides and dtype are all there is to it: the graph makes it itself, as
    the saved statistics a batch norm in eval hands its backward); raises EmptyOperand if every
    tensor operand is empty (nothing to compute on the device)."""
    tensors: list[torch.Tensor] = []
    key: list = []
    empties: list[torch.Tensor] = []
    _scan(args, tensors, key, empties)
    for name, value in kwargs.items():
        key.append(name)
        if name in out_names:
            _scan((value,), [], key, [])
        else:
            _scan((value,), tensors, key, empties)
    if empties and not tensors:
        raise EmptyOperand("an empty tensor")
    return tuple(key), tensors


def _scan(values, tensors: list, key: list, empties: list) -> None:
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.device.type != "neuron":
                if v.device.type == "cpu" and v.dim() == 0:  # a host scalar: baked in, like a number
                    # A wrapped number promotes as a number, a 0-d tensor as a tensor: not one entry.
                    key.append(("cpu0d", v.dtype, v.item(), getattr(v, "_tnx_wrapped_number", False)))
                    continue
                raise NotLowerable("a CPU tensor operand")  # CPU indices...: the fallback knows the rules
            if v.numel() == 0:
                empties.append(v)
                key.append(("empty", v.dtype, v.shape, v.stride()))
                continue
            tensors.append(v)
            key.append((v.dtype, v.shape, v.stride()))
        elif isinstance(v, (list, tuple)):
            key.append(len(v))
            _scan(v, tensors, key, empties)
        elif isinstance(v, float):
            # NaN != NaN would make the key never hit; 1.0 and 1 must not share an entry.
            key.append(("f", v if v == v else "nan", math.copysign(1.0, v)))
        elif isinstance(v, torch.device):
            if v.type != "neuron":
                raise NotLowerable(f"a result on {v}")
            key.append("device")
        elif isinstance(v, _SCALARS):
            key.append((type(v), v))
        else:
            raise NotLowerable(f"an argument of type {type(v).__name__}")
