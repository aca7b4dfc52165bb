"""Mixture of experts: router top-k (softmax or sigmoid gating), and the blockwise expert matmul
(tokens grouped by expert into blocks, dropless) with its backward."""

from nkilib.moe.blockwise_matmul import block_layout, blockwise_matmul, blockwise_matmul_backward
from nkilib.moe.router import router_topk

__all__ = ["block_layout", "blockwise_matmul", "blockwise_matmul_backward", "router_topk"]
