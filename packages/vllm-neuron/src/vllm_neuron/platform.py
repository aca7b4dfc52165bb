"""The Neuron platform: vLLM's view of the simulated ``neuron`` PyTorch device.

A real out-of-tree platform (``PlatformEnum.OOT``, ``device_type="neuron"``, the ``PrivateUse1``
dispatch key), not the CPU platform under another name: vLLM's CPU-only branches
(``is_cpu()``: oneDNN weight packing, CPU attention kernels) stay off, and tensors the model
runner places on ``current_platform.device_type`` land in the simulated HBM.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch
import torch_neuronx  # noqa: F401  (registers the neuron device and torch.neuron)
from vllm.logger import init_logger
from vllm.platforms.cpu import CpuPlatform
from vllm.platforms.interface import Platform, PlatformEnum

from . import ATTENTION_BACKEND, ATTENTION_BACKEND_NAME
from .kernels import OVERRIDES as KERNEL_OVERRIDES

if TYPE_CHECKING:
    from vllm.config import VllmConfig
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

logger = init_logger(f"vllm.{__name__}")  # under "vllm": vLLM configures only its own loggers

WORKER = "vllm_neuron.worker.NeuronWorker"
# KV cache block size when the user sets none: a multiple of 32 (the partition-friendly sizes
# nki-lib's paged attention kernels will take) and small enough for short test prompts.
DEFAULT_BLOCK_SIZE = 32


class NeuronPlatform(Platform):
    _enum = PlatformEnum.OOT
    device_name: str = "neuron"
    device_type: str = "neuron"
    dispatch_key: str = "PrivateUse1"
    ray_device_key: str = "neuron_cores"
    device_control_env_var: str = "NEURON_RT_VISIBLE_CORES"
    # Tensor parallelism needs the neuron process-group backend (issue 19, Deliver 3); a single
    # worker still builds vLLM's (world size 1) groups, which gloo serves.
    dist_backend: str = "gloo"
    # vLLM's small standalone torch.compile uses (sampler helpers, ...): no Inductor on neuron.
    simple_compile_backend: str = "eager"
    supported_quantization: list[str] = []
    additional_env_vars: list[str] = ["NEURON_RT_VISIBLE_CORES", "TORCH_NEURONX_NEFF_CACHE_DIR"]

    @property
    def supported_dtypes(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16, torch.float32]

    @classmethod
    def check_if_supports_dtype(cls, dtype: torch.dtype) -> None:
        if dtype not in (torch.bfloat16, torch.float16, torch.float32):
            raise ValueError(f"[vllm_neuron.dtype] neuron runs models in bfloat16, float16 or float32, got {dtype}")

    @classmethod
    def import_kernels(cls) -> None:
        # vLLM's host-side C++ ops (used on CPU tensors only) come in per-ISA builds; the base
        # class loads the AVX-512-BF16 one, which dies with SIGILL on an AVX2-only host. The CPU
        # platform's loader picks the build this host can run.
        CpuPlatform.import_kernels()

    @classmethod
    def register_triton_kernel_overrides(cls) -> None:
        # Lazy: vllm.triton_utils reads current_platform, which is resolving while this loads.
        from vllm.triton_utils.dispatcher import register_kernels

        register_kernels(KERNEL_OVERRIDES)

    @classmethod
    def get_device_name(cls, device_id: int = 0) -> str:
        return torch.neuron.get_device_name(device_id)

    @classmethod
    def get_device_uuid(cls, device_id: int = 0) -> str:
        return f"neuron-sim-{device_id}"

    @classmethod
    def get_device_total_memory(cls, device_id: int = 0) -> int:
        return torch.neuron.mem_get_info(device_id)[1]

    @classmethod
    def get_current_memory_usage(cls, device: torch.types.Device | None = None) -> float:
        return float(torch.neuron.memory_allocated(device))

    @classmethod
    def set_device(cls, device: torch.device) -> None:
        torch.neuron.set_device(device)

    @classmethod
    def manual_seed_all(cls, seed: int) -> None:
        torch.neuron.manual_seed_all(seed)

    @classmethod
    def inference_mode(cls):
        return torch.inference_mode(mode=True)

    @classmethod
    def is_pin_memory_available(cls) -> bool:
        # Host->device copies go through the simulator's DMA model, not page-locked buffers.
        return False

    def is_sleep_mode_available(self) -> bool:
        return False

    @classmethod
    def get_attn_backend_cls(
        cls,
        selected_backend: AttentionBackendEnum | None,
        attn_selector_config: AttentionSelectorConfig,
        num_heads: int | None = None,
    ) -> str:
        if attn_selector_config.use_mla or attn_selector_config.use_sparse:
            raise NotImplementedError(
                f"[vllm_neuron.attention] MLA / sparse attention is not supported on neuron yet "
                f"(use_mla={attn_selector_config.use_mla}, use_sparse={attn_selector_config.use_sparse})"
            )
        if selected_backend is not None and selected_backend.name != ATTENTION_BACKEND_NAME:
            logger.info(
                "Attention backend %s is not available on neuron; using %s.", selected_backend.name, ATTENTION_BACKEND_NAME
            )
        return ATTENTION_BACKEND

    @classmethod
    def get_punica_wrapper(cls) -> str:
        raise NotImplementedError("[vllm_neuron.lora] LoRA is not supported on neuron yet")

    @classmethod
    def get_device_communicator_cls(cls) -> str:
        return "vllm.distributed.device_communicators.base_device_communicator.DeviceCommunicatorBase"

    @classmethod
    def support_hybrid_kv_cache(cls) -> bool:
        return False

    @classmethod
    def support_static_graph_mode(cls) -> bool:
        return False

    @classmethod
    def opaque_attention_op(cls) -> bool:
        return True

    @classmethod
    def check_and_update_config(cls, vllm_config: VllmConfig) -> None:
        from vllm.config import CompilationMode
        from vllm.config.compilation import CUDAGraphMode

        parallel_config = vllm_config.parallel_config
        if parallel_config.worker_cls == "auto":
            parallel_config.worker_cls = WORKER
        if parallel_config.world_size > 1:
            raise NotImplementedError(
                f"[vllm_neuron.parallel] tensor/pipeline parallelism is not supported on neuron yet "
                f"(world_size={parallel_config.world_size})"
            )
        if parallel_config.enable_dbo:
            parallel_config.enable_dbo = False

        cache_config = vllm_config.cache_config
        if not cache_config.user_specified_block_size:
            cache_config.block_size = DEFAULT_BLOCK_SIZE

        # One step at a time: the neuron runtime is asynchronous already, and the model runner's
        # async-output path uses CUDA streams.
        vllm_config.scheduler_config.async_scheduling = False

        compilation_config = vllm_config.compilation_config
        # torch.compile(backend="neuron") with shape buckets is issue 19's next step; until then
        # the model runs op by op (eager: each ATen op a cached NEFF on the simulated core).
        if compilation_config.mode != CompilationMode.NONE:
            logger.info("vllm-neuron runs the model eagerly on neuron (compilation mode %s -> NONE).", compilation_config.mode)
        compilation_config.mode = CompilationMode.NONE
        compilation_config.cudagraph_mode = CUDAGraphMode.NONE
        compilation_config.cudagraph_capture_sizes = []
        # Plain-torch forward_native for RMSNorm, RoPE, SiLU-and-mul: these run on neuron (the
        # _C CUDA/CPU kernels do not).
        compilation_config.custom_ops = ["none"]
        if vllm_config.model_config is not None:
            vllm_config.model_config.enforce_eager = True

        # The simulator runs threads; a forked engine core would inherit a half-copied runtime.
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"
        os.environ.setdefault("VLLM_USE_AOT_COMPILE", "0")
