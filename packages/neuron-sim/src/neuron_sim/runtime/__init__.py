"""The runtime: logical NeuronCores (devices), queues with asynchronous launches, events that
measure simulated device time, and errors kept until the next synchronization point.

Dependencies run one way: ``runtime`` -> ``device`` -> ``queue`` -> (``event``, ``core``,
``timeline``, ``task``, ``failure``); each object uses the others only through their public
methods. A device's ``Timeline`` places every task on the simulated clock; its ``Core`` runs
launches on the executors (``neuron_sim.executor``).

    rt = get_runtime()                      # devices from NEURON_RT_VISIBLE_CORES & co.
    dev = rt.device(0)
    q = dev.new_queue()
    start, end = Event(), Event()
    start.record(q)
    q.launch(neff, {"lhsT": a, "rhs": b, "out": c}, context="aten::mm [256, 256] x [256, 512]")
    q.launch([core0_program, core1_program], buffers)   # LNC=2: one task, both physical cores at once
    q.launch(neff, buffers, executor="exact", not_before_ns=start)
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
from .queue import Queue, synchronize_all
from .runtime import Runtime, current_runtime, get_runtime, is_initialized, reset_runtime
from .task import Submission
from .timeline import Lane, Timeline

__all__ = [
    "RuntimeConfig", "Runtime", "Device", "Queue", "Event", "Submission", "Timeline", "Lane", "synchronize_all",
    "get_runtime", "reset_runtime", "is_initialized", "current_runtime",
    "register_executor", "unregister_executor", "known_modes",
    "RuntimeUsageError", "ForkedProcessError",
    "LNC_ENV", "VISIBLE_CORES_ENV", "NUM_CORES_ENV", "LAUNCH_BLOCKING_ENV", "SIM_MODE_ENV", "NUM_CHIPS_ENV",
]
