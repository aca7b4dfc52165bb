"""The runtime: the devices this process sees, and the process-wide instance frameworks use.

``get_runtime()`` creates the runtime on first use from the environment (see ``config``); tests
build their own ``Runtime(config)`` or call ``reset_runtime()``. All devices share one simulated
timeline starting at 0 when the runtime is created, so events on different devices compare.
"""

from __future__ import annotations

import itertools
import os
import threading

from ..trace.records import ClockAnchor
from ..trace.sink import TraceSink, global_sink
from .config import RuntimeConfig
from .device import Device
from .fork import ProcessGuard
from .queue import synchronize_all


class Runtime:
    def __init__(self, config: RuntimeConfig | None = None, *, blocking: bool | None = None, trace: TraceSink | None = None):
        self.config = config if config is not None else RuntimeConfig.from_env()
        self.blocking = self.config.launch_blocking if blocking is None else bool(blocking)
        self.trace = trace if trace is not None else global_sink()
        self.guard = ProcessGuard()
        self.anchor = ClockAnchor.now()  # simulated time 0 on the host's clocks: how traces of processes merge
        ids = itertools.count(1)  # launch ids unique across devices, for correlating trace records
        self.devices: tuple[Device, ...] = tuple(
            Device(
                i, self.config.arch, self.config.hbm_bytes_per_core, core_id=core, mode=self.config.sim_mode,
                blocking=self.blocking, trace=self.trace, guard=self.guard, launch_ids=ids,
                lnc=self.config.logical_nc_config, lnc_configured=self.config.lnc_configured, anchor=self.anchor,
            )
            for i, core in enumerate(self.config.visible_cores)
        )

    def __repr__(self) -> str:
        return (
            f"<Runtime {self.config.arch.name}, {self.device_count} device(s) (cores {list(self.config.visible_cores)}), "
            f"LNC={self.config.logical_nc_config}{', blocking' if self.blocking else ''}>"
        )

    @property
    def device_count(self) -> int:
        return len(self.devices)

    def device(self, index: int) -> Device:
        self.guard.check()
        if not isinstance(index, int) or isinstance(index, bool):
            raise TypeError(f"device index must be an int, got {type(index).__name__}")
        if not 0 <= index < len(self.devices):
            valid = f"0-{len(self.devices) - 1}" if self.devices else "none"
            raise IndexError(
                f"neuron device {index} does not exist: this process sees {len(self.devices)} device(s) (valid indices: {valid}); "
                f"see NEURON_RT_VISIBLE_CORES / NEURON_RT_NUM_CORES"
            )
        return self.devices[index]

    @property
    def used(self) -> bool:
        """Whether any device was ever used (allocations or submitted work)."""
        return any(d.used for d in self.devices)

    def synchronize(self) -> None:
        """Wait for every queue of every device; raise the earliest kept error, naming the others."""
        self.guard.check()
        synchronize_all([q for d in self.devices for q in d.queues],
                        lambda: [f for d in self.devices for f in d.take_released_failures()])

    def query(self) -> bool:
        return all(d.query() for d in self.devices)


_runtime: Runtime | None = None
_runtime_lock = threading.Lock()


def _after_fork_in_child() -> None:
    global _runtime_lock
    _runtime_lock = threading.Lock()  # another thread may have held it at fork time


os.register_at_fork(after_in_child=_after_fork_in_child)


def get_runtime() -> Runtime:
    """The process-wide runtime, created from the environment on first use.

    Raises ForkedProcessError in a child forked after the runtime was created (use 'spawn')."""
    runtime = _runtime
    if runtime is None:
        with _runtime_lock:
            runtime = _runtime
            if runtime is None:
                runtime = _set(Runtime())
    runtime.guard.check_thoroughly()
    return runtime


def current_runtime() -> Runtime | None:
    """The process-wide runtime if one exists (without creating it)."""
    return _runtime


def is_initialized() -> bool:
    return _runtime is not None


def reset_runtime() -> None:
    """Drop the process-wide runtime (tests). Outstanding work is waited for and kept errors are
    discarded; in a forked child the inherited runtime is just forgotten (its threads are gone)."""
    global _runtime
    with _runtime_lock:
        runtime, _runtime = _runtime, None
    if runtime is not None and not runtime.guard.in_child:
        for d in runtime.devices:
            for q in d.queues:
                q.wait_idle()
                q.take_failure()
            d.take_released_failures()


def _set(runtime: Runtime) -> Runtime:
    global _runtime
    _runtime = runtime
    return runtime
