"""torch-neuronx: AWS Trainium as a native PyTorch device, backed by a software NeuronCore.

    import torch
    model = MyModel().to("neuron")          # plain torch.Tensor on device "neuron"
    loss = model(x.to("neuron")).sum(); loss.backward()
    torch.neuron.synchronize()

Importing is optional: PyTorch's backend autoload (the ``torch.backends`` entry point) imports
this package when ``import torch`` runs. Every op runs on the simulated device; ops without a
device lowering run CPU kernels over device memory (CPU fallback, tracked and reported once).
"""

from __future__ import annotations


def _autoload() -> None:
    """Entry point of the ``torch.backends`` group. Loading it imports this package, which
    registers the device (below). Defined before ``import torch``: when this package is imported
    first, importing torch calls it while this module is still initializing - and this module
    then goes on to register the device itself."""


import torch  # noqa: E402

from .device import registration as _device_registration  # noqa: E402
from .kernels import registration as _kernel_registration  # noqa: E402

_device_registration.initialize()
_kernel_registration.register()

from .compiled import optimizer_step as _optimizer_step  # noqa: E402

_optimizer_step.register()

from .distributed import register as _register_distributed  # noqa: E402

_register_distributed()

from .integrations import accelerate_memory as _accelerate_memory  # noqa: E402

_accelerate_memory.register()

from .compiled.adaptive import set_adaptive_eager  # noqa: E402
from .compiled.metrics import eager_metrics  # noqa: E402
from .device import memory, neuron, random  # noqa: E402
from .device.errors import NeuronOutOfMemoryError, NeuronRuntimeError  # noqa: E402
from .device.memory import (  # noqa: E402
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    mem_get_info,
    memory_allocated,
    memory_reserved,
    memory_stats,
    memory_summary,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)
from .device.neuron import (  # noqa: E402
    current_device,
    device,
    device_count,
    get_device_name,
    get_device_properties,
    is_available,
    is_initialized,
    set_device,
    synchronize,
)
from .device.random import get_rng_state, initial_seed, manual_seed, manual_seed_all, seed, set_rng_state  # noqa: E402
from .device.streams import Event, Stream, current_stream, default_stream, set_stream, stream  # noqa: E402
from .dynamo import compile_metrics, pad_to_bucket, reset_compile_metrics  # noqa: E402  (torch.compile backend)
from .nki_fast_form import fast_form  # noqa: E402
from .nki_op import nki_op, wrap_nki  # noqa: E402
from .ops.tracking import clear_op_tracking, get_executed_ops, get_fallback_ops, get_fallback_reasons  # noqa: E402

# The Python side of the shim's Kineto activity profiler, loaded now rather than when a profile
# starts: torch.profiler(with_stack=True) is already tracing then (see profiling.kineto_window).
from .profiling import kineto_window as _kineto_window  # noqa: E402, F401

__version__ = "2.13.0+sim"


__all__ = [
    "torch", "memory", "neuron", "random", "NeuronOutOfMemoryError", "NeuronRuntimeError",
    "current_device", "device", "device_count", "get_device_name", "get_device_properties", "is_available",
    "is_initialized", "set_device", "synchronize", "empty_cache", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory_allocated", "memory_reserved", "memory_stats", "memory_summary",
    "reset_accumulated_memory_stats", "reset_peak_memory_stats", "clear_op_tracking", "get_executed_ops",
    "get_fallback_ops", "get_fallback_reasons", "get_rng_state", "initial_seed", "manual_seed", "manual_seed_all", "seed", "set_rng_state",
    "Event", "Stream", "current_stream", "default_stream", "set_stream", "stream", "nki_op", "wrap_nki", "fast_form", "nki", "set_adaptive_eager",
]
__all__ += ["compile_metrics", "reset_compile_metrics", "pad_to_bucket", "eager_metrics"]

import nki  # noqa: E402  (``from torch_neuronx import nki`` as in TorchNeuron's examples)

from . import nki_integration  # noqa: E402, F401 - registers torch tensors as an NKI array type
