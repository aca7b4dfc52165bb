"""``device_map="auto"`` places a model on neuron: accelerate's ``get_max_memory`` counts the
neuron devices' free memory.

accelerate 1.15's ``get_max_memory`` - what Transformers' ``from_pretrained(device_map="auto" /
"balanced" / "sequential")`` and accelerate's ``infer_auto_device_map`` plan with - asks npu, mlu,
sdaa, musa, xpu, hpu or else CUDA for their free memory, never neuron, though the rest of
accelerate knows the device (``PartialState`` picks it; ``dispatch_model`` places integer device
ids on it, as ``torch.device(0)`` is the current accelerator). So every model was planned onto
CPU. accelerate's code is left as it is: its function is wrapped, and the wrapper adds each neuron
device's free memory under its index (as CUDA's are given) when the caller set no ``max_memory``
and accelerate found no accelerator. The wrapper is installed when ``accelerate.utils.modeling``
is imported, or at once if it already is (then also where other modules bound the original:
``accelerate.utils``, Transformers' ``integrations.accelerate``).
"""

from __future__ import annotations

import functools
import logging
import re
import sys

from .after_import import run_after_import

_MODULE = "accelerate.utils.modeling"


def _with_neuron_devices(get_max_memory):
    @functools.wraps(get_max_memory)
    def get_max_memory_with_neuron(max_memory=None):
        found = get_max_memory(max_memory)
        if max_memory is not None or any(isinstance(key, int) for key in found):
            return found
        import torch

        devices = {i: torch.neuron.mem_get_info(i)[0] for i in range(torch.neuron.device_count())}
        return {**devices, **found}  # accelerators first, as accelerate orders them

    get_max_memory_with_neuron.counts_neuron = True
    return get_max_memory_with_neuron


class _NeuronDevicesAreAvailable(logging.Filter):
    """Drops accelerate's "Device 1 is not available, available devices are []" for neuron
    device ids (it counts CUDA's devices when given a ``max_memory`` with device ids)."""

    def filter(self, record) -> bool:
        found = re.match(r"Device (\d+) is not available", str(record.msg))
        if found is None:
            return True
        import torch

        return int(found.group(1)) >= torch.neuron.device_count()


def _install(modeling) -> None:
    original = modeling.get_max_memory
    if getattr(original, "counts_neuron", False):
        return
    logging.getLogger(_MODULE).addFilter(_NeuronDevicesAreAvailable())
    wrapped = _with_neuron_devices(original)
    for module in list(sys.modules.values()):  # the modules that imported the function by name
        names = getattr(module, "__dict__", None)
        if not isinstance(names, dict) or not getattr(module, "__name__", "").startswith(("accelerate", "transformers")):
            continue
        for name, value in list(names.items()):
            if value is original:
                setattr(module, name, wrapped)


def register() -> None:
    if _MODULE in sys.modules:
        _install(sys.modules[_MODULE])
    else:
        run_after_import(_MODULE, _install)
