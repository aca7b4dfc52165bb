"""vLLM on the simulated Trainium ``neuron`` device.

vLLM finds this package through two entry points (see pyproject.toml):

* ``vllm.platform_plugins`` -> :func:`register`: returns the qualname of
  :class:`vllm_neuron.platform.NeuronPlatform` when a neuron device is visible, else ``None``.
* ``vllm.general_plugins`` -> :func:`register_ops`: registers the ``NEURON_ATTN`` attention
  backend in every vLLM process.

Both are called by vLLM in each of its processes, so they are cheap and idempotent.
"""

from __future__ import annotations

import torch
import torch_neuronx  # noqa: F401  (registers the neuron device and torch.neuron)

__version__ = "0.1.0+sim"

PLATFORM = "vllm_neuron.platform.NeuronPlatform"
ATTENTION_BACKEND_NAME = "NEURON_ATTN"
ATTENTION_BACKEND = "vllm_neuron.attention.NeuronAttentionBackend"


def neuron_device_count() -> int:
    """Visible neuron devices (NEURON_RT_VISIBLE_CORES)."""
    return torch.neuron.device_count()


def register() -> str | None:
    """vLLM platform plugin: the Neuron platform when a neuron device exists."""
    return PLATFORM if neuron_device_count() > 0 else None


def register_ops() -> None:
    """vLLM general plugin: make ``NEURON_ATTN`` a known attention backend name."""
    from vllm.v1.attention.backends.registry import AttentionBackendEnum, register_backend

    if ATTENTION_BACKEND_NAME not in AttentionBackendEnum.__members__:
        register_backend(ATTENTION_BACKEND_NAME, ATTENTION_BACKEND)
