"""Plain numpy blockwise expert matmul and its gradients (fp32 math), the reference
blockwise_matmul.py is tested against."""

from __future__ import annotations

import numpy as np


def _rows(x, token_ids):
    """x's row of each block row, 0 for padding (token -1)."""
    x = np.asarray(x, np.float32)
    ids = np.asarray(token_ids)
    return np.where((ids >= 0)[:, None], x[np.maximum(ids, 0)], 0.0)


def _row_weights(weight, block_experts, rows):
    blocks = np.asarray(block_experts)
    return np.asarray(weight, np.float32)[blocks[np.arange(rows) // (rows // len(blocks))]]


def blockwise_matmul_reference(x, weight, token_ids, block_experts):
    xr = _rows(x, token_ids)
    return np.einsum("rk,rkn->rn", xr, _row_weights(weight, block_experts, len(xr)))


def blockwise_matmul_backward_reference(dout, x, weight, token_ids, block_experts):
    """(dx [T, K], dweight [E, K, N]) of sum(out * dout)."""
    dout = np.asarray(dout, np.float32)
    ids, blocks = np.asarray(token_ids), np.asarray(block_experts)
    valid = (ids >= 0)[:, None]
    drows = np.einsum("rn,rkn->rk", dout, _row_weights(weight, blocks, len(ids))) * valid
    dx = np.zeros(np.shape(x), np.float32)
    np.add.at(dx, np.maximum(ids, 0), drows)
    xr = _rows(x, ids)
    dweight = np.zeros(np.shape(weight), np.float32)
    per_block = len(ids) // len(blocks)
    for b, e in enumerate(blocks):
        dweight[e] += xr[b * per_block : (b + 1) * per_block].T @ dout[b * per_block : (b + 1) * per_block]
    return dx, dweight


def moe_combine_reference(rows_out, rows, weights):
    """Each token's output: the sum over its k choices of weight * its row's output."""
    return np.einsum("tkn,tk->tn", np.asarray(rows_out, np.float32)[np.asarray(rows)], np.asarray(weights, np.float32))
