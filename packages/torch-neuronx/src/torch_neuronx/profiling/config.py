"""NeuronConfig and ProfileMode: what a torch.profiler run captures on the neuron device.

``NeuronConfig`` is a ``torch.profiler`` experimental config (pass it as ``experimental_config``).
Kineto hands the shim's activity profiler only the config's ``custom_profiler_config`` text; that
text names this object (and spells its options, as TorchNeuron's does), so the profiler's
session reads the options from here.
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Iterable
from pathlib import Path

import torch
from neuron_explorer import CaptureConfig, CaptureConfigError
from neuron_explorer.capture import parse_core_list
from neuron_explorer.capture.config import DEFAULT_MAX_EVENTS_PER_NC, DEFAULT_OUTPUT_DIR, OUTPUT_DIR_ENV
from neuron_explorer.capture.recorder import visible_cores

from .registry import KEY, register


class ProfileMode(enum.Enum):
    DEVICE = "device"  # instruction-level traces of every device execution in the profiled steps
    RUNTIME = "runtime"  # the runtime's events: launches, copies, host tasks on each queue
    CPU_UTIL = "cpu_util"  # host CPU utilization samples
    HOST_MEMORY = "host_memory"  # host memory samples




class NeuronConfig(torch._C._profiler._ExperimentalConfig):
    def __init__(self, modes: Iterable[ProfileMode] = (ProfileMode.DEVICE, ProfileMode.RUNTIME), *,
                 profile_output_dir: str | os.PathLike | None = None, capture_enabled_for_nc: str | None = None,
                 max_events_per_nc: int | None = None, neff_cache_dir: str | os.PathLike | None = None,
                 precache_node_info: bool = True, correlate_device_time: bool = True):
        modes = tuple(modes)
        for mode in modes:
            if not isinstance(mode, ProfileMode):
                raise TypeError(f"NeuronConfig modes are ProfileMode members, got {mode!r}")
        if not modes:
            raise ValueError("NeuronConfig needs at least one ProfileMode")
        self.modes = frozenset(modes)
        # Absolute: session paths stay valid if the process changes directory later.
        self.profile_output_dir = Path(profile_output_dir or os.environ.get(OUTPUT_DIR_ENV) or DEFAULT_OUTPUT_DIR).absolute()
        self.capture_enabled_for_nc = capture_enabled_for_nc
        self.cores = None if capture_enabled_for_nc in (None, "") else parse_core_list(capture_enabled_for_nc,
                                                                                      "capture_enabled_for_nc")
        if max_events_per_nc is not None and (not isinstance(max_events_per_nc, int) or max_events_per_nc < 1):
            raise CaptureConfigError(f"max_events_per_nc={max_events_per_nc!r} must be a positive integer")
        self.max_events_per_nc = max_events_per_nc or DEFAULT_MAX_EVENTS_PER_NC
        self.neff_cache_dir = None if neff_cache_dir is None else Path(neff_cache_dir)
        self.precache_node_info = bool(precache_node_info)
        self.correlate_device_time = bool(correlate_device_time)
        self.sessions: list[Path] = []  # one capture session per profiled window, in order
        self.session_started: dict[Path, float] = {}  # session -> time.time() its window opened
        self.capture_config().check_cores(visible_cores())  # a core this process lacks fails here, not in Kineto
        self.id = register(self)
        super().__init__(custom_profiler_config=f"{KEY}:{self.id};" + ";".join(
            f"{k}:{v}" for k, v in (("modes", ",".join(sorted(m.name for m in self.modes))),
                                    ("capture_enabled_for_nc", capture_enabled_for_nc or ""),
                                    ("max_events_per_nc", self.max_events_per_nc),
                                    ("profile_output_dir", self.profile_output_dir))))

    def __repr__(self) -> str:
        return (f"NeuronConfig(modes={sorted(m.name for m in self.modes)}, profile_output_dir={str(self.profile_output_dir)!r}, "
                f"capture_enabled_for_nc={self.capture_enabled_for_nc!r})")

    def capture_config(self) -> CaptureConfig:
        """The neuron-explorer capture of a profiled window."""
        return CaptureConfig(device_profile="session" if ProfileMode.DEVICE in self.modes else "0",
                             system_profile=ProfileMode.RUNTIME in self.modes, cores=self.cores,
                             max_events_per_nc=self.max_events_per_nc, cpu_util=ProfileMode.CPU_UTIL in self.modes,
                             host_memory=ProfileMode.HOST_MEMORY in self.modes)

    def add_session(self, session: Path) -> None:
        """Called when a profiled window opens its capture session."""
        self.sessions.append(session)
        self.session_started[session] = time.time()

    def get_session_dir(self) -> Path | None:
        """The session directory of the latest profiled window (None before the first)."""
        return self.sessions[-1] if self.sessions else None
