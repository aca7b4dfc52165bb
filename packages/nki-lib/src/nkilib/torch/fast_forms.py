"""Fast forms (``torch_neuronx.fast_form``) of every kernel: the same computation as torch ops,
rounded where the kernel rounds, so that launches on neuron tensors evaluate whole tensors under
the fast executor (NEURON_SIM_MODE=fast, the default) instead of interpreting the kernel's
instructions one by one; the device time is still the kernel's own. ``NEURON_SIM_MODE=exact``
runs the instructions; tests/torch/test_fast_forms.py compares the two (check_fast_form).

Each function takes the kernel's arguments and returns what the kernel returns (same shapes and
dtypes; weight gradients [1, H] fp32)."""

from __future__ import annotations

import torch
import torch_neuronx

from nkilib.attention.flash_attention import MASKED, flash_attention_kernel
from nkilib.attention.paged_attention import decode_attention_kernel, paged_attention_kernel
from nkilib.embeddings.rotary import rope_kernel
from nkilib.loss.cross_entropy import cross_entropy_backward_kernel, cross_entropy_kernel
from nkilib.misc.lastdim_softmax import softmax_backward_kernel, softmax_kernel
from nkilib.mlp.gated_mlp import gated_mlp_kernel
from nkilib.moe.blockwise_matmul import blockwise_matmul_backward_kernel, blockwise_matmul_kernel
from nkilib.moe.router import router_topk_kernel
from nkilib.norm.layernorm import layer_norm_backward_kernel, layer_norm_kernel
from nkilib.norm.residual_rmsnorm import residual_rms_norm_kernel
from nkilib.norm.rmsnorm import rms_norm_backward_kernel, rms_norm_kernel

f32 = torch.float32


def _inv_rms(xf, eps):
    return torch.rsqrt((xf * xf).mean(-1, keepdim=True) + eps)


def _scale_rows(xf, r, weight, dtype):
    """As rmsnorm.scale_rows: fp32 in one pass; half precision rounds x * r before the weight."""
    if dtype == f32:
        return xf * r * weight.to(f32)
    return ((xf * r).to(dtype).to(f32) * weight.to(f32)).to(dtype)


@torch_neuronx.fast_form(rms_norm_kernel)
def rms_norm_fast(x, weight, eps):
    xf = x.to(f32)
    return _scale_rows(xf, _inv_rms(xf, eps), weight, x.dtype).to(x.dtype)


@torch_neuronx.fast_form(rms_norm_backward_kernel)
def rms_norm_backward_fast(dy, x, weight, eps):
    xf, dyf = x.to(f32), dy.to(f32)
    r = _inv_rms(xf, eps)
    gy = dyf * weight.to(f32)
    dx = gy * r - xf * (r * r * r) * (gy * xf).mean(-1, keepdim=True)
    return dx.to(x.dtype), (dyf * xf * r).sum(0, keepdim=True)


@torch_neuronx.fast_form(residual_rms_norm_kernel)
def residual_rms_norm_fast(x, residual, weight, eps):
    h = (x.to(f32) + residual.to(f32)).to(x.dtype)
    hf = h.to(f32)
    return _scale_rows(hf, _inv_rms(hf, eps), weight, x.dtype).to(x.dtype), h


def _xhat(xf, eps):
    mean = xf.mean(-1, keepdim=True)
    rstd = torch.rsqrt(((xf - mean) ** 2).mean(-1, keepdim=True) + eps)
    return (xf - mean) * rstd, rstd


@torch_neuronx.fast_form(layer_norm_kernel)
def layer_norm_fast(x, weight, bias, eps):
    xhat, _ = _xhat(x.to(f32), eps)
    return (xhat * weight.to(f32) + bias.to(f32)).to(x.dtype)


@torch_neuronx.fast_form(layer_norm_backward_kernel)
def layer_norm_backward_fast(dy, x, weight, eps):
    dyf = dy.to(f32)
    xhat, rstd = _xhat(x.to(f32), eps)
    gy = dyf * weight.to(f32)
    dx = rstd * (gy - gy.mean(-1, keepdim=True) - xhat * (gy * xhat).mean(-1, keepdim=True))
    return dx.to(x.dtype), (dyf * xhat).sum(0, keepdim=True), dyf.sum(0, keepdim=True)


