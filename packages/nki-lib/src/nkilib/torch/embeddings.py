"""Rotary position embedding as a torch op: ``nkilib::rope`` (its backward is the same kernel
rotating back), on x [B, S, H, D] or [S, H, D] with cos/sin tables [S, D/2]."""

from __future__ import annotations

import torch
from torch_neuronx import nki_op

from nkilib.embeddings import rotary
from nkilib.torch._support import CHECKS, refusal, refuse, spec, wants_grad


@nki_op("nkilib::rope", mutates_args=())
def rope_op(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str, inverse: bool) -> torch.Tensor:
    run = rotary.rope_backward if inverse else rotary.rope
    return run(x.contiguous(), cos.contiguous(), sin.contiguous(), layout)


def _setup(ctx, inputs, output):
    _x, cos, sin, layout, inverse = inputs
    ctx.save_for_backward(cos, sin)
    ctx.layout, ctx.inverse = layout, inverse


def _backward(ctx, dy):
    cos, sin = ctx.saved_tensors
    # a rotation's gradient is the opposite rotation; the tables get none (see _check)
    return rope_op(dy, cos, sin, ctx.layout, not ctx.inverse), None, None, None, None


rope_op.register_autograd(_backward, setup_context=_setup)


def _check(x, cos, sin, layout, table_grad):
    rotary.check(x, cos, sin, layout)
    if table_grad:
        refuse("rope.table_grad", "cos or sin requires grad; the kernel differentiates x only")


CHECKS["rope"] = _check


def rope_plain(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """The same rotation in plain torch ops (the fallback, differentiable in every argument)."""
    c, s = cos[:, None, :], sin[:, None, :]  # [S, 1, D/2]: one angle for every head
    half = x.shape[-1] // 2
    if layout == "half":
        a, b = x[..., :half], x[..., half:]
        return torch.cat([a * c - b * s, b * c + a * s], dim=-1)
    a, b = x[..., 0::2], x[..., 1::2]
    return torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2)


def rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, layout: str = "half") -> torch.Tensor:
    """x rotated by position (layout ``"half"``: HF rotate_half; ``"interleaved"``: GPT-J pairs),
    through the kernel on neuron tensors."""
    if layout not in rotary.LAYOUTS:  # not a fallback: no form of the op takes it
        refuse("rope.layout", f"layout={layout!r}; expected one of {rotary.LAYOUTS}")
    on_device = all(t.device.type == "neuron" for t in (x, cos, sin))
    if on_device and not refusal("rope", (spec(x), spec(cos), spec(sin), layout, wants_grad(cos, sin))):
        return rope_op(x, cos, sin, layout, False)
    return rope_plain(x, cos, sin, layout)
