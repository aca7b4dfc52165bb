"""Writing a capture session (see ``layout``): task records as they come, programs and schedules once.

Each distinct program is written once as a NEFF and each distinct schedule (a ``TimingResult``,
shared by every launch of a program) once as device-trace Parquet files; executions only refer to
them, so a long run costs one short JSON line per task. The NEFFs and device traces are written
when the session closes: serializing a program, computing its instruction-level schedule and
writing its Parquet files take tens of milliseconds each, and done while the profiled steps run
they competed with the steps for the host's cores and the GIL (a profiled eager training step
meets hundreds of new programs). The writer keeps only references to the programs and schedules
(which the runtime's caches hold anyway). It is not thread-safe: the recorder calls it from its
one writer thread, and closes it after that thread stopped.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import socket
import time
from operator import attrgetter
from pathlib import Path

import neuron_sim
import pyarrow as pa
import pyarrow.parquet as pq
from neuron_sim.neff import Neff

from ..schema.version import SESSION_FORMAT_VERSION
from ..version import __version__
from . import layout

MAX_SOURCE_BYTES = 4 << 20  # source files larger than this are not copied (the UI asks for a source root)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def neff_file_stem(program_name: str) -> str:
    """The start of the session file name of a program's NEFF (the rest tells programs apart)."""
    return _UNSAFE.sub("_", program_name)[:80]


def new_session_dir(output_dir: str | os.PathLike) -> Path:
    """``<output_dir>/<host>_pid_<pid>/<timestamp>/``, created (a suffix keeps it unique)."""
    host = _UNSAFE.sub("_", socket.gethostname()) or "host"
    parent = Path(output_dir) / f"{host}_pid_{os.getpid()}"
    stamp = _dt.datetime.now().strftime("%Y%m%d_%H%M%S_%f")
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1000):
        path = parent / (stamp if n == 0 else f"{stamp}_{n}")
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"could not create a new session directory under {parent}")


