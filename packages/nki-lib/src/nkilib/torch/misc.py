"""Softmax over the last dim as a torch op: ``nkilib::softmax`` and ``nkilib::softmax_backward``."""

from __future__ import annotations

import torch
from torch_neuronx import nki_op

from nkilib.misc import lastdim_softmax
from nkilib.torch._support import CHECKS, refusal, refuse, spec, wants_grad


@nki_op("nkilib::softmax", mutates_args=())
def softmax_op(x: torch.Tensor) -> torch.Tensor:
    return lastdim_softmax.softmax(x.contiguous())


@nki_op("nkilib::softmax_backward", mutates_args=())
def softmax_backward_op(dy: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return lastdim_softmax.softmax_backward(dy.contiguous(), y.contiguous())


def _setup(ctx, inputs, output):
    ctx.save_for_backward(output)  # the backward needs y only


def _backward(ctx, dy):
    (y,) = ctx.saved_tensors
    return softmax_backward_op(dy, y)


softmax_op.register_autograd(_backward, setup_context=_setup)


def _check(x, dim, grad):
    if dim not in (-1, len(x.shape) - 1):
        refuse("softmax.dim", f"dim={dim} of x {list(x.shape)}; the kernel normalizes the last dim")
    lastdim_softmax.check_forward(x)
    if grad:
        lastdim_softmax.check_backward(x, x)


CHECKS["softmax"] = _check


def softmax(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """``torch.softmax(x, dim)``, through the kernel on neuron tensors when dim is the last."""
    if x.device.type == "neuron" and not refusal("softmax", (spec(x), dim, wants_grad(x))):
        return softmax_op(x)
    return torch.softmax(x, dim)
