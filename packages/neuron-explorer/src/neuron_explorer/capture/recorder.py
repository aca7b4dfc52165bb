"""The recorder: a trace session over the runtime's task records that writes a capture session.

Records arrive on the thread that ran each task (a queue's worker, or a caller draining its
queue), so the subscriber only filters and appends; a writer thread turns records into the system
trace a few times a second, one JSON line per task. The programs and schedules device-profiled
executions used are written once each when the capture stops (see ``session.writer``).

    with Recorder("./output", CaptureConfig(device_profile="session")) as rec:
        ...                         # anything that launches work on the software NeuronCore
    rec.session_dir                 # -> ./output/<host>_pid_<pid>/<timestamp>/
"""

from __future__ import annotations

import collections
import os
import threading
from pathlib import Path

from neuron_sim.runtime import RuntimeConfig, current_runtime
from neuron_sim.trace import RecordKind, TraceSession, TraceSink

from ..errors import CaptureConfigError
from ..session.writer import SessionWriter, new_session_dir
from .config import DEFAULT_OUTPUT_DIR, CaptureConfig
from .host_samples import HostSampler

FLUSH_SECONDS = 0.2
# The runtime's task records; frameworks' op records (RecordKind.OP) are not part of this capture format yet.
_TASK_KINDS = [kind for kind in RecordKind if kind != RecordKind.OP]
_TASK_EVENTS = {"neff": ("nc_exec_running", "nrt_execute"), "copy": ("dmem_buf_copy",)}


def visible_cores() -> list[int]:
    """The logical cores this process's runtime exposes (the one that exists, or the environment's)."""
    runtime = current_runtime()
    if runtime is not None:
        return list(runtime.config.visible_cores)
    return list(RuntimeConfig.from_env().visible_cores)


