"""The Python half of the shim's Kineto activity profiler (csrc/profiler/NeuronActivityProfiler.cpp).

A torch.profiler session that lists ``ProfilerActivity.PrivateUse1`` opens a capture window here
when it starts recording (``start``) and closes it when it stops (``stop``). While it is open:

* one trace session (``neuron_sim.trace.TraceSession``) receives the op records the execution API
  publishes with ``Queue.publish_op`` - on the thread that issued the launch or copy, so each is
  tagged with the Kineto correlation id of the op that thread runs (read from the shim) - and the
  runtime's launch records, which give each launch's simulated device time;
* with a ``NeuronConfig``, a neuron-explorer ``Recorder`` writes the capture session of the same
  steps (without one, nothing is written).

``activities`` then gives Kineto the window's device work: each launch lasts its simulated device
time and is placed on the host clock at the later of when it was issued and when the previous
work of its queue ended (a queue's work runs in order), on a track per device and queue.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from typing import TYPE_CHECKING

from neuron_explorer import Recorder
from neuron_explorer.capture.recorder import task_events
from neuron_sim.trace import RecordKind, TraceSession

from .. import _C, execution
from ..device import hooks
from .registry import config_from_custom

if TYPE_CHECKING:
    from .config import NeuronConfig

# This module (and neuron-explorer behind it) is imported with torch_neuronx, before any profile:
# a window opens while torch.profiler's with_stack tracer runs, and a module first imported under
# that tracer leaves it names pointing into the module's freed code (key_averages() then fails to
# decode them).

_ids = itertools.count(1)
_lock = threading.Lock()
_windows: dict[int, Window] = {}  # open and stopped windows, until Kineto takes their activities
_resources: dict[tuple[int, str], int] = {}  # (device, queue) -> Kineto resource (track) id, stable per process


class Window:
    def __init__(self, config: NeuronConfig | None):
        self.config = config
        self.cores = None if config is None else config.cores
        self.recorder = None
        if config is not None:
            self.recorder = Recorder(config.profile_output_dir, config.capture_config())
        self.issued: dict[int, tuple[int, int, int]] = {}  # launch id -> (correlation id, perf_counter_ns, thread) at issue
        self.launches: list = []  # the runtime's LaunchRecords
        self.session = TraceSession(on_record=self._receive)
        self.perf0, self.wall0 = time.perf_counter_ns(), time.time_ns()  # Kineto's events are on the wall clock

    def open(self) -> None:
        # Work issued before the window finishes (and publishes its records) before the window listens:
        # the runtime may run a queue's tasks only later, inside the window.
        _settle()
        if self.recorder is not None:
            self.config.add_session(self.recorder.start())
        self.session.start()

    def _receive(self, record) -> None:
        if record.kind != RecordKind.OP:
            self.launches.append(record)  # a finished task, on the thread that ran it
            return
        # An op record arrives on the thread that submitted the work, inside the op that did: its
        # correlation id is current. None as launch id: the op launched nothing.
        if record.launch_id is not None:
            self.issued[record.launch_id] = (_C._profiler.correlation_id(), record.host_end_ns, threading.get_native_id())

    def close(self) -> None:
        _settle()  # the window's work has run and published its records
        self.session.stop()
        if self.recorder is not None:
            self.recorder.stop()

    def wall_ns(self, perf_ns: int) -> int:
        return self.wall0 + (perf_ns - self.perf0)

    def activities(self) -> list[tuple]:
        ends: dict[tuple[int, str], int] = {}
        out = []
        for rec in sorted(self.launches, key=lambda r: r.launch_id):
            core = rec.core_id if rec.core_id is not None else rec.device
            if self.cores is not None and core not in self.cores:
                continue
            issued = self.issued.get(rec.launch_id)
            if issued is None:
                if rec.host_start_ns < self.perf0:
                    continue  # issued before the window opened
                issued = (0, rec.host_start_ns, 0)  # work not issued through the execution API (an NKI numpy launch)
            correlation, issued_perf, thread = issued
            duration = int(round(rec.end_ns - rec.start_ns))
            if duration <= 0:
                continue
            lane = (rec.device, rec.queue)
            issued_wall = self.wall_ns(issued_perf)
            start = max(issued_wall, ends.get(lane, 0))
            ends[lane] = start + duration
            out.append((activity_name(rec), start, start + duration, rec.device, resource_id(rec.device, rec.queue), correlation,
                        str(rec.kind), task_events(rec.kind)[-1], issued_wall, os.getpid(), thread))
        return out


def _settle() -> None:
    """Wait for all work issued so far; a launch's error stays kept for the user's synchronize."""
    hooks.run_before_synchronize()  # work deferred by adaptive eager is launched
    for device in execution.runtime().devices:
        for q in device.queues:
            q.wait_idle()


def activity_name(rec) -> str:
    """A launch is named by its program (as a CUDA kernel is by its function), host work by what it
    ran and its kind: never the op's own name, which key_averages() would merge with the op's row."""
    program = rec.program
    if program is not None and getattr(program, "name", None):
        return program.name
    return f"{rec.name} ({rec.kind})"


def resource_id(device: int, queue: str) -> int:
    with _lock:
        return _resources.setdefault((device, queue), len(_resources) + 1)


def resources() -> list[tuple[int, int, str]]:
    """(id, device, name) of every track so far."""
    with _lock:
        return [(rid, device, f"neuron:{device} {queue}") for (device, queue), rid in sorted(_resources.items(), key=lambda kv: kv[1])]


# --- what the C++ session calls --------------------------------------------------------------
def start(custom_config: str) -> int:
    """Open a window for a Kineto session; returns its id."""
    config = config_from_custom(custom_config)
    window = Window(config)
    window.open()
    window_id = next(_ids)
    with _lock:
        _windows[window_id] = window
    return window_id


def stop(window_id: int) -> None:
    with _lock:
        window = _windows.get(window_id)
    if window is not None:
        window.close()


def activities(window_id: int) -> tuple[list[tuple], list[tuple[int, int, str]]]:
    """The closed window's device work - (name, start_ns, end_ns, device, resource, correlation, kind,
    runtime event, issued_ns, pid, thread id) each - and the tracks. None when its NeuronConfig says
    ``correlate_device_time=False``."""
    with _lock:
        window = _windows.pop(window_id, None)
    if window is None or (window.config is not None and not window.config.correlate_device_time):
        return [], resources()
    return window.activities(), resources()
