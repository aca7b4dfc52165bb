"""The neuron worker: one simulated NeuronCore, driven by vLLM's engine core.

It reuses vLLM's GPU worker for everything device-neutral (the engine's RPC surface, weight
reload, profiling hooks) and replaces what is CUDA-specific: device selection, the memory pool
(no cumem allocator), memory accounting (``torch.neuron`` instead of ``torch.cuda``) and warm-up
(no CUDA graphs).
"""

from __future__ import annotations

from contextlib import nullcontext

import torch
from vllm.config import VllmConfig
from vllm.logger import init_logger
from vllm.utils.mem_utils import format_gib
from vllm.utils.torch_utils import set_random_seed
from vllm.v1.worker.gpu_worker import Worker, init_worker_distributed_environment
from vllm.v1.worker.worker_base import CompilationTimes

from .model_runner import NeuronModelRunner
from .platform import NeuronPlatform

logger = init_logger(f"vllm.{__name__}")  # under "vllm": vLLM configures only its own loggers


def kv_cache_bytes(total: int, utilization: float, non_kv: int, cap: int | None = None) -> int:
    """Bytes for the KV cache: ``utilization`` of the device's HBM, less what the model and its
    activations hold, and never more than ``cap`` (what the scheduler can ever fill)."""
    if not 0 < utilization <= 1:
        raise ValueError(f"[vllm_neuron.memory] gpu_memory_utilization must be in (0, 1], got {utilization}")
    available = int(total * utilization) - non_kv
    if available <= 0:
        raise ValueError(
            f"[vllm_neuron.memory] no room for a KV cache: gpu_memory_utilization={utilization} of "
            f"{format_gib(total)} GiB simulated HBM is {format_gib(int(total * utilization))} GiB, but the model "
            f"and its activations take {format_gib(non_kv)} GiB; raise gpu_memory_utilization or use a smaller model"
        )
    return available if cap is None else min(available, cap)


class NeuronWorker(Worker):
    model_runner: NeuronModelRunner

    def __init__(
        self, vllm_config: VllmConfig, local_rank: int, rank: int, distributed_init_method: str, is_driver_worker: bool = False
    ) -> None:
        super().__init__(vllm_config, local_rank, rank, distributed_init_method, is_driver_worker=is_driver_worker)
        self.parallel_config.disable_custom_all_reduce = True

    def init_device(self) -> None:
        self.device = torch.device("neuron", self.local_rank)
        NeuronPlatform.set_device(self.device)
        NeuronPlatform.check_if_supports_dtype(self.model_config.dtype)
        init_worker_distributed_environment(
            self.vllm_config, self.rank, self.distributed_init_method, self.local_rank, NeuronPlatform.dist_backend
        )
        set_random_seed(self.model_config.seed)
        self.model_runner = NeuronModelRunner(self.vllm_config, self.device)

    def _maybe_get_memory_pool_context(self, tag: str):
        # No cumem allocator (sleep mode) on neuron: tensors come from the device's own allocator.
        return nullcontext()

    def sleep(self, level: int = 1) -> None:
        logger.warning("sleep mode is not supported on neuron; ignored.")

    def wake_up(self, tags: list[str] | None = None) -> None:
        logger.warning("sleep mode is not supported on neuron; ignored.")

    def determine_available_memory(self) -> int:
        explicit = self.cache_config.kv_cache_memory_bytes
        if explicit is not None:
            return explicit
        free, total = torch.neuron.mem_get_info(self.device)
        # Peak activations of the largest step the scheduler can send (a dummy forward pass
        # over max_num_batched_tokens tokens), on top of the weights already loaded.
        torch.neuron.synchronize(self.device)
        torch.neuron.reset_peak_memory_stats(self.device)
        self.model_runner.profile_run()
        torch.neuron.synchronize(self.device)
        peak = torch.neuron.max_memory_allocated(self.device)
        non_kv = (total - free) + max(0, peak - torch.neuron.memory_allocated(self.device))
        size = kv_cache_bytes(total, self.cache_config.gpu_memory_utilization, non_kv, self.model_runner.kv_cache_cap_bytes())
        mib = 1 << 20
        logger.info(
            "neuron KV cache: %.1f MiB (simulated HBM %.0f MiB, utilization %.2f, model+activations %.1f MiB).",
            size / mib,
            total / mib,
            self.cache_config.gpu_memory_utilization,
            non_kv / mib,
        )
        return size

    def compile_or_warm_up_model(self) -> CompilationTimes:
        # The model runs eagerly (see NeuronPlatform.check_and_update_config): nothing to compile
        # ahead; each op's NEFF is compiled on first use and cached on disk.
        set_random_seed(self.model_config.seed)
        return CompilationTimes(
            language_model=self.compilation_config.compilation_time, encoder=self.compilation_config.encoder_compilation_time
        )
