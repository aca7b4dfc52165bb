"""View ops on neuron tensors: metadata only, computed by the device-agnostic CPU kernels."""

from __future__ import annotations

import torch

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def metadata_only(op):
    """View ops whose CPU kernels only compute sizes and strides: valid for any device."""

    def kernel(*args, **kwargs):
        return op.redispatch(_CPU_KEYS, *args, **kwargs)

    return kernel


METADATA_OPS = [
    "as_strided", "view", "_reshape_alias", "set_.source_Storage", "set_.source_Storage_storage_offset",
    "set_.source_Tensor", "set_", "unfold",
]


def has_compatible_shallow_copy_type(self, other) -> bool:
    # Lets ``cpu_param.data = neuron_tensor`` work, so Module.to("neuron") keeps Parameter
    # identity (an optimizer built before .to() still holds the live parameters).
    ok = ("cpu", "neuron")
    return self.layout == other.layout == torch.strided and self.device.type in ok and other.device.type in ok
