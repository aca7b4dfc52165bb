"""Blockwise expert matmul forward and backward against the numpy reference: fp32/bf16, K and N
not multiples of 128, blocks of 40 and 128+ rows, padding rows, an expert with no tokens, blocks
of one expert back to back; the dropless layout from router choices, and a whole MoE layer."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.moe import block_layout, blockwise_matmul, blockwise_matmul_backward, router_topk
from nkilib.moe.blockwise_matmul import layout_blocks
from nkilib.moe.blockwise_matmul_reference import (
    blockwise_matmul_backward_reference,
    blockwise_matmul_reference,
    moe_combine_reference,
)
from nkilib_helpers import BF16, DTYPES, assert_close, randn

# (tokens, K, N, experts, top_k, block)
CASES = [
    pytest.param((70, 200, 600, 3, 2, 40), id="70tok-K200-N600-bs40"),
    pytest.param((130, 128, 96, 4, 1, 130), id="130tok-K128-N96-bs130"),
    pytest.param((1, 64, 64, 5, 2, 8), id="one-token"),
]


def _inputs(case, dtype, seed=0):
    tokens, kdim, ndim, experts, top_k, block = case
    rng = np.random.default_rng(seed)
    x = randn((tokens, kdim), dtype, seed=seed)
    w = randn((experts, kdim, ndim), dtype, seed=seed + 1, scale=0.1)
    # expert 1 gets no token: an empty expert
    choice = np.stack([rng.choice([e for e in range(experts) if e != 1], top_k, replace=False) for _ in range(tokens)])
    token_ids, block_experts, rows = block_layout(choice.astype(np.int32), experts, block)
    return x, w, token_ids, block_experts, rows


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_forward_and_backward_match_reference(case, dtype):
    x, w, token_ids, block_experts, _ = _inputs(case, dtype)
    out = blockwise_matmul(x, w, token_ids, block_experts)
    assert out.dtype == np.dtype(dtype) and out.shape == (len(token_ids), w.shape[2])
    ref = blockwise_matmul_reference(x, w, token_ids, block_experts)
    assert_close(out, ref, dtype)
    assert (np.asarray(out, np.float32)[token_ids < 0] == 0).all()
    dout = randn(out.shape, dtype, seed=9)
    dx, dw = blockwise_matmul_backward(dout, x, w, token_ids, block_experts)
    rdx, rdw = blockwise_matmul_backward_reference(dout, x, w, token_ids, block_experts)
    assert dx.dtype == np.float32 and dw.dtype == np.float32
    tol = 1e-4 if dtype is np.float32 else 2e-2
    np.testing.assert_allclose(dx, rdx, rtol=tol, atol=tol * np.abs(rdx).max())
    np.testing.assert_allclose(dw, rdw, rtol=tol, atol=tol * np.abs(rdw).max())
    assert (dw[1] == 0).all()  # the expert no token chose


def test_layout_is_dropless_grouped_and_static():
    choice = np.array([[2, 0], [2, 1], [0, 2], [2, 0]], np.int32)
    token_ids, block_experts, rows = block_layout(choice, 3, 2)
    assert len(block_experts) == layout_blocks(4, 2, 3, 2) == 5
    # expert 0: tokens 0, 2, 3 (two blocks), expert 1: token 1, expert 2: tokens 0, 1, 2, 3
    np.testing.assert_array_equal(token_ids, [0, 2, 3, -1, 1, -1, 0, 1, 2, 3])
    np.testing.assert_array_equal(block_experts, [0, 0, 1, 2, 2])
    np.testing.assert_array_equal(token_ids[rows], np.broadcast_to(np.arange(4)[:, None], (4, 2)))
    np.testing.assert_array_equal(block_experts[rows // 2], choice)


def test_a_moe_layer_routes_each_token_through_its_experts():
    tokens, hidden, ffn, experts, k = 150, 64, 96, 4, 2
    x, logits = randn((tokens, hidden), seed=1), randn((tokens, experts), seed=2)
    w = randn((experts, hidden, ffn), seed=3, scale=0.1)
    weights, ids = router_topk(logits, k, "softmax", normalize=True)
    token_ids, block_experts, rows = block_layout(ids, experts, 64)
    y = moe_combine_reference(blockwise_matmul(x, w, token_ids, block_experts), rows, weights)
    expected = sum(weights[:, j : j + 1] * np.einsum("tk,tkn->tn", x, w[ids[:, j]]) for j in range(k))
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


def test_bad_arguments_name_the_rule_and_the_limit():
    x, w, token_ids, block_experts, _ = _inputs(CASES[0].values[0], np.float32)
    bad = token_ids.copy()
    bad[5] = 70
    with pytest.raises(NkilibError, match=r"\[nkilib.moe.token_ids\] token_ids\[5\] = 70 is outside \[-1, 70\)"):
        blockwise_matmul(x, w, bad, block_experts)
    bad = block_experts.copy()
    bad[-1] = 3
    with pytest.raises(
        NkilibError, match=rf"\[nkilib.moe.block_experts\] block_experts\[{len(bad) - 1}\] = 3 is outside \[0, 3\)"
    ):
        blockwise_matmul(x, w, token_ids, bad)
    with pytest.raises(
        NkilibError, match=r"\[nkilib.shape\] token_ids has shape \[239\]; expected \[num_blocks \* block\] with num_blocks = 6"
    ):
        blockwise_matmul(x, w, token_ids[:-1], block_experts)
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] weight has shape \[3, 100, 600\]; expected \[experts, 200, N\]"):
        blockwise_matmul(x, w[:, :100], token_ids, block_experts)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] weight has dtype bfloat16, expected float32"):
        blockwise_matmul(x, w.astype(BF16), token_ids, block_experts)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] token_ids has dtype int64"):
        blockwise_matmul(x, w, token_ids.astype(np.int64), block_experts)
    with pytest.raises(NkilibError, match=r"\[nkilib.moe.experts\] expert_ids\[0, 1\] = 3 is not one of the 3 experts"):
        block_layout(np.array([[0, 3]], np.int32), 3, 4)
    with pytest.raises(NkilibError, match=r"\[nkilib.sbuf\] blockwise_matmul: K=4096, N=8192"):
        blockwise_matmul(
            np.zeros((4, 4096), np.float32),
            np.broadcast_to(np.zeros((), np.float32), (2, 4096, 8192)),
            np.full(128, -1, np.int32),
            block_experts[:1] * 0,
        )
