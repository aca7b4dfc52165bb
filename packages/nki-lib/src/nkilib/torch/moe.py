"""Mixture-of-experts kernels as torch ops: ``nkilib::router_topk`` (its backward in torch ops:
the gating's Jacobian is a few elementwise ops) and ``nkilib::blockwise_matmul`` with
``nkilib::blockwise_matmul_backward``; ``block_layout`` builds the dropless block layout from
the router's choices with torch ops on any device."""

from __future__ import annotations

import torch
from torch_neuronx import nki_op

from nkilib.moe import router

# (by name: nkilib.moe's blockwise_matmul attribute is the function, not the module)
from nkilib.moe.blockwise_matmul import blockwise_matmul as blockwise_forward
from nkilib.moe.blockwise_matmul import blockwise_matmul_backward as blockwise_backward
from nkilib.moe.blockwise_matmul import check as check_blockwise
from nkilib.moe.blockwise_matmul import layout_blocks
from nkilib.torch._support import CHECKS, refusal, refuse, spec

# ---- router ----------------------------------------------------------------------------------


@nki_op("nkilib::router_topk", mutates_args=())
def router_topk_op(logits: torch.Tensor, k: int, gating: str, normalize: bool) -> tuple[torch.Tensor, torch.Tensor]:
    return router.router_topk(logits.contiguous(), k, gating, normalize)


def _scores(logits, gating):
    return torch.softmax(logits.float(), -1) if gating == "softmax" else torch.sigmoid(logits.float())


def _router_setup(ctx, inputs, output):
    logits, _k, gating, normalize = inputs
    ctx.save_for_backward(logits, output[0], output[1])
    ctx.gating, ctx.normalize = gating, normalize


def _router_backward(ctx, dweights, _dids):
    logits, weights, ids = ctx.saved_tensors
    s = _scores(logits, ctx.gating)
    dv = dweights.float()
    if ctx.normalize:  # w = v / sum(v): dv = (dw - sum(dw * w)) / sum(v)
        picked = s.gather(1, ids.long())
        dv = (dv - (dv * weights).sum(-1, keepdim=True)) / picked.sum(-1, keepdim=True)
    ds = torch.zeros_like(s).scatter_add(1, ids.long(), dv)
    if ctx.gating == "softmax":
        dl = s * (ds - (ds * s).sum(-1, keepdim=True))
    else:
        dl = ds * s * (1.0 - s)
    return dl.to(logits.dtype), None, None, None


router_topk_op.register_autograd(_router_backward, setup_context=_router_setup)
CHECKS["router_topk"] = router.check


def router_topk_plain(logits: torch.Tensor, k: int, gating: str = "softmax", normalize: bool = False):
    weights, ids = torch.topk(_scores(logits, gating), k, dim=-1)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True)
    return weights, ids.to(torch.int32)


def router_topk(logits: torch.Tensor, k: int, gating: str = "softmax", normalize: bool = False):
    """(weights [T, k] fp32, expert ids [T, k] int32): each token's k highest-scoring experts,
    highest first, through the kernel on neuron tensors (differentiable in logits)."""
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= logits.shape[-1]:  # no form of the op takes it
        refuse("moe.top_k", f"top_k={k!r} for {logits.shape[-1]} experts; expected 1 <= top_k <= experts")
    if logits.device.type == "neuron" and not refusal("router_topk", (spec(logits), k, gating, bool(normalize))):
        return router_topk_op(logits, k, gating, bool(normalize))
    if gating not in router.GATINGS:
        refuse("moe.gating", f"gating={gating!r}; expected one of {router.GATINGS}")
    return router_topk_plain(logits, k, gating, normalize)


# ---- blockwise expert matmul -----------------------------------------------------------------


@nki_op("nkilib::blockwise_matmul", mutates_args=())
def blockwise_matmul_op(
    x: torch.Tensor, weight: torch.Tensor, token_ids: torch.Tensor, block_experts: torch.Tensor
) -> torch.Tensor:
    return blockwise_forward(x.contiguous(), weight.contiguous(), token_ids.contiguous(), block_experts.contiguous())


