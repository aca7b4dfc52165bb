"""nkilib.torch's MoE ops on neuron tensors (eager and compiled) against plain torch on CPU in
fp32 autograd: the router's weights and logit gradients, the blockwise matmul's output and
gradients, the torch block layout against numpy's, the fast forms against the kernels'
instructions, and the fallback."""

import numpy as np
import pytest
import torch
import torch_neuronx
from nkilib.moe import block_layout as block_layout_numpy
from nkilib.moe.blockwise_matmul import blockwise_matmul_backward_kernel, blockwise_matmul_kernel
from nkilib.moe.router import router_topk_kernel
from nkilib.torch import NkilibFallbackWarning, block_layout, blockwise_matmul, router_topk
from nkilib.torch.moe import blockwise_matmul_plain, router_topk_plain
from nkilib_torch_helpers import DTYPES, assert_close, inputs, run_with_grads
from torch_neuronx.testing import check_fast_form

TOLERANCE = {torch.float32: {"rtol": 2e-5, "atol": 2e-5}, torch.bfloat16: {"rtol": 8e-3, "atol": 8e-3}}


@pytest.mark.parametrize("gating,normalize", [("softmax", False), ("softmax", True), ("sigmoid", True)])
def test_router_weights_and_logit_gradients(gating, normalize):
    (logits,) = inputs((130, 10), scale=2.0)
    dw = torch.randn(130, 3, generator=torch.Generator().manual_seed(1))
    leaf = logits.to("neuron").requires_grad_()
    weights, ids = router_topk(leaf, 3, gating, normalize)
    (weights * dw.to("neuron")).sum().backward()
    ref_leaf = logits.clone().requires_grad_()
    ref_w, ref_ids = router_topk_plain(ref_leaf, 3, gating, normalize)
    (ref_w * dw).sum().backward()
    assert torch.equal(ids.cpu(), ref_ids)
    assert_close(weights.detach().cpu(), ref_w.detach(), torch.float32)
    assert_close(leaf.grad.cpu(), ref_leaf.grad, torch.float32)
    assert "nki::router_topk_kernel" in torch_neuronx.get_executed_ops()


def _routed(tokens=70, kdim=200, ndim=150, experts=3, top_k=2, block=40, dtype=torch.float32, seed=0):
    x, w, logits = inputs((tokens, kdim), (experts, kdim, ndim), (tokens, experts), dtype=dtype, seed=seed)
    ids = torch.topk(logits.float(), top_k).indices.to(torch.int32)
    token_ids, block_experts, rows = block_layout(ids, experts, block)
    return x, w * 0.1, token_ids, block_experts, rows


def test_torch_block_layout_is_numpy_s():
    ids = torch.randint(0, 5, (90, 2), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    ids[:, 1] = (ids[:, 0] + 1) % 5
    for got, want in zip(block_layout(ids.to("neuron"), 5, 16), block_layout_numpy(ids.numpy(), 5, 16)):
        np.testing.assert_array_equal(got.cpu().numpy(), want)


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_eager_blockwise_matmul_and_gradients(dtype):
    x, w, token_ids, block_experts, _ = _routed(dtype=dtype)
    dout = torch.randn(token_ids.shape[0], w.shape[2], generator=torch.Generator().manual_seed(3))

    def run(device):
        ti, be = token_ids.to(device), block_experts.to(device)
        fn = blockwise_matmul if device == "neuron" else blockwise_matmul_plain
        return run_with_grads(
            lambda x, w: fn(x, w, ti, be),
            (x if device == "neuron" else x.float(), w if device == "neuron" else w.float()),
            (dout,),
            device,
        )

    (out,), (dx, dw) = run("neuron")
    (ref,), (rdx, rdw) = run("cpu")
    assert_close(out, ref, dtype)
    assert_close(dx, rdx, dtype, scale=2.0)
    assert_close(dw, rdw, dtype, scale=4.0)
    ops = torch_neuronx.get_executed_ops()
    assert "nki::blockwise_matmul_kernel" in ops and "nki::blockwise_matmul_backward_kernel" in ops


def test_compiled_moe_layer(strict):
    x, w, _, _, _ = _routed(seed=4)
    (logits,) = inputs((70, 3), seed=5)

    def layer(x, logits, w):
        weights, ids = router_topk(logits, 2, "softmax", True)
        token_ids, block_experts, rows = block_layout(ids, 3, 40)
        out = blockwise_matmul(x, w, token_ids, block_experts)
        return (out[rows.long()] * weights[..., None]).sum(1)

    got = torch.compile(layer, backend="neuron", dynamic=False)(x.to("neuron"), logits.to("neuron"), w.to("neuron"))
    weights, ids = router_topk_plain(logits, 2, "softmax", True)
    expected = sum(weights[:, j : j + 1] * torch.einsum("tk,tkn->tn", x, w[ids[:, j].long()]) for j in range(2))
    assert_close(got.cpu(), expected, torch.float32)
    assert "nki::blockwise_matmul_kernel" in torch_neuronx.get_executed_ops()


@pytest.mark.parametrize("dtype", DTYPES.values(), ids=DTYPES.keys())
def test_fast_forms_match_the_instructions(dtype):
    x, w, token_ids, block_experts, _ = (t.to("neuron") for t in _routed(dtype=dtype, seed=6))
    tol = TOLERANCE[dtype]
    (logits,) = inputs((130, 12), dtype=dtype, seed=7)
    for gating, normalize in (("softmax", True), ("sigmoid", False)):
        check_fast_form(router_topk_kernel, logits.to("neuron"), 9, gating, normalize, rtol=2e-5, atol=2e-6)
    out = check_fast_form(blockwise_matmul_kernel, x, w, token_ids, block_experts, **tol)
    dout = torch.randn(out.shape, generator=torch.Generator().manual_seed(8)).to(dtype).to("neuron")
    check_fast_form(blockwise_matmul_backward_kernel, dout, x, w, token_ids, block_experts, rtol=1e-4, atol=1e-4)


def test_unsupported_calls_run_plain_torch():
    x, w, token_ids, block_experts, _ = _routed(seed=9)
    dev = [t.to("neuron") for t in (x, w, token_ids, block_experts)]
    with pytest.warns(NkilibFallbackWarning, match=r"\[nkilib.dtype\] x has dtype float64"):
        out = blockwise_matmul(dev[0].double(), dev[1].double(), *dev[2:])
    assert_close(out.float().cpu(), blockwise_matmul_plain(x, w, token_ids, block_experts), torch.float32)
    with pytest.raises(Exception, match=r"\[nkilib.moe.top_k\] top_k=4 for 3 experts"):
        router_topk(torch.zeros(2, 3, device="neuron"), 4)
