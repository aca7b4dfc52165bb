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
    """(hashable key of the arguments, their neuron tensors in pytree leaf order). ``out=``
    arguments (``out_names``) are in the key but not among the tensors: they are written, not
    read, and may be empty until resized."""
    tensors: list[torch.Tensor] = []
    key: list = []
    _scan(args, tensors, key)
    for name, value in kwargs.items():
        key.append(name)
        if name in out_names:
            _scan((value,), [], key, empty_ok=True)
        else:
            _scan((value,), tensors, key)
    return tuple(key), tensors


def _scan(values, tensors: list, key: list, empty_ok: bool = False) -> None:
    for v in values:
        if isinstance(v, torch.Tensor):
            if v.device.type != "neuron":
                if v.device.type == "cpu" and v.dim() == 0:  # a host scalar: baked in, like a number
                    # A wrapped number promotes as a number, a 0-d tensor as a tensor: not one entry.
                    key.append(("cpu0d", v.dtype, v.item(), getattr(v, "_tnx_wrapped_number", False)))
                    continue
                raise NotLowerable("a CPU tensor operand")  # CPU indices...: the fallback knows the rules
            if v.numel() == 0 and not empty_ok:
                raise EmptyOperand("an empty tensor")
            tensors.append(v)
            key.append((v.dtype, v.shape, v.stride()))
        elif isinstance(v, (list, tuple)):
            key.append(len(v))
            _scan(v, tensors, key, empty_ok)
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