class SessionWriter:
    def __init__(self, path: Path, config: dict, display_name: str | None = None):
        self.path = Path(path)
        self._trace = open(self.path / layout.SYSTEM_TRACE_FILE, "a", encoding="utf-8")
        # Named when first seen, written at close; the references keep id() from being reused.
        self._neffs: dict[int, tuple[str, object, dict, dict | None]] = {}  # id(program) -> (file name, program, metadata, summary)
        self._neff_files: dict[str, dict] = {}
        self._timings: dict[int, tuple[str, object, str]] = {}  # id(timing) -> (key, timing, its NEFF's file name)
        self._timing_info: dict[str, dict] = {}
        self._source_paths: set[str] = set()
        self.task_count = 0
        self.info = {
            "format": layout.SESSION_FORMAT,
            "version": SESSION_FORMAT_VERSION,
            "explorer_version": __version__,
            "runtime_version": neuron_sim.__version__,
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "display_name": display_name,
            "started_unix_ns": time.time_ns(),
            "host_clock_origin_ns": time.perf_counter_ns(),  # host timestamps in the trace are perf_counter_ns
            "stopped_unix_ns": None,
            "complete": False,
            "config": config,
        }
        self._write_info()

    # --- records ---------------------------------------------------------------------------
    def write_tasks(self, lines: list[dict]) -> None:
        if lines:
            self._trace.write("".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines))
            self._trace.flush()
            self.task_count += len(lines)

    def note_source(self, location: str) -> None:
        """Copy the file of ``location`` (``file:line``) into the session at close."""
        path = location.rpartition(":")[0]
        if path:
            self._source_paths.add(path)

    def neff_name(self, program, metadata: dict, timing_summary: dict | None) -> str:
        """The NEFF file that will hold ``program`` (written at close)."""
        known = self._neffs.get(id(program))
        if known is not None:
            return known[0]
        name = f"{neff_file_stem(program.name)}_{len(self._neffs)}.neff"
        self._neffs[id(program)] = (name, program, metadata, timing_summary)
        return name

    def timing_key(self, timing, neff: str) -> str:
        """The device-trace files of ``timing`` (a TimingResult), written at close."""
        known = self._timings.get(id(timing))
        if known is not None:
            return known[0]
        key = f"timing_{len(self._timings)}"
        self._timings[id(timing)] = (key, timing, neff)
        return key

    def _write_neff(self, name: str, program, metadata: dict, timing_summary: dict | None) -> None:
        target = self.path / layout.NEFF_DIR / name
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(Neff(program, timing_summary, dict(metadata or {})).to_bytes())
        self._neff_files[name] = {"program": program.name, "target": program.target, "instructions": len(program.instructions)}
        self._source_paths.update(loc.rpartition(":")[0] for loc in (i.location for i in program.instructions) if loc)

    def _write_timing(self, key: str, timing, neff: str) -> None:
        (self.path / layout.DEVICE_DIR).mkdir(exist_ok=True)
        tables = device_tables(timing)
        for part, table in tables.items():
            pq.write_table(table.replace_schema_metadata({layout.PARQUET_FORMAT_KEY: SESSION_FORMAT_VERSION.encode()}),
                           self.path / layout.device_file(key, part), compression="zstd")
        self._timing_info[key] = {"neff": neff, "total_ns": timing.total_ns,
                                  **{part: table.num_rows for part, table in tables.items()}}

    # --- finishing -------------------------------------------------------------------------
    def close(self, stats: dict, capture_sources: bool = True) -> None:
        self._trace.close()
        for name, program, metadata, summary in self._neffs.values():
            self._write_neff(name, program, metadata, summary)
        for key, timing, neff in self._timings.values():
            self._write_timing(key, timing, neff)
        if capture_sources:
            self.info["sources"] = self._copy_sources()
        self.info.update(stopped_unix_ns=time.time_ns(), complete=True, tasks=self.task_count, neffs=self._neff_files,
                         timings=self._timing_info, **stats)
        self._write_info()
        self._neffs.clear()
        self._timings.clear()

    def _copy_sources(self) -> dict[str, str]:
        stored: dict[str, str] = {}
        directory = self.path / layout.SOURCES_DIR
        for n, original in enumerate(sorted(self._source_paths)):
            try:
                if not os.path.isfile(original) or os.path.getsize(original) > MAX_SOURCE_BYTES:
                    continue
                data = Path(original).read_bytes()
            except OSError:
                continue
            directory.mkdir(exist_ok=True)
            name = f"{n}_{_UNSAFE.sub('_', os.path.basename(original))}"
            (directory / name).write_bytes(data)
            stored[original] = name
        if stored:
            (directory / layout.SOURCES_INDEX).write_text(json.dumps(stored, indent=1))
        return stored

    def _write_info(self) -> None:
        tmp = self.path / (layout.SESSION_FILE + ".tmp")
        tmp.write_text(json.dumps(self.info, indent=1, default=str))
        os.replace(tmp, self.path / layout.SESSION_FILE)


_INSTRUCTION_FIELDS = ("index", "opcode", "engine", "timeline_track", "start_ts", "end_ts", "evt_wait_time_ns", "waited_on",
                       "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
                       "psum_write_bytes", "raw_flops", "adjusted_flops", "transpose_flops", "performance_mode")
_DMA_FIELDS = ("instruction_index", "queue_name", "engine_idx", "start_ts", "end_ts", "transfer_bytes", "source", "dest")
_SEMAPHORE_FIELDS = ("timestamp", "semaphore", "value", "update_source", "instruction_index")


def _columns(records, fields, schema: pa.Schema) -> pa.Table:
    if not records:
        return schema.empty_table()
    getters = attrgetter(*fields)
    columns = list(zip(*map(getters, records)))
    return pa.Table.from_arrays([pa.array(col, type=f.type) for col, f in zip(columns, schema)], schema=schema)


def device_tables(timing) -> dict[str, pa.Table]:
    """A TimingResult's instruction, DMA and semaphore records as relative-time tables."""
    return {
        "instructions": _columns(timing.instructions, _INSTRUCTION_FIELDS, layout.DEVICE_INSTRUCTIONS),
        "dma": _columns(timing.dma, _DMA_FIELDS, layout.DEVICE_DMA),
        "semaphores": _columns(timing.semaphores, _SEMAPHORE_FIELDS, layout.DEVICE_SEMAPHORES),
    }
