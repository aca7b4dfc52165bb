"""An ingested profile: a directory of Parquet tables, opened with every file checked.

    profile = open_profile("./output")          # a session, or a directory of them (ingested if needed)
    profile.table("FrameworkNode").to_pylist()
    profile.table("Instruction", columns=["opcode", "duration_ns"], filters=[("engine", "=", "tensor")])
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from .errors import ExplorerError, ProfileFormatError
from .ingest import default_profile_dir, ingest
from .output.parquet import SCHEMA_VERSION_KEY, TABLE_KEY, open_parquet
from .schema import SCHEMA_VERSION, TABLES, check_readable
from .session import layout
from .session.reader import Session, find_sessions, is_session_dir


class Profile:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        if not (self.path / "Metadata.parquet").is_file():
            raise ProfileFormatError(f"{self.path} is not an ingested profile (it has no Metadata.parquet)")
        self.metadata = self.table("Metadata").to_pylist()[0] if self.table("Metadata").num_rows else {}
        if not self.metadata:
            raise ProfileFormatError(f"{self.path / 'Metadata.parquet'} has no rows")

    def __repr__(self) -> str:
        return f"<Profile {self.name!r} at {self.path}>"

    @property
    def name(self) -> str:
        return self.metadata.get("profile_name") or self.path.parent.name

    @property
    def session_dir(self) -> Path | None:
        value = self.metadata.get("session_dir")
        return Path(value) if value else None

    def file(self, name: str) -> Path:
        if name not in TABLES:
            raise KeyError(f"no table {name!r}; the profile has {sorted(TABLES)}")
        return self.path / f"{name}.parquet"

    def parquet(self, name: str) -> pq.ParquetFile:
        """The table's Parquet file, checked (ours, a readable schema version, the expected columns)."""
        path = self.file(name)
        handle = open_parquet(path, "profile table", "re-ingest the session")
        meta = handle.schema_arrow.metadata or {}
        if meta.get(TABLE_KEY) != name.encode() or SCHEMA_VERSION_KEY not in meta:
            raise ProfileFormatError(f"{path} is a Parquet file but not neuron-explorer's {name} table")
        check_readable(meta[SCHEMA_VERSION_KEY].decode(), SCHEMA_VERSION, str(path))
        expected = TABLES[name].field_names
        if handle.schema_arrow.names[: len(expected)] != expected:
            raise ProfileFormatError(f"{path} has columns {handle.schema_arrow.names}, expected {expected}")
        return handle

    def table(self, name: str, columns: list[str] | None = None, filters=None, decode: bool = True) -> pa.Table:
        """Rows of table ``name`` (``filters`` as pyarrow.parquet takes them). Repeated strings are stored
        dictionary-encoded; ``decode`` (the default) returns them as plain strings."""
        handle = self.parquet(name)
        try:
            table = handle.read(columns=columns) if filters is None else pq.read_table(self.file(name), columns=columns,
                                                                                       filters=filters)
        except (pa.ArrowException, OSError) as err:
            raise ProfileFormatError(f"{self.file(name)} could not be read (corrupt?): {err}") from None
        if decode:
            for i, field in enumerate(table.schema):
                if pa.types.is_dictionary(field.type):
                    table = table.set_column(i, field.name, table.column(i).cast(field.type.value_type))
        return table

    @cached_property
    def summary(self) -> dict:
        rows = self.table("Summary", filters=[("scope", "=", "profile")]).to_pylist()
        return rows[0] if rows else {}

    def top_ops(self, n: int = 5) -> list[dict]:
        """Framework operations by device time, most first."""
        nodes = self.table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist()
        return sorted(nodes, key=lambda r: -r["device_time_ns"])[:n]


def open_profile(path: str | os.PathLike, *, reingest: bool = False, progress: bool = False) -> Profile:
    """The profile at ``path``: an ingested profile directory, or a capture session (ingested into
    ``<session>/profile`` the first time, and again whenever the session's files changed)."""
    path = Path(path)
    if (path / "Metadata.parquet").is_file():
        return Profile(path)
    if is_session_dir(path):
        return _session_profile(path, reingest, progress)
    sessions = find_sessions(path)
    if len(sessions) == 1:
        return _session_profile(sessions[0], reingest, progress)
    if not sessions:
        raise ExplorerError(f"{path} holds no capture session (no {layout.SESSION_FILE} in it or below it) and is not a profile")
    raise ExplorerError(f"{path} holds {len(sessions)} capture sessions; open one of them: {[str(s) for s in sessions]}")


def _session_profile(session_dir: Path, reingest: bool, progress: bool) -> Profile:
    target = default_profile_dir(session_dir)
    if not reingest and (target / "Metadata.parquet").is_file():
        try:
            profile = Profile(target)
            if profile.metadata.get("session_fingerprint") == Session(session_dir).fingerprint():
                return profile
        except ProfileFormatError:
            pass  # stale or damaged: ingest again
    return Profile(ingest(session_dir, target, progress=progress))