@torch_neuronx.fast_form(rope_kernel)
def rope_fast(x, cos, sin, layout, inverse):
    c, s = cos.to(f32)[:, None, :], sin.to(f32)[:, None, :]  # [S, 1, D/2]
    if inverse:
        s = -s
    xf = x.to(f32)
    half = x.shape[-1] // 2
    if layout == "half":
        a, b = xf[..., :half], xf[..., half:]
        return torch.cat([a * c - b * s, b * c + a * s], dim=-1).to(x.dtype)
    a, b = xf[..., 0::2], xf[..., 1::2]
    return torch.stack([a * c - b * s, b * c + a * s], dim=-1).flatten(-2).to(x.dtype)


@torch_neuronx.fast_form(softmax_kernel)
def softmax_fast(x):
    xf = x.to(f32)
    e = torch.exp(xf - xf.amax(-1, keepdim=True))
    return (e * (1.0 / e.sum(-1, keepdim=True))).to(x.dtype)


@torch_neuronx.fast_form(softmax_backward_kernel)
def softmax_backward_fast(dy, y):
    dyf, yf = dy.to(f32), y.to(f32)
    return ((dyf - (dyf * yf).sum(-1, keepdim=True)) * yf).to(y.dtype)


def _one_hot(labels, classes):
    """[R, C] bool: column == label (labels an [R, 1] fp32 column, as the kernels take them)."""
    return torch.arange(classes, dtype=f32, device=labels.device)[None, :] == labels


@torch_neuronx.fast_form(cross_entropy_kernel)
def cross_entropy_fast(logits, labels):
    xf = logits.to(f32)
    m = xf.amax(-1, keepdim=True)
    lse = torch.log(torch.exp(xf - m).sum(-1, keepdim=True)) + m
    # no column matching the label: -inf picked, an infinite loss (as the kernel's range_select)
    picked = torch.where(_one_hot(labels, xf.shape[-1]), xf, torch.full_like(xf, float("-inf"))).amax(-1, keepdim=True)
    return lse - picked, lse


@torch_neuronx.fast_form(cross_entropy_backward_kernel)
def cross_entropy_backward_fast(logits, labels, lse, dloss):
    e = torch.exp(logits.to(f32) - lse)
    hot = _one_hot(labels, logits.shape[-1]).to(f32)
    return (e * dloss - hot * dloss).to(logits.dtype)


def _attention(q, k, v, keep, scale):
    """softmax(q k^T * scale) v with the keys ``keep`` (broadcast to the scores) does not mask, rounded
    as the attention kernels round: V meets the probabilities in the I/O dtype, divided by the fp32 sum."""
    group = q.shape[1] // k.shape[1]
    kf = k.to(f32).repeat_interleave(group, dim=1)
    vf = v.to(f32).repeat_interleave(group, dim=1)
    s = q.to(f32) @ kf.transpose(-1, -2) * scale
    if keep is not None:
        s = torch.where(keep, s, torch.full_like(s, MASKED))
    e = torch.exp(s - s.amax(-1, keepdim=True))
    return ((e.to(q.dtype).to(f32) @ vf) / e.sum(-1, keepdim=True)).to(q.dtype)


@torch_neuronx.fast_form(flash_attention_kernel)
def flash_attention_fast(q, k, v, causal, scale):
    keep = None
    if causal:
        sq, sk = q.shape[2], k.shape[2]  # query i at position sk - sq + i
        keep = torch.arange(sq, device=q.device)[:, None] + (sk - sq) >= torch.arange(sk, device=q.device)[None, :]
    return _attention(q, k, v, keep, scale)


def _cached_attention(q, k, v, seq_lens, scale):
    """q [B, Hq, Sq, d] over k/v [B, Hkv, S, d]: query i of sequence b at position seq_lens[b] - Sq + i."""
    sq, ctx = q.shape[2], k.shape[2]
    position = seq_lens.to(torch.int64)[:, None] - sq + torch.arange(sq, device=q.device)[None, :]  # [B, Sq]
    keep = torch.arange(ctx, device=q.device)[None, None, :] <= position[:, :, None]  # [B, Sq, S]
    return _attention(q, k, v, keep[:, None], scale)


