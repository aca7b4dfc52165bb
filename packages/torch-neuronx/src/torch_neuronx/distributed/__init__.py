"""torch.distributed on neuron: the ``neuron`` process-group backend.

Importing torch_neuronx registers it (``register``), for the ``neuron`` device type, so all of
these create it (under ``torchrun``, or with ``MASTER_ADDR`` / ``MASTER_PORT`` / ``RANK`` /
``WORLD_SIZE`` set):

    import torch, torch.distributed as dist
    dist.init_process_group()                          # the accelerator is neuron: backend neuron
    dist.init_process_group("neuron")
    dist.init_process_group("cpu:gloo,neuron:neuron")  # one neuron group serves both devices
    x = torch.ones(4, device="neuron")
    dist.all_reduce(x)                                 # device work on the current stream

Bytes move over PyTorch's ProcessGroupGloo; each collective on neuron tensors takes a modelled
device time (``timing``). See docs/distributed.md.
"""

from __future__ import annotations

import torch.distributed as dist

from .backend import BACKEND_NAME, NeuronProcessGroup, create
from .timing import collective_ns

__all__ = ["BACKEND_NAME", "NeuronProcessGroup", "collective_ns", "create", "register"]


def register() -> bool:
    """Register the ``neuron`` backend with torch.distributed (default for the neuron device
    type). False when torch was built without distributed support."""
    if not dist.is_available():
        return False
    if BACKEND_NAME.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND_NAME, create, devices=["neuron"])
    return True
