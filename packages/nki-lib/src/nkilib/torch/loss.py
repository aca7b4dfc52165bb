"""Cross-entropy as a torch op: ``nkilib::cross_entropy`` (per-row loss and logsumexp) and
``nkilib::cross_entropy_backward``; the wrapper adds F.cross_entropy's ignore_index and
reduction around them."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_neuronx import nki_op

# (by name: nkilib.loss's cross_entropy attribute is the function, not the module)
from nkilib.loss.cross_entropy import check_forward, cross_entropy_backward
from nkilib.loss.cross_entropy import cross_entropy as cross_entropy_forward
from nkilib.torch._support import CHECKS, refusal, refuse, spec

REDUCTIONS = ("mean", "sum", "none")


@nki_op("nkilib::cross_entropy", mutates_args=())
def cross_entropy_op(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(loss [N] fp32, lse [N] fp32); every label must be a class index in [0, C)."""
    return cross_entropy_forward(logits.contiguous(), labels.contiguous())


@nki_op("nkilib::cross_entropy_backward", mutates_args=())
def cross_entropy_backward_op(logits: torch.Tensor, labels: torch.Tensor, lse: torch.Tensor,
                              dloss: torch.Tensor) -> torch.Tensor:
    return cross_entropy_backward(logits.contiguous(), labels.contiguous(), lse.contiguous(), dloss.float().contiguous())


def _setup(ctx, inputs, output):
    logits, labels = inputs
    ctx.save_for_backward(logits, labels, output[1])


def _backward(ctx, dloss, _dlse):
    # lse is an auxiliary result (the backward's saved statistic): the wrapper never returns it
    logits, labels, lse = ctx.saved_tensors
    return cross_entropy_backward_op(logits, labels, lse, dloss), None


cross_entropy_op.register_autograd(_backward, setup_context=_setup)


def _check(logits, labels, reduction):
    if reduction not in REDUCTIONS:
        refuse("cross_entropy.reduction", f"reduction={reduction!r}; expected one of {REDUCTIONS}")
    check_forward(logits, labels)


CHECKS["cross_entropy"] = _check


def cross_entropy(logits: torch.Tensor, labels: torch.Tensor, ignore_index: int = -100,
                  reduction: str = "mean") -> torch.Tensor:
    """``F.cross_entropy(logits, labels, ignore_index=..., reduction=...)`` for logits [N, C] and
    class indices [N], through the kernels on neuron tensors (rows labelled ignore_index count
    for nothing, as in torch)."""
    if all(t.device.type == "neuron" for t in (logits, labels)) and not refusal(
            "cross_entropy", (spec(logits), spec(labels), reduction)):
        valid = labels != ignore_index
        loss, _ = cross_entropy_op(logits, torch.where(valid, labels, torch.zeros_like(labels)))
        loss = torch.where(valid, loss, torch.zeros_like(loss))
        if reduction == "sum":
            loss = loss.sum()
        elif reduction == "mean":
            loss = loss.sum() / valid.sum()
        return loss.to(logits.dtype)
    return F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction=reduction)