@torch_neuronx.fast_form(decode_attention_kernel)
def decode_attention_fast(q, k_cache, v_cache, seq_lens, scale):
    return _cached_attention(q, k_cache.transpose(1, 2), v_cache.transpose(1, 2), seq_lens, scale)


@torch_neuronx.fast_form(paged_attention_kernel)
def paged_attention_fast(q, key_cache, value_cache, block_tables, seq_lens, scale):
    blocks, block, kv_heads, dim = key_cache.shape

    def gather(cache):  # indexing the blocks: an entry outside the cache is reported as one
        return cache[block_tables.to(torch.int64)].reshape(q.shape[0], -1, kv_heads, dim).transpose(1, 2)

    return _cached_attention(q, gather(key_cache), gather(value_cache), seq_lens, scale)


@torch_neuronx.fast_form(router_topk_kernel)
def router_topk_fast(logits, k, gating, normalize):
    xf = logits.to(f32)
    if gating == "softmax":
        e = torch.exp(xf - xf.amax(-1, keepdim=True))
        scores = e * (1.0 / e.sum(-1, keepdim=True))
    else:
        scores = torch.sigmoid(xf)
    # the kernel's order: highest first, equal scores by expert
    ids = torch.sort(scores, dim=-1, descending=True, stable=True).indices[:, :k]
    weights = scores.gather(1, ids)
    if normalize:
        weights = weights * (1.0 / weights.sum(-1, keepdim=True))
    return weights, ids.to(torch.int32)


def _block_rows(x, token_ids):
    valid = (token_ids >= 0)[:, None]
    return torch.where(valid, x[token_ids.clamp(min=0).to(torch.int64)].to(f32), torch.zeros((), dtype=f32, device=x.device))


def _row_experts(token_ids, block_experts):
    block = token_ids.shape[0] // block_experts.shape[0]
    return block_experts.to(torch.int64).repeat_interleave(block)


@torch_neuronx.fast_form(blockwise_matmul_kernel)
def blockwise_matmul_fast(x, weight, token_ids, block_experts):
    blocks = _block_rows(x, token_ids).reshape(block_experts.shape[0], -1, x.shape[1])
    out = torch.bmm(blocks, weight[block_experts.to(torch.int64)].to(f32))
    return out.reshape(token_ids.shape[0], weight.shape[2]).to(x.dtype)


@torch_neuronx.fast_form(blockwise_matmul_backward_kernel)
def blockwise_matmul_backward_fast(dout, x, weight, token_ids, block_experts):
    nblocks = block_experts.shape[0]
    experts = weight.shape[0]
    df = dout.to(f32).reshape(nblocks, -1, dout.shape[1])
    drows = torch.bmm(df, weight[block_experts.to(torch.int64)].to(f32).transpose(1, 2)).reshape(token_ids.shape[0], -1)
    # scatter-adds as one-hot products (the rows of padding match no token, no expert)
    to_token = (token_ids.to(torch.int64)[:, None] == torch.arange(x.shape[0], device=x.device)[None, :]).to(f32)
    dx = to_token.transpose(0, 1) @ drows
    xr = _block_rows(x, token_ids)
    to_expert = (_row_experts(token_ids, block_experts)[:, None] == torch.arange(experts, device=x.device)[None, :]).to(f32)
    dweight = torch.einsum("re,rk,rn->ekn", to_expert, xr, dout.to(f32))
    return dx, dweight


@torch_neuronx.fast_form(gated_mlp_kernel)
def gated_mlp_fast(x, w_gate, w_up, w_down, activation):
    xf = x.to(f32)
    g = xf @ w_gate.to(f32)
    if activation == "silu":
        a = torch.nn.functional.silu(g)
    else:
        a = torch.nn.functional.gelu(g, approximate="tanh" if activation == "gelu_tanh" else "none")
    h = (a * (xf @ w_up.to(f32))).to(x.dtype)  # the hidden tile is kept in the I/O dtype
    return (h.to(f32) @ w_down.to(f32)).to(x.dtype)
