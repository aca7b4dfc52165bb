"""The neuron attention backend: paged KV cache in neuron memory, attention in plain torch ops.

Every scheduled token (prefill chunk, decode step, prefix-cache hit alike) attends to the keys
of its own request up to its own position, read from the paged cache through the block table.
That one rule covers continuous batching, chunked prefill and prefix caching with no separate
prefill/decode paths, and the tensor shapes depend only on the (bucketed) token count and the
block-table width, so the simulated device compiles a bounded set of NEFFs.

The seam for nki-lib's paged prefill/decode kernels is :func:`paged_attention`: it receives
the query tokens, the layer's cache and the per-token metadata, and returns the output.

KV cache layout (vLLM's logical ``[B, H, N, C]`` per layer, stored ``LBNHC``): each block is
``block_size`` rows of ``num_kv_heads x (key | value)``, so one token's slot is one contiguous
row and the cache update is a single ``index_copy_`` of the new keys and values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from vllm.forward_context import get_forward_context
from vllm.v1.attention.backend import (
    AttentionBackend,
    AttentionImpl,
    AttentionLayer,
    AttentionMetadataBuilder,
    AttentionType,
    CommonAttentionMetadata,
    MultipleOf,
)
from vllm.v1.kv_cache_interface import AttentionSpec, KVCacheLayout

from . import ATTENTION_BACKEND_NAME


class NeuronAttentionBackend(AttentionBackend):
    forward_includes_kv_cache_update: bool = False
    supported_dtypes: ClassVar[list[torch.dtype]] = [torch.float32, torch.bfloat16, torch.float16]
    supported_kv_cache_dtypes: ClassVar[list[str]] = ["auto"]

    @staticmethod
    def get_name() -> str:
        return ATTENTION_BACKEND_NAME

    @staticmethod
    def get_impl_cls() -> type[NeuronAttentionImpl]:
        return NeuronAttentionImpl

    @staticmethod
    def get_builder_cls() -> type[NeuronAttentionMetadataBuilder]:
        return NeuronAttentionMetadataBuilder

    @staticmethod
    def get_supported_kernel_block_sizes(kv_cache_spec=None) -> list[int | MultipleOf]:
        return [MultipleOf(16)]

    @classmethod
    def get_supported_head_sizes(cls) -> list[int]:
        return []  # any head size: plain torch ops

    @classmethod
    def supported_kv_cache_layouts(cls) -> tuple[KVCacheLayout, ...]:
        return (KVCacheLayout.LBNHC,)

    @classmethod
    def supports_attn_type(cls, attn_type: str) -> bool:
        return attn_type == AttentionType.DECODER


@dataclass
class NeuronAttentionMetadata:
    num_actual_tokens: int  # scheduled tokens, padding included
    slot_mapping: torch.Tensor  # [T] int64 on neuron; -1 for padding tokens
    token_req: torch.Tensor  # [T] int64 on neuron: the token's row in block_table
    token_pos: torch.Tensor  # [T] int64 on neuron: the token's position in its sequence
    block_table: torch.Tensor  # [R, W] int32 on neuron, W = blocks read per request
    num_write_tokens: int  # tokens whose K/V go into the cache (padding excluded)


class NeuronAttentionMetadataBuilder(AttentionMetadataBuilder[NeuronAttentionMetadata]):
    def __init__(self, kv_cache_spec: AttentionSpec, layer_names, vllm_config, device: torch.device) -> None:
        super().__init__(kv_cache_spec, layer_names, vllm_config, device)
        self.block_size = kv_cache_spec.block_size

    def build(
        self, common_prefix_len: int, common_attn_metadata: CommonAttentionMetadata, fast_build: bool = False
    ) -> NeuronAttentionMetadata:
        m = common_attn_metadata
        num_reqs, num_tokens = m.num_reqs, m.num_actual_tokens
        query_start = m.query_start_loc_cpu[: num_reqs + 1].numpy()
        query_lens = np.diff(query_start)
        seq_lens = m.seq_lens_cpu_upper_bound if m.seq_lens_cpu_upper_bound is not None else m.seq_lens.cpu()
        seq_lens = np.asarray(seq_lens[:num_reqs], dtype=np.int64)
        # Per token: its request row and its position (the last query token of a request sits
        # at seq_len - 1). Padding tokens after the last request read request 0's first key.
        token_req = np.zeros(num_tokens, np.int64)
        token_pos = np.zeros(num_tokens, np.int64)
        real = int(query_start[-1])
        token_req[:real] = np.repeat(np.arange(num_reqs), query_lens)
        starts = np.repeat(seq_lens - query_lens, query_lens)
        token_pos[:real] = starts + (np.arange(real) - np.repeat(query_start[:-1], query_lens))
        # Read only as many blocks as the longest sequence needs, rounded up to a power of two
        # (bounded shapes), never more than the block table holds.
        table = m.block_table_tensor[:num_reqs]
        need = max(1, -(-int(seq_lens.max(initial=1)) // self.block_size))
        width = min(table.shape[1], 1 << (need - 1).bit_length())
        device = table.device
        return NeuronAttentionMetadata(
            num_actual_tokens=num_tokens,
            slot_mapping=m.slot_mapping[:num_tokens].to(torch.int64),
            token_req=torch.from_numpy(token_req).to(device),
            token_pos=torch.from_numpy(token_pos).to(device),
            block_table=table[:, :width],
            num_write_tokens=real,
        )


def paged_attention(
    query: torch.Tensor, key_cache: torch.Tensor, value_cache: torch.Tensor, meta: NeuronAttentionMetadata, scale: float
) -> torch.Tensor:
    """Causal attention of each query token over its request's cached keys.

    query [T, H, D]; key_cache / value_cache [num_blocks, block_size, Hkv, D]. Returns [T, H, D].
    """
    num_tokens, num_heads, head_dim = query.shape
    num_kv_heads = key_cache.shape[2]
    block_size = key_cache.shape[1]
    reqs, width = meta.block_table.shape
    blocks = meta.block_table.to(torch.int64).reshape(-1)
    keys = key_cache.index_select(0, blocks).reshape(reqs, width * block_size, num_kv_heads, head_dim)
    values = value_cache.index_select(0, blocks).reshape(reqs, width * block_size, num_kv_heads, head_dim)
    # [T, S, Hkv, D]: each token's own request's keys.
    keys = keys.index_select(0, meta.token_req)
    values = values.index_select(0, meta.token_req)
    q = query.reshape(num_tokens, num_kv_heads, num_heads // num_kv_heads, head_dim)
    scores = torch.einsum("thgd,tshd->thgs", q.float(), keys.float()) * scale
    key_pos = torch.arange(width * block_size, device=query.device)
    visible = key_pos.unsqueeze(0) <= meta.token_pos.unsqueeze(1)  # [T, S]
    scores = scores.masked_fill(~visible[:, None, None, :], float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    out = torch.einsum("thgs,tshd->thgd", probs, values.float())
    return out.reshape(num_tokens, num_heads, head_dim).to(query.dtype)


class NeuronAttentionImpl(AttentionImpl[NeuronAttentionMetadata]):
    def __init__(
        self,
        num_heads: int,
        head_size: int,
        scale: float,
        num_kv_heads: int | None = None,
        alibi_slopes: list[float] | None = None,
        sliding_window: int | None = None,
        kv_cache_dtype: str = "auto",
        logits_soft_cap: float | None = None,
        attn_type: str = AttentionType.DECODER,
        kv_sharing_target_layer_name: str | None = None,
        sinks: torch.Tensor | None = None,
    ) -> None:
        unsupported = {
            "alibi_slopes": alibi_slopes,
            "sliding_window": sliding_window,
            "logits_soft_cap": logits_soft_cap,
            "kv_sharing_target_layer_name": kv_sharing_target_layer_name,
            "sinks": sinks,
        }
        for name, value in unsupported.items():
            if value is not None:
                raise NotImplementedError(f"[vllm_neuron.attention] {name}={value!r} is not supported on neuron yet")
        if attn_type != AttentionType.DECODER:
            raise NotImplementedError(f"[vllm_neuron.attention] attn_type={attn_type!r}: only decoder attention")
        self.num_heads = num_heads
        self.head_size = head_size
        self.scale = float(scale)
        self.num_kv_heads = num_kv_heads or num_heads
        self.kv_cache_dtype = kv_cache_dtype
        self.attn_type = attn_type
        self.kv_sharing_target_layer_name = None

    def _split(self, kv_cache: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, Hkv, N, 2D] (stored B, N, Hkv, 2D) -> key and value views [B, N, Hkv, D]."""
        blocks = kv_cache.permute(0, 2, 1, 3)
        return blocks[..., : self.head_size], blocks[..., self.head_size :]

    def do_kv_cache_update(
        self, layer: AttentionLayer, key: torch.Tensor, value: torch.Tensor, kv_cache: torch.Tensor, slot_mapping: torch.Tensor
    ) -> None:
        if kv_cache.numel() == 0:
            return
        num_blocks, _, block_size, _ = kv_cache.shape
        rows = kv_cache.permute(0, 2, 1, 3).reshape(num_blocks * block_size, self.num_kv_heads, 2 * self.head_size)
        # Padding tokens (slot -1) sit after the real ones: write only the real prefix, whose
        # length the step's metadata knows (reading the slots back would sync the device).
        meta = get_forward_context().attn_metadata
        meta = meta[layer.layer_name] if isinstance(meta, dict) else meta
        n = meta.num_write_tokens if meta is not None else slot_mapping.shape[0]
        new = torch.cat([key[:n], value[:n]], dim=-1).to(rows.dtype)
        rows.index_copy_(0, slot_mapping[:n].to(torch.int64), new)

    def forward(
        self,
        layer: AttentionLayer,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        kv_cache: torch.Tensor,
        attn_metadata: NeuronAttentionMetadata | None,
        output: torch.Tensor,
        output_scale: torch.Tensor | None = None,
        output_block_scale: torch.Tensor | None = None,
    ) -> torch.Tensor:
        if output_scale is not None or output_block_scale is not None:
            raise NotImplementedError("[vllm_neuron.attention] fused output quantization is not supported")
        if attn_metadata is None:  # profiling run: no cache yet
            return output
        n = attn_metadata.num_actual_tokens
        key_cache, value_cache = self._split(kv_cache)
        out = paged_attention(query[:n], key_cache, value_cache, attn_metadata, self.scale)
        output[:n].copy_(out.reshape(output[:n].shape))
        return output