class Recorder:
    def __init__(self, output_dir: str | os.PathLike | None = None, config: CaptureConfig | None = None, *,
                 sink: TraceSink | None = None, display_name: str | None = None,
                 cores_available: list[int] | None = None):
        self.output_dir = Path(output_dir if output_dir is not None else DEFAULT_OUTPUT_DIR)
        self.config = config if config is not None else CaptureConfig()
        self.display_name = display_name
        self._session = TraceSession(kinds=_TASK_KINDS, on_record=self._collect, sink=sink)
        self._cores_available = cores_available
        self._lock = threading.Lock()
        self._pending: list[tuple] = []
        self._counts: collections.Counter = collections.Counter()
        self._dropped: collections.Counter = collections.Counter()
        self._executions: collections.Counter = collections.Counter()  # device-profile warm-up counting
        self._writer: SessionWriter | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._started = False
        self._sampler: HostSampler | None = None
        self.session_dir: Path | None = None

    # --- lifecycle -------------------------------------------------------------------------
    def start(self, lazy: bool = False) -> Path | None:
        """Start capturing. With ``lazy`` the session directory is only made once there is something to
        record (a process that never uses the device leaves no empty session behind)."""
        if self._session.active:
            raise RuntimeError(f"this recorder is already capturing into {self.session_dir}")
        if self._started:
            raise RuntimeError("a recorder captures one session; make a new Recorder for another")
        self.config.check_cores(self._cores_available if self._cores_available is not None else visible_cores())
        self._started = True
        if not lazy:
            self._open_session()
        self._thread = threading.Thread(target=self._write_loop, name="neuron-explorer capture writer", daemon=True)
        self._thread.start()
        self._session.start()
        return self.session_dir

    def _open_session(self) -> None:
        try:
            self.session_dir = new_session_dir(self.output_dir)
        except OSError as err:
            raise CaptureConfigError(f"cannot create the profile output directory {self.output_dir}: {err}") from err
        self._writer = SessionWriter(self.session_dir, self.config.to_dict(), self.display_name)
        if self.config.cpu_util or self.config.host_memory:
            self._sampler = HostSampler(self.session_dir, self.config.cpu_util, self.config.host_memory)
            self._sampler.start()

    def stop(self) -> Path | None:
        """Stop capturing and finish the session files; returns the session directory (None if a lazy
        recorder never recorded anything)."""
        if not self._session.active:
            raise RuntimeError("the recorder is not capturing")
        self._session.stop()
        self._stop.set()
        self._thread.join()
        stats = {"recorded_per_nc": {str(k): v for k, v in sorted(self._counts.items())},
                 "dropped_per_nc": {str(k): v for k, v in sorted(self._dropped.items())}}
        if self._writer is None and self._error is None and (self._counts or self._dropped):
            self._open_session()  # everything was dropped: the session still says so
        if self._sampler is not None:
            self._sampler.stop()
            if self._sampler.problem:
                stats["host_samples_problem"] = self._sampler.problem
        if self._writer is not None:
            self._writer.close(stats, capture_sources=self.config.capture_sources)
        if self._error is not None:
            raise RuntimeError(f"writing the capture session {self.session_dir} failed") from self._error
        return self.session_dir

    @property
    def capturing(self) -> bool:
        return self._session.active

    def __enter__(self) -> Recorder:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._session.active:
            self.stop()

    # --- the subscriber (runs on the runtime's threads) ------------------------------------
    def _collect(self, record) -> None:
        core = record.core_id if record.core_id is not None else record.device
        cores = self.config.cores
        if cores is not None and core not in cores:
            return
        with self._lock:
            if self._counts[core] >= self.config.max_events_per_nc:
                self._dropped[core] += 1
                return
            self._counts[core] += 1
            self._pending.append((record, core, threading.get_native_id()))

    # --- the writer thread -----------------------------------------------------------------
    def _write_loop(self) -> None:
        while True:
            stopping = self._stop.wait(FLUSH_SECONDS)
            with self._lock:
                batch, self._pending = self._pending, []
            if batch and self._error is None:
                try:
                    if self._writer is None:
                        self._open_session()
                    self._writer.write_tasks([line for line in map(self._line, batch) if line is not None])
                except BaseException as err:  # keep draining; stop() reports it
                    self._error = err
            if stopping:
                with self._lock:
                    if not self._pending:
                        return

    def _device_profiled(self, record, core: int) -> bool:
        mode = self.config.device_profile
        if record.kind != "neff" or record.timing is None or record.error is not None or mode == "0":
            return False
        key = (core,) if mode == "session" else (core, id(record.program))
        seen = self._executions[key]
        self._executions[key] = seen + 1
        if mode == "session":
            return seen >= self.config.num_warmup
        return seen == self.config.num_warmup  # model: the first execution after warm-up

    def _line(self, item) -> dict | None:
        record, core, thread_id = item
        events = [e for e in task_events(record.kind) if e in self.config.event_types]
        profiled = self._device_profiled(record, core)
        if not self.config.system_profile:
            events = []
        if not events and not profiled:
            return None
        return task_line(record, core, thread_id, events, profiled, self._writer)


def task_events(kind: str) -> tuple[str, ...]:
    """The system-trace event types a task of this kind produces."""
    return _TASK_EVENTS.get(kind, ("host_task",))


def task_line(record, core: int, thread_id: int, events: list[str], profiled: bool, writer: SessionWriter) -> dict:
    """The system-trace line of one task record (naming its NEFF and schedule if it is device-profiled)."""
    line = {
        "type": "task", "launch_id": record.launch_id, "device": record.device, "nc": core, "queue": record.queue,
        "kind": record.kind, "name": record.name, "context": record.context, "start_ns": record.start_ns,
        "end_ns": record.end_ns, "host_start_ns": record.host_start_ns, "host_end_ns": record.host_end_ns,
        "thread_id": thread_id, "executor": record.executor, "error": record.error, "events": list(events),
        "program": getattr(record.program, "name", None), "device_profiled": profiled,
    }
    call_site = getattr(record, "call_site", None)
    if call_site:  # the user's line behind an eager op (its program's locations are the lowering's)
        line["call_site"] = call_site
        writer.note_source(call_site)
    if profiled:
        neff = writer.neff_name(record.program, record.metadata, record.timing.summary)
        line["neff"] = neff
        line["timing"] = writer.timing_key(record.timing, neff)
    return line
