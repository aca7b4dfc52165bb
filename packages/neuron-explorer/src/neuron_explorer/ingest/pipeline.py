"""Ingest: a capture session -> the profile's Parquet tables (see ``schema.tables``).

One streaming pass over the system trace. Each device-profiled execution adds its schedule's rows
(derived once per schedule, ``schedule.py``) shifted to its start; tables are written a row group
at a time, so memory holds the schedules in use and one row group per table, whatever the length
of the run. The profile is written to ``<dir>.partial`` and renamed when complete: a profile
directory is never half-written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pyarrow as pa
from neuron_sim import get_architecture
from tqdm import tqdm

from ..errors import ExplorerError
from ..output.parquet import TableWriter
from ..schema import TABLES, schema_fields_table
from ..session import layout
from ..session.reader import Session
from .device import DeviceEmitter
from .lookups import SourceFrames, int_ns, metadata_row, per_pc_columns, tensor_info_rows
from .memory import MAX_ROWS as MAX_OCCUPANCY_ROWS
from .memory import occupancy
from .rollups import Peaks, Rollups, summary_row
from .schedule import DEPENDENCY_TYPES, as_dictionary, build_view

VIEW_CACHE_ROWS = 4_000_000  # schedules kept derived at once (a trace that alternates more re-derives them)


class _Views:
    """Derived schedules by key, least recently used dropped beyond a row budget."""

    def __init__(self, session: Session, frames: SourceFrames):
        self.session = session
        self.frames = frames
        self._views: OrderedDict = OrderedDict()
        self._rows = 0
        self._per_pc: dict[str, dict] = {}
        self.neff_views: dict[str, object] = {}  # first view of each NEFF (for TensorInfo)
        self.warnings: list[tuple[str, str]] = []
        self.timing_info = session.info.get("timings") or {}

    def get(self, key: str, neff_name: str):
        view = self._views.get(key)
        if view is not None:
            self._views.move_to_end(key)
            return view
        neff = self.session.neff(neff_name)
        per_pc = self._per_pc.get(neff_name)
        if per_pc is None:
            per_pc = self._per_pc[neff_name] = per_pc_columns(neff.program, self.frames)
        tables = self.session.device_tables(key)
        total = (self.timing_info.get(key) or {}).get("total_ns")
        if total is None:
            total = float(tables["instructions"].column("end").to_numpy().max(initial=0.0))
        view = build_view(key, neff_name, tables, total, per_pc, len(neff.program.instructions))
        _prepare(view)
        if view.rows <= MAX_OCCUPANCY_ROWS:
            view.occupancy = occupancy(neff.program, get_architecture(neff.program.target), view.numbers["pc"], view.end)
        else:
            view.occupancy = None
            self.warnings.append((f"schedule {key} ({neff_name}) has {view.rows:,} instructions: its SbufUsage and "
                                  f"PsumUsage series are left out (above {MAX_OCCUPANCY_ROWS:,})", "Partial Data"))
        self.neff_views.setdefault(neff_name, view)
        self._views[key] = view
        self._rows += view.rows
        while self._rows > VIEW_CACHE_ROWS and len(self._views) > 1:
            _, old = self._views.popitem(last=False)
            self._rows -= old.rows
        return view


def _prepare(view) -> None:
    """Per-schedule columns the emitter reuses for every execution."""
    view.strings = {name: as_dictionary(array) for name, array in view.strings.items()}
    for name in ("queue_name", "source", "dest", "variable"):
        view.dma[name] = as_dictionary(view.dma[name])
    for name in ("semaphore", "update_source"):
        view.semaphores[name] = as_dictionary(view.semaphores[name])
    view.wait_ns = int_ns(view.wait)
    view.dma_start = view.dma["start"].to_numpy()
    view.dma_end = view.dma["end"].to_numpy()
    nbytes = view.dma["transfer_bytes"].to_numpy()
    view.dma_bytes = nbytes
    view.dma_throughput = nbytes / np.maximum(view.dma_end - view.dma_start, 1e-9) * 1e9
    view.sem_ts = view.semaphores["timestamp"].to_numpy()
    view.sem_value = view.semaphores["value"].to_numpy().astype(np.int32)
    names = [e for e, (s, _) in view.active.items() for _ in range(len(s))]
    view.active_starts = np.concatenate([s for s, _ in view.active.values()])
    view.active_ends = np.concatenate([e for _, e in view.active.values()])
    view.active_engine = as_dictionary(pa.array(names, pa.string()))
    kinds = np.concatenate([view.edges.kind, view.dma_edges.kind])
    view.flow_type = as_dictionary(pa.array([DEPENDENCY_TYPES[k] for k in kinds.tolist()], pa.string()))
    view.flow_gap = int_ns(np.concatenate([view.edges.gap, view.dma_edges.gap]))
    view.flow_out_table = as_dictionary(pa.array(["Instruction"] * len(view.edges.kind) +
                                                 ["DmaPacket"] * len(view.dma_edges.kind), pa.string()))


def default_profile_dir(session_dir: Path) -> Path:
    return Path(session_dir) / layout.PROFILE_DIR


def ingest(session_dir: str | os.PathLike, output_dir: str | os.PathLike | None = None, *, display_name: str | None = None,
           ignore_device_profile: bool = False, progress: bool = False) -> Path:
    """Ingest the session at ``session_dir`` into Parquet tables; returns the profile directory
    (``<session>/profile`` unless ``output_dir`` says otherwise)."""
    session = Session(session_dir)
    target = Path(output_dir) if output_dir is not None else default_profile_dir(session.path)
    partial = target.with_name(target.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    try:
        partial.mkdir(parents=True)
    except OSError as err:
        raise ExplorerError(f"cannot write the profile to {target}: {err}; choose another directory with --output-dir") from None
    try:
        _Ingest(session, partial, display_name, ignore_device_profile, progress).run()
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    if target.exists():
        old = target.with_name(target.name + ".old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(partial, target)
    return target


class _Ingest:
    def __init__(self, session: Session, out: Path, display_name, ignore_device: bool, progress: bool):
        self.session = session
        self.out = out
        self.display_name = display_name
        self.ignore_device = ignore_device
        self.progress = progress
        self.frames = SourceFrames(session.sources)
        self.views = _Views(session, self.frames)
        self.rollups = Rollups()
        self.w = {name: TableWriter(out, TABLES[name]) for name in (
            "Instruction", "DmaPacket", "SemaphoreUpdate", "ActiveTime", "HbmUsage", "SbufUsage", "PsumUsage", "Flow",
            "Summary", "ExecutionInfo",
            "SystemProfileEvents")}
        self.device = DeviceEmitter(self.w)
        self.next_event = 0
        self.first_hw = None
        self.last_hw = None
        self.targets: dict[str, str] = {}
        self.peaks: dict[str, Peaks] = {}
        self._exec_rows: list[dict] = []
        self._event_rows: list[dict] = []
        self._flow_rows: list[dict] = []
        self._summary_rows: list[dict] = []
        self.origin = int(session.info.get("host_clock_origin_ns") or 0)
        self.host = str(session.info.get("host") or "")
        self.pid = int(session.info.get("pid") or 0)

    # --- the pass --------------------------------------------------------------------------
    def run(self) -> None:
        bar = None
        if self.progress:
            bar = tqdm(total=self.session.trace_path.stat().st_size, unit="B", unit_scale=True,
                       desc=f"ingesting {self.session.path.name}", leave=False)
        try:
            for index, task in enumerate(self.session.tasks(on_bytes=bar.update if bar is not None else None)):
                self._task(index, task)
                if len(self._event_rows) >= 8192:
                    self._flush_rows()
        finally:
            if bar is not None:
                bar.close()
        self._flush_rows()
        self._finish()

    def _flush_rows(self) -> None:
        for name, rows in (("ExecutionInfo", self._exec_rows), ("SystemProfileEvents", self._event_rows),
                           ("Flow", self._flow_rows), ("Summary", self._summary_rows)):
            self.w[name].append_rows(rows)
            rows.clear()

    def _task(self, index: int, task: dict) -> None:
        launch_id, nc, name = task["launch_id"], task["nc"], task["name"]
        start, end = float(task["start_ns"]), float(task["end_ns"])
        profiled = task["device_profiled"] and not self.ignore_device
        node_id = None
        rows = 0
        if task["kind"] == "neff":
            node_id = self.rollups.graph_node(name, task.get("program") or task.get("neff") or name)
            view = None
            if profiled:
                view = self.views.get(task["timing"], task["neff"])
                self._note_target(task["neff"])
                self.device.add(view, launch_id, nc, start, name, node_id, self._call_site(task))
                rows = view.rows
                peaks = self.peaks[self.targets[task["neff"]]]
                self._summary_rows.append(summary_row("execution", view.rollup, end - start, peaks, launch_id, nc))
            self.rollups.add_execution(node_id, start, end, view)
            self.first_hw = start if self.first_hw is None else min(self.first_hw, start)
            self.last_hw = end if self.last_hw is None else max(self.last_hw, end)
        self._exec_rows.append({
            "execution_index": index, "launch_id": launch_id, "neff_name": task.get("neff") if profiled else None,
            "execution_start_ts": int(int_ns(start)), "execution_end_ts": int(int_ns(end)), "nc_idx": nc,
            "device": task["device"], "queue": task["queue"], "kind": task["kind"], "name": name,
            "context": task.get("context"), "executor": task.get("executor") or "",
            "host_start_ns": task["host_start_ns"] - self.origin, "host_end_ns": task["host_end_ns"] - self.origin,
            "thread_id": task["thread_id"], "device_profiled": bool(profiled), "error": task.get("error"),
            "framework_node_id": node_id, "row_count": rows,
        })
        self._system_events(task, start, end)

    def _call_site(self, task: dict) -> tuple[str, str] | None:
        """(location, stack frame ids) of the user's line an eager op's launch came from: its rows
        point there rather than at the lowering, whose locations every call site of the op shares."""
        site = task.get("call_site")
        frame = self.frames.frame(site) if site else None
        return None if frame is None else (site, f"[{frame}]")

    def _note_target(self, neff_name: str) -> None:
        if neff_name not in self.targets:
            target = self.session.neff(neff_name).program.target
            self.targets[neff_name] = target
            self.peaks.setdefault(target, Peaks(target))
            self.rollups.target = self.rollups.target or target

    def _system_events(self, task: dict, start: float, end: float) -> None:
        events = task["events"]
        flow = [str(task["launch_id"])]
        extra = json.dumps({k: task.get(k) for k in ("kind", "context", "executor", "error", "program") if task.get(k)})
        made = {}
        for event in events:
            device_side = event == "nc_exec_running"
            s, e = ((int(int_ns(start)), int(int_ns(end))) if device_side else
                    (task["host_start_ns"] - self.origin, task["host_end_ns"] - self.origin))
            row = {
                "id": self.next_event, "name": task["name"], "start_ts": s, "end_ts": e, "duration_ns": e - s,
                "trace_event_source": "neuron_hw" if device_side else "neuron_rt", "instance_id": self.host,
                "process_id": self.pid, "thread_id": 0 if device_side else task["thread_id"], "nc_idx": task["nc"],
                "worker_gid": task["nc"], "launch_id": task["launch_id"], "event_type": event,
                "flow_id": flow if task["kind"] == "neff" else None, "framework_stream_id": task["queue"],
                "extra_attributes_json": extra,
            }
            made[event] = row
            self._event_rows.append(row)
            self.next_event += 1
        rt, hw = made.get("nrt_execute"), made.get("nc_exec_running")
        if rt is not None and hw is not None:  # the runtime call that started the device execution
            self._flow_rows.append({"in_id": rt["id"], "out_id": hw["id"], "in_table": "SystemProfileEvents",
                                    "out_table": "SystemProfileEvents", "dependency_type": "LAUNCH", "gap_time": 0})

    # --- after the pass ----------------------------------------------------------------------
    def _finish(self) -> None:
        target = self.rollups.target or "trn2"
        peaks = self.peaks.get(target) or Peaks(target)
        self._summary_rows.append(summary_row("profile", self.rollups.profile, self.rollups.profiled_ns, peaks))
        self._flush_rows()
        self.device.flush()
        for writer in self.w.values():
            writer.close()
        small = {
            "FrameworkNode": self.rollups.framework_rows(peaks),
            "OpcodeSummary": self.rollups.opcode_rows(),
            "TensorInfo": [row for name, view in self.views.neff_views.items()
                           for row in tensor_info_rows(name, self.session.neff(name).program, view)],
            **self.frames.tables(),
            "Metadata": [metadata_row(self.session.info, target, int(int_ns(self.first_hw or 0)),
                                      int(int_ns(self.last_hw or 0)), self.display_name, str(self.session.path),
                                      self.session.fingerprint())],
            "Warning": [{"message": m, "category": c} for m, c in self.session.warnings + self.views.warnings + self._warnings()],
        }
        for name, rows in small.items():
            writer = TableWriter(self.out, TABLES[name])
            writer.append_rows(rows)
            writer.close()
        self._host_samples()
        fields = TableWriter(self.out, TABLES["SchemaFields"])
        table = schema_fields_table()
        fields.append(table.num_rows, **{c: table.column(c).combine_chunks() for c in table.column_names})
        fields.close()

    def _host_samples(self) -> None:
        cpu, memory = TableWriter(self.out, TABLES["CpuUsage"]), TableWriter(self.out, TABLES["HostMemUsage"])
        cpu_rows, memory_rows = [], []
        for sample in self.session.host_samples():
            t = sample["t"] - self.origin
            cpu_rows += [{"timestamp": t, "util_percent": float(v), "cpu_id": str(k), "instance_id": self.host}
                         for k, v in (sample.get("cpu") or {}).items()]
            if "mem_used" in sample:
                memory_rows.append({"timestamp": t, "used_bytes": int(sample["mem_used"]), "instance_id": self.host,
                                    "used_percent": 100.0 * sample["mem_used"] / max(1, sample["mem_total"])})
            if len(cpu_rows) >= 8192:
                cpu.append_rows(cpu_rows)
                cpu_rows.clear()
        cpu.append_rows(cpu_rows)
        memory.append_rows(memory_rows)
        cpu.close()
        memory.close()

    def _warnings(self) -> list[tuple[str, str]]:
        warnings = []
        mode = str((self.session.info.get("config") or {}).get("device_profile", ""))
        if mode == "0" or self.ignore_device:
            warnings.append(("no device profile: instruction tables are empty (capture with device_profile=model or "
                             "session, and do not pass --ignore-device-profile)", "Missing Data"))
        elif mode == "model":
            warnings.append(("device profile mode 'model': only the first execution of each NEFF per core has "
                             "instruction rows; FrameworkNode statistics cover those executions", "Partial Data"))
        return warnings
