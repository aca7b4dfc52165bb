"""What the shim's PrivateUse1 ProfilerStubs ask (csrc/profiler/NeuronProfilerStubs.cpp): the legacy
profiler, ``torch.autograd.profiler.profile(use_device="neuron")``, times each op by the device
clock of the thread's current stream before and after it."""

from __future__ import annotations

from .. import execution
from ..device import neuron


def device_clock_ns(device: int) -> float:
    """Simulated time at which everything submitted so far to the current stream of ``device`` completes."""
    return execution.queue(device).sim_time_ns


def synchronize() -> None:
    neuron.synchronize()
