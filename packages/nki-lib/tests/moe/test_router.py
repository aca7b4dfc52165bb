"""Router top-k against the numpy reference: softmax and sigmoid gating, renormalized or not,
fp32/bf16 logits, fewer than 8 experts, k above 8 (two max8 rounds), one token, partial tiles."""

import numpy as np
import pytest
from nkilib import NkilibError
from nkilib.moe import router_topk
from nkilib.moe.router_reference import router_topk_reference
from nkilib_helpers import DTYPES, randn

# (tokens, experts, k)
CASES = [
    pytest.param((1, 8, 2), id="1x8-top2"),
    pytest.param((130, 3, 3), id="130x3-top3"),
    pytest.param((257, 64, 8), id="257x64-top8"),
    pytest.param((200, 160, 12), id="200x160-top12"),
]


@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalized"])
@pytest.mark.parametrize("gating", ["softmax", "sigmoid"])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CASES)
def test_matches_reference(case, dtype, gating, normalize):
    tokens, experts, k = case
    logits = randn((tokens, experts), dtype, scale=2.0)
    weights, ids = router_topk(logits, k, gating, normalize)
    ref_w, ref_ids = router_topk_reference(logits, k, gating, normalize)
    assert weights.dtype == np.float32 and ids.dtype == np.int32 and ids.shape == (tokens, k)
    np.testing.assert_array_equal(ids, ref_ids)
    np.testing.assert_allclose(weights, ref_w, rtol=1e-5, atol=1e-6)
    assert (np.diff(weights, axis=1) <= 0).all()  # highest first


def test_equal_scores_keep_the_lower_expert_first():
    logits = np.zeros((3, 10), np.float32)
    logits[:, [2, 7]] = 1.0
    _, ids = router_topk(logits, 4)
    np.testing.assert_array_equal(ids, [[2, 7, 0, 1]] * 3)


def test_bad_arguments_name_the_rule_and_the_limit():
    logits = np.zeros((4, 6), np.float32)
    with pytest.raises(NkilibError, match=r"\[nkilib.moe.top_k\] top_k=7 is larger than the 6 experts"):
        router_topk(logits, 7)
    with pytest.raises(NkilibError, match=r"\[nkilib.moe.top_k\] top_k=0; expected an integer >= 1"):
        router_topk(logits, 0)
    with pytest.raises(NkilibError, match=r"\[nkilib.moe.gating\] gating='relu'"):
        router_topk(logits, 2, "relu")
    with pytest.raises(NkilibError, match=r"\[nkilib.shape\] logits has shape \[2, 4, 6\]"):
        router_topk(np.zeros((2, 4, 6), np.float32), 2)
    with pytest.raises(NkilibError, match=r"\[nkilib.dtype\] logits has dtype int32"):
        router_topk(np.zeros((4, 6), np.int32), 2)
