"""The neuron model runner: vLLM's GPU model runner with its tensors on the neuron device.

vLLM's ``GPUModelRunner`` already does what a device runner needs - the persistent input
batch, block tables, slot mappings, attention metadata, the sampler, logprobs - and it keeps a
host copy and a device copy of every input buffer (``CpuGpuBuffer``). Here the device copies
live in neuron memory, so the weights, activations, KV cache and sampling all run on the
simulated NeuronCore; what changes is only what is CUDA-specific (events, streams, the
synchronization call) and the token-count padding (shape buckets, below).
"""

from __future__ import annotations

import dataclasses
from contextlib import contextmanager
from typing import Any

import torch
from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.model_executor.model_loader import get_model
from vllm.utils.math_utils import cdiv
from vllm.v1.worker.gpu_model_runner import GPUModelRunner

logger = init_logger(f"vllm.{__name__}")  # under "vllm": vLLM configures only its own loggers

# Token counts are padded up to the next bucket, so a serving run compiles (and caches) one NEFF
# per op and bucket instead of one per distinct batch size.
MIN_TOKEN_BUCKET = 8


def token_bucket(num_tokens: int, max_tokens: int) -> int:
    """The padded token count for a step of ``num_tokens``: the next power of two, at least
    ``MIN_TOKEN_BUCKET``, at most ``max_tokens``."""
    if not 0 < num_tokens <= max_tokens:
        raise ValueError(f"[vllm_neuron.buckets] a step has 1..{max_tokens} tokens, got {num_tokens}")
    return min(max_tokens, max(MIN_TOKEN_BUCKET, 1 << (num_tokens - 1).bit_length()))


@contextmanager
def _no_cuda_streams():
    """GPUModelRunner's constructor builds torch.cuda streams for async output copies it never
    uses here (async scheduling is off on neuron); give it inert stand-ins while it runs."""

    class _Stream:
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.wait_stream = lambda *a, **kw: None

    saved = torch.cuda.Stream
    torch.cuda.Stream = _Stream
    try:
        yield
    finally:
        torch.cuda.Stream = saved


class NeuronModelRunner(GPUModelRunner):
    def __init__(self, vllm_config: VllmConfig, device: torch.device) -> None:
        if device.type != "neuron":
            raise ValueError(f"[vllm_neuron.device] NeuronModelRunner runs on a neuron device, got {device}")
        with _no_cuda_streams():
            super().__init__(vllm_config, device)
        self.use_cuda_graph = False

    def load_model(self, load_dummy_weights: bool = False) -> None:
        if load_dummy_weights:
            raise ValueError("[vllm_neuron.weights] dummy weights (elastic EP scale-up) are not supported on neuron")
        logger.info("Loading model %s onto %s...", self.model_config.model, self.device)
        self.model = get_model(vllm_config=self.vllm_config)
        if self.lora_config:
            raise NotImplementedError("[vllm_neuron.lora] LoRA is not supported on neuron yet")

    def get_model(self) -> torch.nn.Module:
        return self.model

    def _sync_device(self) -> None:
        torch.neuron.synchronize(self.device)

    def _to_list(self, sampled_token_ids: torch.Tensor) -> list[list[int]]:
        return sampled_token_ids.tolist()

    def _determine_batch_execution_and_padding(self, num_tokens: int, *args: Any, **kwargs: Any):
        mode, descriptor, *rest = super()._determine_batch_execution_and_padding(num_tokens, *args, **kwargs)
        padded = token_bucket(descriptor.num_tokens, self.max_num_tokens)
        return (mode, dataclasses.replace(descriptor, num_tokens=padded), *rest)

    def kv_cache_cap_bytes(self) -> int:
        """KV bytes the scheduler can ever fill at once: every running sequence at full length.
        The simulated HBM is host memory, so a cache beyond that only costs the host RAM."""
        specs = self.get_kv_cache_spec()
        page = sum(spec.page_size_bytes for spec in specs.values())
        block_size = self.cache_config.block_size
        blocks = self.scheduler_config.max_num_seqs * cdiv(self.model_config.max_model_len, block_size) + 1
        return blocks * page
