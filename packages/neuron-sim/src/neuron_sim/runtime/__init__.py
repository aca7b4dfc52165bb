"""The runtime: logical NeuronCores (devices), queues with asynchronous launches, events that
measure simulated device time, and errors kept until the next synchronization point.

    rt = get_runtime()                      # devices from NEURON_RT_VISIBLE_CORES & co.
    dev = rt.device(0)
    q = dev.new_queue()
    start, end = Event(), Event()
    start.record(q)
    q.launch(neff, {"lhsT": a, "rhs": b, "out": c}, context="aten::mm [256, 256] x [256, 512]")
    end.record(q)
    end.synchronize()                       # raises ExecutionError if the launch failed
    start.elapsed_time(end)                 # simulated device milliseconds

Environment variables: see ``config``.
"""

from ..executor.registry import known_modes, register_executor, unregister_executor
from .config import (
    LAUNCH_BLOCKING_ENV,
    LNC_ENV,
    NUM_CHIPS_ENV,
    NUM_CORES_ENV,
    SIM_MODE_ENV,
    VISIBLE_CORES_ENV,
    RuntimeConfig,
)
from .device import Device
from .errors import ForkedProcessError, RuntimeUsageError
from .event import Event
from .queue import Queue
from .runtime import Runtime, current_runtime, get_runtime, is_initialized, reset_runtime
from .task import Submission

__all__ = [
    "RuntimeConfig", "Runtime", "Device", "Queue", "Event", "Submission",
    "get_runtime", "reset_runtime", "is_initialized", "current_runtime",
    "register_executor", "unregister_executor", "known_modes",
    "RuntimeUsageError", "ForkedProcessError",
    "LNC_ENV", "VISIBLE_CORES_ENV", "NUM_CORES_ENV", "LAUNCH_BLOCKING_ENV", "SIM_MODE_ENV", "NUM_CHIPS_ENV",
]
