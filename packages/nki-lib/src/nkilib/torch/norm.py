"""RMSNorm, LayerNorm and the fused residual add + RMSNorm as torch ops: ``nkilib::rms_norm``,
``nkilib::layer_norm``, ``nkilib::residual_rms_norm`` and their backward ops, trainable through
register_autograd. The wrappers take the kernels' path on neuron tensors they support and
torch's own ops otherwise (see ``_support``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch_neuronx import nki_op

from nkilib.norm import layernorm, residual_rmsnorm, rmsnorm
from nkilib.torch._support import CHECKS, refusal, spec, wants_grad


def _on_device(*tensors) -> bool:
    return all(t is not None and t.device.type == "neuron" for t in tensors)


# ---- RMSNorm ---------------------------------------------------------------------------------

@nki_op("nkilib::rms_norm", mutates_args=())
def rms_norm_op(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return rmsnorm.rms_norm(x.contiguous(), weight.contiguous(), eps)


@nki_op("nkilib::rms_norm_backward", mutates_args=())
def rms_norm_backward_op(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = rmsnorm.rms_norm_backward(dy.contiguous(), x.contiguous(), weight.contiguous(), eps)
    return dx, dw.to(weight.dtype)


def _rms_setup(ctx, inputs, output):
    x, weight, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dw = rms_norm_backward_op(dy, x, weight, ctx.eps)
    return dx, dw, None


rms_norm_op.register_autograd(_rms_backward, setup_context=_rms_setup)


def _check_rms(x, weight, grad):
    rmsnorm.check_forward(x, weight)
    if grad:
        rmsnorm.check_backward(x, x, weight)


CHECKS["rms_norm"] = _check_rms


def rms_norm(x: torch.Tensor, weight: torch.Tensor | None, eps: float = 1e-6) -> torch.Tensor:
    """``F.rms_norm(x, (H,), weight, eps)`` over the last dim, through the kernel on neuron tensors."""
    if _on_device(x, weight) and not refusal("rms_norm", (spec(x), spec(weight), wants_grad(x, weight))):
        return rms_norm_op(x, weight, float(eps))
    return F.rms_norm(x, (x.shape[-1],), weight, eps)


# ---- LayerNorm -------------------------------------------------------------------------------

@nki_op("nkilib::layer_norm", mutates_args=())
def layer_norm_op(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
    return layernorm.layer_norm(x.contiguous(), weight.contiguous(), bias.contiguous(), eps)


@nki_op("nkilib::layer_norm_backward", mutates_args=())
def layer_norm_backward_op(dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                           eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    dx, dw, db = layernorm.layer_norm_backward(dy.contiguous(), x.contiguous(), weight.contiguous(), eps)
    return dx, dw.to(weight.dtype), db.to(weight.dtype)


def _ln_setup(ctx, inputs, output):
    x, weight, _bias, eps = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _ln_backward(ctx, dy):
    x, weight = ctx.saved_tensors
    dx, dw, db = layer_norm_backward_op(dy, x, weight, ctx.eps)
    return dx, dw, db, None


layer_norm_op.register_autograd(_ln_backward, setup_context=_ln_setup)


def _check_ln(x, weight, bias, grad):
    layernorm.check_forward(x, weight, bias)
    if grad:
        layernorm.check_backward(x, x, weight)


CHECKS["layer_norm"] = _check_ln


def layer_norm(x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None,
               eps: float = 1e-5) -> torch.Tensor:
    """``F.layer_norm(x, (H,), weight, bias, eps)`` over the last dim, through the kernel on neuron
    tensors (weight and bias both given)."""
    if _on_device(x, weight, bias) and not refusal(
            "layer_norm", (spec(x), spec(weight), spec(bias), wants_grad(x, weight, bias))):
        return layer_norm_op(x, weight, bias, float(eps))
    return F.layer_norm(x, (x.shape[-1],), weight, bias, eps)


# ---- residual add + RMSNorm ------------------------------------------------------------------

@nki_op("nkilib::residual_rms_norm", mutates_args=())
def residual_rms_norm_op(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                         eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    return residual_rmsnorm.residual_rms_norm(x.contiguous(), residual.contiguous(), weight.contiguous(), eps)


def _res_setup(ctx, inputs, output):
    _x, _residual, weight, eps = inputs
    ctx.save_for_backward(output[1], weight)  # h = x + residual, as the kernel rounded it
    ctx.eps = eps


def _res_backward(ctx, dy, dh):
    h, weight = ctx.saved_tensors
    dh_norm, dw = rms_norm_backward_op(dy, h, weight, ctx.eps)
    dsum = dh_norm + dh  # h is an output too: its own gradient adds to the norm's
    return dsum, dsum, dw, None


residual_rms_norm_op.register_autograd(_res_backward, setup_context=_res_setup)


def _check_res(x, residual, weight, grad):
    residual_rmsnorm.check_forward(x, residual, weight)
    if grad:
        rmsnorm.check_backward(x, x, weight)


CHECKS["residual_rms_norm"] = _check_res


def residual_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor | None,
                      eps: float = 1e-6) -> tuple[torch.Tensor, torch.Tensor]:
    """``(F.rms_norm(h, (H,), weight, eps), h)`` with ``h = x + residual``, through the fused kernel
    on neuron tensors."""
    if _on_device(x, residual, weight) and not refusal(
            "residual_rms_norm", (spec(x), spec(residual), spec(weight), wants_grad(x, residual, weight))):
        return residual_rms_norm_op(x, residual, weight, float(eps))
    h = x + residual
    return F.rms_norm(h, (h.shape[-1],), weight, eps), h
