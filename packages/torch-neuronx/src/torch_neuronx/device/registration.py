"""Registering the ``neuron`` device with PyTorch (once per process).

Order matters: rename PrivateUse1, start the simulator runtime and hand it to the C++ shim
(allocator, hooks, guard), register the device module as ``torch.neuron``, generate the
``Tensor.neuron()``-style methods, then autocast. The op kernels are registered by the layer that
owns them (``torch_neuronx.kernels``), after this.
"""

from __future__ import annotations

import atexit
import os

import torch
from neuron_sim.memory import validity
from neuron_sim.runtime import get_runtime

from .. import _C
from . import amp, hooks, neuron, state
from .bridge import Bridge

NO_MEMORY_CACHING_ENV = "TORCH_NEURONX_NO_MEMORY_CACHING"  # 1: every free returns memory to the HBM at once
_LIBRARIES: list = []  # registrations live as long as these Library objects


def initialize() -> bool:
    """Register the device; False if it already was (then nothing happens)."""
    with state.lock:
        if state.initialized:
            return False
        if torch._C._get_privateuse1_backend_name() != "neuron":
            torch.utils.rename_privateuse1_backend("neuron")
        runtime = get_runtime()
        bridge = Bridge(runtime)
        caching = os.environ.get(NO_MEMORY_CACHING_ENV, "0") in ("", "0")
        _C.init(bridge, [d.hbm.capacity for d in runtime.devices], caching)
        state.install(bridge, _C)
        # The caching allocator reuses blocks without freeing them: while a failed launch has left
        # memory invalid, a reused block is a new tensor and must not inherit the dead one's state.
        validity.watch(_C.set_forget_invalid_on_reuse)
        torch._register_device_module("neuron", neuron)
        torch.utils.generate_methods_for_privateuse1_backend(for_tensor=True, for_module=True, for_storage=True)
        amp.register(_LIBRARIES)
        atexit.register(_drain_at_exit)
        return True


def _drain_at_exit() -> None:
    """Let queued work finish before the interpreter finalizes. Otherwise a queue's daemon worker
    still inside a CPU kernel (which released the GIL) is killed while re-acquiring it, and the
    forced unwind through C++ frames aborts the process ("terminate called without an active
    exception") - e.g. a script whose last ops were never synchronized."""
    try:
        hooks.run_before_synchronize()
        state.bridge().runtime.synchronize()
    except Exception:  # noqa: BLE001 - a kept launch error or a forked child: nothing to report at exit
        pass
