"""Which calls go to a kernel: each op's wrapper asks ``refusal(...)`` before calling its custom
op, and runs the plain torch ops instead when a kernel refuses the arguments.

The question is put with shapes and dtype names only (``TensorSpec``), through a function that
torch.compile evaluates once while tracing (``assume_constant_result``): the kernels' own
argument checks raise NkilibError, which dynamo cannot trace, and the answer depends on nothing
but the static shapes and dtypes the graph is specialized on anyway. The fallback is then plain
torch ops in the traced graph (compiled with the rest of it) and in eager alike, with autograd's
own backward.
"""

from __future__ import annotations

import warnings
from typing import NamedTuple

import torch

from nkilib import NkilibError


class NkilibFallbackWarning(UserWarning):
    """An nkilib.torch op ran the plain torch ops: a kernel does not take these arguments."""


class TensorSpec(NamedTuple):
    """What the kernels' argument checks read of a tensor."""

    shape: tuple
    dtype: str


def spec(t: torch.Tensor) -> TensorSpec:
    return TensorSpec(tuple(int(d) for d in t.shape), str(t.dtype).removeprefix("torch."))


# op name -> check(*specs, *constants) raising NkilibError for arguments its kernels refuse
CHECKS: dict = {}
_warned: set = set()


@torch.compiler.assume_constant_result
def refusal(op: str, args: tuple) -> str:
    """'' if op's kernels take ``args`` (TensorSpecs and constants), else why not - warned once
    per op, shapes and dtypes (NkilibFallbackWarning)."""
    try:
        CHECKS[op](*args)
    except NkilibError as err:
        key = (op, args)
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"nkilib.torch.{op}: the plain torch ops run instead of the kernel: {err}",
                          NkilibFallbackWarning, stacklevel=3)
        return str(err)
    return ""


def refuse(rule: str, message: str) -> None:
    """For checks of the torch side itself (an argument a kernel op has no slot for)."""
    raise NkilibError(rule, message)


def wants_grad(*tensors) -> bool:
    return torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors)
