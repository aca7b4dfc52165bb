"""Reading a capture session, checking everything on the way in.

Every fault - a missing or foreign file, corrupt JSON, a truncated trace, a newer format, a
device trace or NEFF that is not there - becomes an ``ExplorerError`` naming the file; nothing is
read on trust. A trace whose last line was cut off (the process died mid-write) is read up to
that line, with a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from neuron_sim import NeffFormatError
from neuron_sim.neff import Neff

from ..errors import MissingNeffError, ProfileFormatError
from ..output.parquet import open_parquet
from ..schema.version import SESSION_FORMAT_VERSION, check_readable
from . import layout

TASK_FIELDS = {"launch_id": int, "device": int, "nc": int, "queue": str, "kind": str, "name": str, "start_ns": (int, float),
               "end_ns": (int, float), "host_start_ns": int, "host_end_ns": int, "thread_id": int, "events": list,
               "device_profiled": bool}


def is_session_dir(path: str | os.PathLike) -> bool:
    return (Path(path) / layout.SESSION_FILE).is_file()


def find_sessions(path: str | os.PathLike) -> list[Path]:
    """The session directories at ``path``: itself, or below it (``<host>_pid_<pid>/<timestamp>/``)."""
    root = Path(path)
    if not root.exists():
        raise FileNotFoundError(f"profile directory {root} does not exist")
    if not root.is_dir():
        raise ProfileFormatError(f"{root} is not a directory (give the profile output directory)")
    if is_session_dir(root):
        return [root]
    found = sorted({p.parent for p in root.glob(f"*/{layout.SESSION_FILE}")} |
                   {p.parent for p in root.glob(f"*/*/{layout.SESSION_FILE}")})
    return found


class Session:
    """An open capture session (see ``layout``)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.warnings: list[tuple[str, str]] = []  # (message, category)
        info_path = self.path / layout.SESSION_FILE
        try:
            text = info_path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ProfileFormatError(f"{self.path} is not a capture session: it has no {layout.SESSION_FILE}") from None
        except (OSError, UnicodeDecodeError) as err:
            raise ProfileFormatError(f"cannot read {info_path}: {err}") from None
        try:
            info = json.loads(text)
        except json.JSONDecodeError as err:
            raise ProfileFormatError(f"{info_path} is not valid JSON (corrupt or truncated): {err}") from None
        if not isinstance(info, dict) or info.get("format") != layout.SESSION_FORMAT:
            found = info.get("format") if isinstance(info, dict) else type(info).__name__
            raise ProfileFormatError(f"{info_path} is not a neuron-explorer capture session (format {found!r})")
        check_readable(info.get("version"), SESSION_FORMAT_VERSION, str(info_path))
        self.info = info
        if info.get("host_samples_problem"):
            self.warnings.append((info["host_samples_problem"], "Missing Data"))
        if not info.get("complete"):
            self.warnings.append((f"the capture in {self.path} did not finish (the process ended before the recorder "
                                  f"stopped): its programs and device traces may be missing", "Incomplete Capture"))
        for nc, dropped in (info.get("dropped_per_nc") or {}).items():
            if dropped:
                self.warnings.append((f"{dropped} events of NeuronCore {nc} were dropped: the capture kept the first "
                                      f"{info['config'].get('max_events_per_nc')} per core (max_events_per_nc)",
                                      "Dropped Events"))
        self._neffs: dict[str, Neff] = {}
        index = self.path / layout.SOURCES_DIR / layout.SOURCES_INDEX
        self.sources: dict[str, str] = {}
        if index.is_file():
            try:
                self.sources = {str(k): str(v) for k, v in json.loads(index.read_text()).items()}
            except (json.JSONDecodeError, AttributeError, OSError) as err:
                self.warnings.append((f"{index} is unreadable ({err}); captured sources are not shown", "Missing Data"))

    @property
    def trace_path(self) -> Path:
        return self.path / layout.SYSTEM_TRACE_FILE

    def fingerprint(self) -> str:
        """Changes whenever the session's files do (a re-ingest is needed then)."""
        parts = []
        for name in (layout.SESSION_FILE, layout.SYSTEM_TRACE_FILE, layout.HOST_SAMPLES_FILE, layout.FRAMEWORK_TRACE_FILE):
            try:
                st = (self.path / name).stat()
                parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
            except FileNotFoundError:
                parts.append(f"{name}:-")
        return ";".join(parts)

    def tasks(self, on_bytes=None) -> Iterator[dict]:
        """The task records, checked. A cut-off last line is skipped with a warning. ``on_bytes(n)`` is
        told how much of the file each record took (for progress bars)."""
        path = self.trace_path
        try:
            handle = open(path, "rb")
        except FileNotFoundError:
            raise ProfileFormatError(f"{path} is missing: the session has no system trace") from None
        with handle:
            for number, raw in enumerate(handle, 1):
                if on_bytes is not None:
                    on_bytes(len(raw))
                complete = raw.endswith(b"\n")
                try:
                    record = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    if not complete:  # the writer was interrupted mid-line
                        self.warnings.append((f"{path} ends with a truncated record at line {number} (the capture was "
                                              f"interrupted); the {number - 1} records before it are used",
                                              "Truncated Trace"))
                        return
                    raise ProfileFormatError(f"{path}, line {number}: not a JSON record (corrupt trace): {err}") from None
                yield self._checked(record, path, number)

    def host_samples(self) -> Iterator[dict]:
        """Host CPU / memory samples (none if the capture took none); a cut-off last line is skipped."""
        path = self.path / layout.HOST_SAMPLES_FILE
        if not path.is_file():
            return
        with open(path, "rb") as handle:
            for number, raw in enumerate(handle, 1):
                try:
                    sample = json.loads(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as err:
                    if not raw.endswith(b"\n"):
                        return
                    raise ProfileFormatError(f"{path}, line {number}: not a JSON sample (corrupt): {err}") from None
                if not isinstance(sample, dict) or not isinstance(sample.get("t"), int):
                    raise ProfileFormatError(f"{path}, line {number}: not a host sample: {str(sample)[:80]!r}")
                yield sample

    @staticmethod
    def _checked(record, path: Path, number: int) -> dict:
        if not isinstance(record, dict) or record.get("type") != "task":
            raise ProfileFormatError(f"{path}, line {number}: not a task record: {str(record)[:80]!r}")
        for key, kind in TASK_FIELDS.items():
            value = record.get(key)
            if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
                raise ProfileFormatError(f"{path}, line {number}: field {key!r} is {value!r}, expected {kind}")
        if not isinstance(record.get("call_site", ""), str):
            raise ProfileFormatError(f"{path}, line {number}: field 'call_site' is {record['call_site']!r}, expected a "
                                     f"'file:line' string")
        if record["device_profiled"] and not (isinstance(record.get("timing"), str) and isinstance(record.get("neff"), str)):
            raise ProfileFormatError(f"{path}, line {number}: a device-profiled execution without its timing and NEFF")
        return record

    def device_tables(self, key: str) -> dict[str, pa.Table]:
        tables = {}
        for part, schema in layout.DEVICE_PARTS.items():
            if os.sep in key or "/" in key or key.startswith("."):
                raise ProfileFormatError(f"{self.trace_path}: bad device trace name {key!r}")
            path = self.path / layout.device_file(key, part)
            handle = open_parquet(path, "device trace", "the session is incomplete (was the capture stopped?)")
            try:
                table = handle.read()
            except (pa.ArrowException, OSError) as err:
                raise ProfileFormatError(f"device trace {path} is corrupt, truncated or not Parquet: {err}") from None
            version = (table.schema.metadata or {}).get(layout.PARQUET_FORMAT_KEY)
            if version is None:
                raise ProfileFormatError(f"device trace {path} was not written by neuron-explorer")
            check_readable(version.decode(), SESSION_FORMAT_VERSION, str(path))
            if not table.schema.remove_metadata().equals(schema):
                raise ProfileFormatError(f"device trace {path} has columns {table.schema.names}, expected {schema.names}")
            tables[part] = table
        return tables

    def neff(self, name: str) -> Neff:
        neff = self._neffs.get(name)
        if neff is not None:
            return neff
        if "/" in name or os.sep in name or name.startswith("."):
            raise ProfileFormatError(f"{self.trace_path}: bad NEFF name {name!r}")
        path = self.path / layout.NEFF_DIR / name
        try:
            neff = Neff.load(path)
        except FileNotFoundError:
            raise MissingNeffError(
                f"NEFF {name} is missing from the profile (expected at {path}): its device trace cannot be read without "
                f"it. Copy the NEFF there, or view the system profile alone with --ignore-device-profile"
            ) from None
        except NeffFormatError as err:
            raise ProfileFormatError(f"NEFF {path} is unreadable: {err}") from None
        self._neffs[name] = neff
        return neff
