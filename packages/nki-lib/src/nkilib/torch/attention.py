"""Flash attention as a torch op: ``nkilib::flash_attention`` (forward only). The wrapper takes
F.scaled_dot_product_attention's arguments; calls it cannot serve - a gradient needed (no
backward kernel yet), an attention mask, dropout, another layout - run F.scaled_dot_product_attention."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch_neuronx import nki_op

from nkilib.attention.flash_attention import check
from nkilib.attention.flash_attention import flash_attention as flash_attention_forward
from nkilib.torch._support import CHECKS, refusal, refuse, spec, wants_grad


@nki_op("nkilib::flash_attention", mutates_args=())
def flash_attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float) -> torch.Tensor:
    return flash_attention_forward(q.contiguous(), k.contiguous(), v.contiguous(), causal, scale)


def _check(q, k, v, grad, masked, dropout, gqa, causal):
    if grad:
        refuse("attention.backward", "a gradient is needed; the library has no flash attention backward kernel yet")
    if masked or dropout:
        refuse("attention.arguments", "attn_mask and dropout_p are not kernel arguments")
    if q.shape[1] != k.shape[1] and not gqa:
        refuse("attention.heads", f"{q.shape[1]} query heads over {k.shape[1]} without enable_gqa=True")
    if causal and q.shape[2] != k.shape[2]:
        # torch's is_causal aligns the mask top-left (query i sees keys 0..i), the kernel bottom-right
        refuse("attention.causal", f"is_causal with {q.shape[2]} queries over {k.shape[2]} keys (torch aligns it top-left)")
    check(q, k, v, causal)


CHECKS["flash_attention"] = _check


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attn_mask=None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` for q [B, Hq, S, d], k/v [B, Hkv, S, d], through the
    flash attention kernel on neuron tensors (inference: no gradient)."""
    if all(t.device.type == "neuron" for t in (q, k, v)) and not refusal(
            "flash_attention", (spec(q), spec(k), spec(v), wants_grad(q, k, v), attn_mask is not None,
                                dropout_p != 0.0, bool(enable_gqa), bool(is_causal))):
        return flash_attention_op(q, k, v, bool(is_causal), 1.0 / math.sqrt(q.shape[-1]) if scale is None else float(scale))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                                          scale=scale, enable_gqa=enable_gqa)
