"""Torch implementations of the Triton kernels vLLM's model runner launches.

vLLM writes a few batch-preparation steps as Triton kernels; there is no Triton for neuron, so
the platform registers these device-neutral torch versions in their place
(``Platform.register_triton_kernel_overrides``). They run on the neuron device, on the same
tensors, with the kernels' parameter order.
"""

from __future__ import annotations

import torch

SLOT_MAPPING_KERNEL = "vllm.v1.worker.block_table.ComputeSlotMappingKernel.kernel"


def compute_slot_mapping(
    num_tokens: int,
    max_num_tokens: int,
    query_start_loc: torch.Tensor,  # [num_reqs + 1] int32
    positions: torch.Tensor,  # [num_tokens] int64
    block_table: torch.Tensor,  # [max_num_reqs, max_num_blocks_per_req] int32
    block_table_stride: int,
    slot_mapping: torch.Tensor,  # [max_num_tokens] int64
    KV_CACHE_BLOCK_SIZE: int,
    TOTAL_CP_WORLD_SIZE: int = 1,
    TOTAL_CP_RANK: int = 0,
    CP_KV_CACHE_INTERLEAVE_SIZE: int = 1,
    PAD_ID: int = -1,
    BLOCK_SIZE: int = 1024,
) -> None:
    """slot_mapping[t] = block_table[req(t), pos(t) // bs] * bs + pos(t) % bs; PAD_ID after."""
    if TOTAL_CP_WORLD_SIZE != 1:
        raise NotImplementedError(
            f"[vllm_neuron.parallel] context parallelism is not supported on neuron (world size {TOTAL_CP_WORLD_SIZE})"
        )
    bs = KV_CACHE_BLOCK_SIZE
    pos = positions[:num_tokens]
    token = torch.arange(num_tokens, device=pos.device, dtype=query_start_loc.dtype)
    # A token's request: how many requests end at or before it.
    req = (token.unsqueeze(1) >= query_start_loc[1:].unsqueeze(0)).sum(dim=1)
    block = block_table[req, pos // bs].to(torch.int64)
    slot_mapping[:num_tokens] = block * bs + pos % bs
    slot_mapping[num_tokens:max_num_tokens] = PAD_ID


OVERRIDES = {SLOT_MAPPING_KERNEL: compute_slot_mapping}
