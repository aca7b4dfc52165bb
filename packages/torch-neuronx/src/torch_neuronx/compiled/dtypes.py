"""torch dtypes <-> NeuronCore dtype names, and the signal that a call has no device lowering."""

from __future__ import annotations

import torch

_TORCH_TO_SIM = {
    torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16", torch.int32: "int32",
    torch.int64: "int64", torch.int16: "int16", torch.int8: "int8", torch.uint8: "uint8", torch.bool: "bool",
}
_SIM_TO_TORCH = {v: k for k, v in _TORCH_TO_SIM.items()}


class NotLowerable(Exception):
    """This call (dtype, argument, layout, op) has no device lowering: it runs through CPU fallback."""


def sim_dtype(dtype: torch.dtype) -> str:
    try:
        return _TORCH_TO_SIM[dtype]
    except KeyError:
        raise NotLowerable(f"{dtype} is not a NeuronCore dtype (float64 and complex run through CPU fallback)") from None


def torch_dtype(name: str) -> torch.dtype:
    return _SIM_TO_TORCH[name]