@nki_op("nkilib::blockwise_matmul_backward", mutates_args=())
def blockwise_matmul_backward_op(
    dout: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, token_ids: torch.Tensor, block_experts: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    dx, dw = blockwise_backward(
        dout.contiguous(), x.contiguous(), weight.contiguous(), token_ids.contiguous(), block_experts.contiguous()
    )
    return dx.to(x.dtype), dw.to(weight.dtype)


def _bmm_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _bmm_backward(ctx, dout):
    x, weight, token_ids, block_experts = ctx.saved_tensors
    dx, dw = blockwise_matmul_backward_op(dout, x, weight, token_ids, block_experts)
    return dx, dw, None, None


blockwise_matmul_op.register_autograd(_bmm_backward, setup_context=_bmm_setup)


def _check_bmm(x, weight, token_ids, block_experts, grad):
    check_blockwise(x, weight, token_ids, block_experts, backward=grad)


CHECKS["blockwise_matmul"] = _check_bmm


def blockwise_matmul_plain(x, weight, token_ids, block_experts):
    """The same product in plain torch ops (the fallback, differentiable in x and weight)."""
    valid = (token_ids >= 0)[:, None]
    rows = torch.where(valid, x[token_ids.clamp(min=0).long()], torch.zeros((), dtype=x.dtype, device=x.device))
    nblocks = block_experts.shape[0]
    blocks = rows.reshape(nblocks, -1, x.shape[1])
    return torch.bmm(blocks, weight[block_experts.long()]).reshape(token_ids.shape[0], weight.shape[2])


def blockwise_matmul(x: torch.Tensor, weight: torch.Tensor, token_ids: torch.Tensor, block_experts: torch.Tensor):
    """out [R, N]: row r is x[token_ids[r]] @ weight[block_experts[r // block]] (0 where token_ids
    is -1), through the kernels on neuron tensors (differentiable in x and weight)."""
    args = (x, weight, token_ids, block_experts)
    grad = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad)
    if all(t.device.type == "neuron" for t in args) and not refusal("blockwise_matmul", tuple(spec(t) for t in args) + (grad,)):
        return blockwise_matmul_op(*args)
    return blockwise_matmul_plain(*args)


def block_layout(expert_ids: torch.Tensor, num_experts: int, block: int):
    """nkilib.moe.block_layout in torch ops (on the ids' device): (token_ids [R], block_experts
    [num_blocks], rows [T, k]), all int32, with num_blocks = layout_blocks(T, k, E, block).

    Counts and positions are computed in fp32 (exact below 2**24 rows), integers only as
    indices: the NeuronCore's integer ALU neither divides nor sums int64."""
    tokens, top_k = expert_ids.shape
    nblocks = layout_blocks(tokens, top_k, num_experts, block)
    dev = expert_ids.device
    flat = expert_ids.reshape(-1).float()
    order = torch.argsort(flat, stable=True)  # by expert, then token
    counts = (flat[:, None] == torch.arange(num_experts, device=dev, dtype=torch.float32)[None, :]).float().sum(0)
    padded = torch.floor((counts + (block - 1)) / block) * block
    ends = torch.cumsum(padded, 0)
    first = ends - padded  # each expert's first row
    by_expert = flat[order].long()
    rank = torch.arange(flat.numel(), device=dev, dtype=torch.float32) - (torch.cumsum(counts, 0) - counts)[by_expert]
    dest = (first[by_expert] + rank).long()
    token = torch.floor(order.float() / top_k)
    token_ids = torch.full((nblocks * block,), -1.0, device=dev).index_put((dest,), token)
    rows = torch.zeros(flat.numel(), device=dev).index_put((order,), dest.float())
    starts = torch.arange(nblocks, device=dev, dtype=torch.float32) * block
    owner = (ends[None, :] <= starts[:, None]).float().sum(1)  # the experts that end before the block: its expert
    block_experts = torch.where(starts < ends[-1], owner, torch.zeros_like(owner))
    return token_ids.to(torch.int32), block_experts.to(torch.int32), rows.reshape(tokens, top_k).to(torch.int32)
