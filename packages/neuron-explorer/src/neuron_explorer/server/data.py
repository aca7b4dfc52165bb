"""What the UI asks of a profile, answered from its Parquet tables (indexes built on first use)."""

from __future__ import annotations

import json
import os
import threading
from functools import cached_property
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..profile import Profile
from ..session import layout
from .timeline import TimelineIndex

ENGINE_ORDER = {"tensor": 0, "vector": 1, "scalar": 2, "gpsimd": 3, "sync": 4, "dma": 5}
DEPENDENCY_DEPTH = 8


class ProfileData:
    def __init__(self, pid: str, profile: Profile, source_roots: list[Path]):
        self.id = pid
        self.profile = profile
        self.source_roots = [Path(r).resolve() for r in source_roots]
        self._lock = threading.Lock()
        self._series_cache: dict = {}

    # --- lists and summaries ---------------------------------------------------------------
    def describe(self) -> dict:
        s = self.profile.summary
        return {"id": self.id, "name": self.profile.name, "session_dir": str(self.profile.session_dir or ""),
                "instruction_count": s.get("instruction_count", 0), "device_time_ns": (s.get("total_time") or 0) * 1e9,
                "mfu": s.get("mfu_estimated_percent", 0.0), "executions": self.profile.parquet("ExecutionInfo").metadata.num_rows}

    def summary(self) -> dict:
        p = self.profile
        ops = p.table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist()
        ops.sort(key=lambda r: -r["device_time_ns"])
        return {"profile": self.describe(), "metadata": p.metadata, "summary": p.summary,
                "top_ops": ops[:20], "opcodes": p.table("OpcodeSummary").to_pylist()[:30],
                "warnings": p.table("Warning").to_pylist(),
                "executions": p.table("Summary", filters=[("scope", "=", "execution")]).num_rows}

    # --- device trace ----------------------------------------------------------------------
    @cached_property
    def device(self) -> TimelineIndex:
        # Dictionary columns are used as they are stored (indices into a small dictionary): decoding
        # a million strings would cost more than the rest of the index.
        t = self.profile.table("Instruction", columns=["id", "nc_idx", "timeline_track", "engine", "start_ts", "end_ts",
                                                        "opcode", "framework_node_id", "stack_frame_ids", "launch_id"],
                               decode=False)
        track_names, track_codes = _codes(t.column("timeline_track"))
        engine_names, engine_codes = _codes(t.column("engine"))
        self.opcodes, opcode_codes = _codes(t.column("opcode"))
        frame_names, frame_codes = _codes(t.column("stack_frame_ids"))
        frame_of = np.array([int(f.strip("[]")) if f else 0 for f in frame_names] + [0], np.int64)
        nc = t.column("nc_idx").to_numpy()
        keys = nc * (len(track_names) + 1) + track_codes
        first_row, key_of_row = _small_unique(keys)
        tracks = [{"nc": int(nc[r]), "track": track_names[track_codes[r]], "engine": engine_names[engine_codes[r]]}
                  for r in first_row]
        # Engines first (in engine order), DMA queues after, per core.
        order = sorted(range(len(tracks)), key=lambda k: (tracks[k]["nc"], ENGINE_ORDER.get(tracks[k]["engine"], 9),
                                                          tracks[k]["track"]))
        remap = np.empty(len(tracks), np.int64)
        remap[order] = np.arange(len(tracks))
        self.device_tracks = [tracks[k] for k in order]
        columns = {"id": t.column("id").to_numpy(), "opcode": opcode_codes, "node": t.column("framework_node_id").to_numpy(),
                   "frame": frame_of[frame_codes], "launch": t.column("launch_id").to_numpy()}
        return TimelineIndex(remap[key_of_row], [f"{d['nc']}:{d['track']}" for d in self.device_tracks],
                             t.column("start_ts").to_numpy().astype(np.float64), t.column("end_ts").to_numpy().astype(np.float64),
                             columns)

    def device_tracks_info(self) -> dict:
        index = self.device
        executions = self.profile.table("ExecutionInfo", filters=[("device_profiled", "=", True)],
                                        columns=["launch_id", "name", "neff_name", "nc_idx", "execution_start_ts",
                                                 "execution_end_ts"])
        return {"tracks": [{**d, "rows": index.rows(i)} for i, d in enumerate(self.device_tracks)],
                "start": index.start, "end": index.end, "opcodes": self.opcodes,
                "executions": executions.to_pylist()[:5000]}

    def device_window(self, start: float, end: float, bins: int, highlight: str | None) -> dict:
        index = self.device
        mark = self._highlight(highlight)
        w = index.window(start, end, bins, mark=mark)
        for entry in w["tracks"]:
            rows = entry.pop("rows", None)
            if rows is not None:
                original = index.order[rows]
                c = index.columns
                entry["rows"] = np.column_stack([c["id"][original], index.starts[rows], index.ends[rows], c["opcode"][original],
                                                 mark[original] if mark is not None else np.zeros(len(rows), bool)]).tolist()
        edges = np.linspace(start, end, bins + 1)[:-1]
        # HBM throughput of all cores added up; SBUF and PSUM fullness of the fullest core.
        w["hbm"] = (np.sum(self._sampled("HbmUsage", "current_throughput", edges), axis=0) / 1e9).round(3).tolist()
        w["sbuf"] = np.max(self._sampled("SbufUsage", "avg_util_percent", edges), axis=0).round(3).tolist()
        w["psum"] = np.max(self._sampled("PsumUsage", "avg_util_percent", edges), axis=0).round(3).tolist()
        return w

    def _highlight(self, spec: str | None) -> np.ndarray | None:
        """Rows to mark: ``node:<FrameworkNode.id>``, ``lines:<file id>:<first>-<last>``, ``opcode:<name>``."""
        if not spec:
            return None
        index = self.device
        kind, _, value = spec.partition(":")
        if kind == "node":
            node = int(value)
            nodes = {node} | {c for c in self._children(node)}
            return np.isin(index.columns["node"], list(nodes))
        if kind == "lines":
            file_id, _, span = value.partition(":")
            first, _, last = span.partition("-")
            frames = self._frames_of(int(file_id), int(first), int(last or first))
            return np.isin(index.columns["frame"], frames)
        if kind == "opcode":
            codes = [i for i, o in enumerate(self.opcodes) if o == value]
            return np.isin(index.columns["opcode"], codes)
        raise ValueError(f"highlight must be node:<id>, lines:<file>:<a>-<b> or opcode:<name>, got {spec!r}")

    def _children(self, node: int) -> list[int]:
        rows = self.profile.table("FrameworkNode", columns=["id", "parent_id"]).to_pylist()
        return [r["id"] for r in rows if r["parent_id"] == node]

    def _sampled(self, table: str, column: str, times: np.ndarray) -> np.ndarray:
        """Each core's step series sampled at ``times`` (one row per core; a row of zeros if none)."""
        series = self._series_cache.get((table, column))
        if series is None:
            t = self.profile.table(table, columns=["nc_idx", "timestamp", column])
            nc = t.column("nc_idx").to_numpy()
            ts = t.column("timestamp").to_numpy().astype(np.float64)
            values = t.column(column).to_numpy()
            series = []
            for core in np.unique(nc):
                mine = np.flatnonzero(nc == core)
                order = mine[np.argsort(ts[mine], kind="stable")]
                series.append((ts[order], values[order]))
            self._series_cache[(table, column)] = series
        return np.array([_sample(s, times) for s in series]) if series else np.zeros((1, len(times)))

    def instruction(self, iid: int) -> dict:
        rows = self.profile.table("Instruction", filters=[("id", "=", iid)]).to_pylist()
        if not rows:
            raise KeyError(f"no instruction {iid}")
        row = rows[0]
        frame = row["stack_frame_ids"]
        row["source"] = self._frame_location(int(frame.strip("[]"))) if frame else None
        ex = self.profile.table("ExecutionInfo", filters=[("launch_id", "=", row["launch_id"])]).to_pylist()
        row["execution"] = ex[0] if ex else None
        dma = self.profile.table("DmaPacket", filters=[("instruction_id", "=", iid)]).to_pylist()
        row["dma_packets"] = dma
        return row

    # --- system trace ----------------------------------------------------------------------
    @cached_property
    def system(self) -> dict:
        ex = self.profile.table("ExecutionInfo")
        lanes = pc.binary_join_element_wise(pc.cast(ex.column("nc_idx"), pa.string()), ex.column("queue"), "\x1f")
        lanes = lanes.combine_chunks().dictionary_encode() if ex.num_rows else pa.array([], pa.string()).dictionary_encode()
        names = [n.split("\x1f") for n in lanes.dictionary.to_pylist()]
        device = TimelineIndex(lanes.indices.to_numpy() if ex.num_rows else np.zeros(0, np.int64),
                               [f"NeuronCore {a} / {b}" for a, b in names],
                               ex.column("execution_start_ts").to_numpy().astype(np.float64),
                               np.maximum(ex.column("execution_end_ts").to_numpy(), ex.column("execution_start_ts").to_numpy() + 1)
                               .astype(np.float64), {"launch": ex.column("launch_id").to_numpy(),
                                                     "row": np.arange(ex.num_rows)})
        ev = self.profile.table("SystemProfileEvents", filters=[("trace_event_source", "!=", "neuron_hw")])
        threads = ev.column("thread_id").to_numpy()
        uniq = sorted(set(threads.tolist()))
        code = np.searchsorted(np.array(uniq, dtype=np.int64), threads) if len(uniq) else np.zeros(0, np.int64)
        host = TimelineIndex(code, [f"thread {t}" for t in uniq], ev.column("start_ts").to_numpy().astype(np.float64),
                             np.maximum(ev.column("end_ts").to_numpy(), ev.column("start_ts").to_numpy() + 1).astype(np.float64),
                             {"launch": ev.column("launch_id").to_numpy(), "row": np.arange(ev.num_rows)})
        return {"device": device, "host": host, "executions": ex, "events": ev}

    def system_window(self, clock: str, start: float | None, end: float | None, bins: int) -> dict:
        if clock not in ("device", "host"):
            raise ValueError(f"clock must be device or host, got {clock!r}")
        index = self.system[clock]
        table = self.system["executions" if clock == "device" else "events"]
        a = index.start if start is None else start
        b = index.end if end is None else end
        w = index.window(a, b, bins, detail_rows=3000)
        w["track_names"] = index.track_names
        w["range"] = [index.start, index.end]
        names = table.column("name")
        for entry in w["tracks"]:
            rows = entry.pop("rows", None)
            if rows is not None:
                picked = index.column("row", rows)
                entry["rows"] = [[int(lid), float(s), float(e), str(n)] for lid, s, e, n in zip(
                    index.column("launch", rows), index.starts[rows], index.ends[rows],
                    names.take(pa.array(picked)).to_pylist())]
        return w

    def host_samples(self) -> dict:
        """Host CPU (average over cores) and memory samples, on the host clock."""
        cpu = self.profile.table("CpuUsage", filters=[("cpu_id", "=", "average")], columns=["timestamp", "util_percent"])
        memory = self.profile.table("HostMemUsage", columns=["timestamp", "used_percent"])
        return {"cpu": list(zip(cpu.column("timestamp").to_pylist(), cpu.column("util_percent").to_pylist())),
                "memory": list(zip(memory.column("timestamp").to_pylist(), memory.column("used_percent").to_pylist()))}

    def execution(self, launch_id: int) -> dict:
        rows = self.profile.table("ExecutionInfo", filters=[("launch_id", "=", launch_id)]).to_pylist()
        if not rows:
            raise KeyError(f"no execution with launch id {launch_id}")
        row = rows[0]
        summary = self.profile.table("Summary", filters=[("launch_id", "=", launch_id)]).to_pylist()
        row["summary"] = summary[0] if summary else None
        return row

    # --- hierarchy -------------------------------------------------------------------------
    def hierarchy(self) -> list[dict]:
        nodes = self.profile.table("FrameworkNode").to_pylist()
        by_parent: dict = {}
        for n in nodes:
            by_parent.setdefault(n["parent_id"], []).append(n)
        ops = sorted(by_parent.get(None, []), key=lambda n: -n["device_time_ns"])
        for op in ops:
            op["children"] = sorted(by_parent.get(op["id"], []), key=lambda n: -n["device_time_ns"])
        return ops

    def instruction_groups(self, node: int) -> list[dict]:
        """A graph node's instructions grouped by source line, engine and opcode."""
        t = self.profile.table("Instruction", columns=["nki_source_location", "engine", "opcode", "duration_ns"],
                               filters=[("framework_node_id", "=", node)])
        if not t.num_rows:
            return []
        t = t.set_column(0, "nki_source_location", pc.fill_null(t.column("nki_source_location"), ""))
        g = t.group_by(["nki_source_location", "engine", "opcode"]).aggregate([("duration_ns", "sum"), ("duration_ns", "count")])
        rows = [{"source": r["nki_source_location"], "engine": r["engine"], "opcode": r["opcode"],
                 "time_ns": r["duration_ns_sum"], "count": r["duration_ns_count"]} for r in g.to_pylist()]
        return sorted(rows, key=lambda r: -r["time_ns"])

    def node_range(self, node: int) -> dict:
        """The first execution of a node (to zoom the device trace to)."""
        index = self.device
        mark = self._highlight(f"node:{node}")
        hits = np.flatnonzero(mark[index.order])  # sorted positions of the node's rows
        if not len(hits):
            return {"start": None, "end": None, "instructions": 0}
        launches = index.column("launch", hits)
        first_launch = launches.min()
        mine = hits[launches == first_launch]
        return {"start": float(index.starts[mine].min()), "end": float(index.ends[mine].max()), "instructions": int(len(hits)),
                "launch_id": int(first_launch)}

    # --- dependencies ----------------------------------------------------------------------
    @cached_property
    def flows(self) -> dict:
        f = self.profile.table("Flow")
        return {name: f.column(name).to_numpy(zero_copy_only=False) for name in f.column_names}

    def dependencies(self, table: str, row_id: int, depth: int = 4) -> dict:
        """Upstream (what it waited for) and downstream (what waited for it) chains of a row."""
        if table not in ("Instruction", "SystemProfileEvents", "DmaPacket"):
            raise ValueError(f"dependencies are kept for Instruction, DmaPacket and SystemProfileEvents rows, not {table!r}")
        depth = max(1, min(int(depth), DEPENDENCY_DEPTH))
        f = self.flows

        def walk(direction: str) -> list[dict]:
            here, there = ("out", "in") if direction == "up" else ("in", "out")
            frontier = [(table, row_id)]
            seen = {(table, row_id)}
            edges = []
            for level in range(1, depth + 1):
                nxt = []
                for tbl, rid in frontier:
                    hit = np.flatnonzero((f[f"{here}_id"] == rid) & (f[f"{here}_table"] == tbl))
                    for k in hit[:64]:
                        other = (str(f[f"{there}_table"][k]), int(f[f"{there}_id"][k]))
                        edges.append({"level": level, "from_table": tbl, "from_id": rid, "table": other[0], "id": other[1],
                                      "type": str(f["dependency_type"][k]), "gap_ns": int(f["gap_time"][k])})
                        if other not in seen:
                            seen.add(other)
                            nxt.append(other)
                frontier = nxt
            return edges

        up, down = walk("up"), walk("down")
        ids = {(e["table"], e["id"]) for e in up + down} | {(table, row_id)}
        return {"root": {"table": table, "id": row_id}, "upstream": up, "downstream": down, "rows": self._rows_for(ids)}

    def _rows_for(self, keys: set) -> dict:
        out = {}
        for tbl, cols in (("Instruction", ["id", "opcode", "engine", "timeline_track", "start_ts", "end_ts", "pc",
                                           "nki_source_location", "launch_id"]),
                          ("DmaPacket", ["id", "queue_name", "start_ts", "end_ts", "transfer_bytes", "source", "dest"]),
                          ("SystemProfileEvents", ["id", "name", "event_type", "start_ts", "end_ts", "launch_id"])):
            ids = [i for t, i in keys if t == tbl]
            if ids:
                rows = self.profile.table(tbl, columns=cols, filters=[("id", "in", ids)]).to_pylist()
                out.update({f"{tbl}:{r['id']}": r for r in rows})
        return out

    def launch_dependencies(self, launch_id: int) -> dict:
        """A device execution's chain: the runtime call that issued it, the executions before and after it on its queue."""
        ex = self.system["executions"]
        queue = ex.column("queue").to_numpy(zero_copy_only=False)
        nc = ex.column("nc_idx").to_numpy()
        lids = ex.column("launch_id").to_numpy()
        where = np.flatnonzero(lids == launch_id)
        if not len(where):
            raise KeyError(f"no execution with launch id {launch_id}")
        i = int(where[0])
        same = np.flatnonzero((queue == queue[i]) & (nc == nc[i]))
        pos = int(np.searchsorted(same, i))
        cols = ["launch_id", "name", "kind", "queue", "nc_idx", "execution_start_ts", "execution_end_ts", "context"]
        pick = ex.select(cols)

        def rows(idx):
            return pick.take(pa.array(np.asarray(idx, dtype=np.int64))).to_pylist()

        events = self.system["events"]
        issued = events.filter(pc.and_(pc.equal(events.column("launch_id"), launch_id),
                                       pc.equal(events.column("event_type"), "nrt_execute"))).to_pylist()
        return {"execution": rows([i])[0], "upstream": rows(same[max(0, pos - 3):pos][::-1]),
                "downstream": rows(same[pos + 1:pos + 4]), "issued_by": issued}

    # --- sources ---------------------------------------------------------------------------
    @cached_property
    def _frame_table(self) -> dict:
        loc = self.profile.table("StackFrameFileLocation").to_pylist()
        files = {r["id"]: r for r in self.profile.table("StackFrameFileName").to_pylist()}
        return {"frames": {int(r["id"]): (int(r["file_name_id"]), int(r["line_number"])) for r in loc}, "files": files}

    def _frame_location(self, frame: int) -> dict | None:
        entry = self._frame_table["frames"].get(frame)
        if entry is None:
            return None
        file_id, line = entry
        return {"file_id": file_id, "line": line, "name": self._frame_table["files"][str(file_id)]["name"]}

    def _frames_of(self, file_id: int, first: int, last: int) -> list[int]:
        return [f for f, (fid, line) in self._frame_table["frames"].items() if fid == file_id and first <= line <= last]

    def sources(self) -> list[dict]:
        index = self.device
        counts = np.bincount(index.columns["frame"], minlength=1) if len(index.columns["frame"]) else np.zeros(1)
        per_file: dict[int, int] = {}
        for frame, (fid, _) in self._frame_table["frames"].items():
            if frame < len(counts):
                per_file[fid] = per_file.get(fid, 0) + int(counts[frame])
        return [{"id": int(fid), "name": f["name"], "captured": f["captured"], "instructions": per_file.get(int(fid), 0)}
                for fid, f in self._frame_table["files"].items()]

    def source(self, file_id: int) -> dict:
        entry = self._frame_table["files"].get(str(file_id))
        if entry is None:
            raise KeyError(f"no source file {file_id} in this profile")
        name = entry["name"]
        text, where, problem = self._read_source(name)
        index = self.device
        durations = index.ends - index.starts
        frames = index.columns["frame"][index.order]
        frame_counts = np.bincount(frames, minlength=1) if len(durations) else np.zeros(1)
        frame_time = np.bincount(frames, weights=durations, minlength=1) if len(durations) else np.zeros(1)
        lines: dict[int, dict] = {}
        for frame, (fid, line) in self._frame_table["frames"].items():
            if fid == file_id and frame < len(frame_counts) and frame_counts[frame]:
                acc = lines.setdefault(line, {"count": 0, "time_ns": 0.0})
                acc["count"] += int(frame_counts[frame])
                acc["time_ns"] += float(frame_time[frame])
        return {"id": file_id, "name": name, "text": text, "served_from": where, "problem": problem, "lines": lines}

    def _read_source(self, name: str) -> tuple[str | None, str | None, str | None]:
        """The file's text from the profile's captured copy, else from a source root; never from anywhere else."""
        session = self.profile.session_dir
        if session is not None:
            index_path = session / layout.SOURCES_DIR / layout.SOURCES_INDEX
            try:
                stored = json.loads(index_path.read_text()).get(name) if index_path.is_file() else None
            except (OSError, json.JSONDecodeError):
                stored = None
            if stored and "/" not in stored and os.sep not in stored and not stored.startswith("."):
                path = session / layout.SOURCES_DIR / stored
                if path.is_file():
                    return path.read_text(errors="replace"), "profile", None
        relative = Path(name.lstrip("/"))
        for root in self.source_roots:
            parts = relative.parts
            for k in range(len(parts)):  # the longest suffix of the recorded path that exists under the root
                candidate = (root / Path(*parts[k:])).resolve()
                if candidate.is_file() and candidate.is_relative_to(root):
                    return candidate.read_text(errors="replace"), f"source root {root}", None
        return None, None, (f"{name} was not captured with the profile and is not under any source root; pass "
                            f"--framework-source-root or --nki-source-root")


def _sample(series: tuple[np.ndarray, np.ndarray], times: np.ndarray) -> np.ndarray:
    """A step series' value at each of ``times`` (0 before its first sample)."""
    ts, values = series
    if not len(ts):
        return np.zeros(len(times))
    k = np.searchsorted(ts, times, side="right") - 1
    return np.where(k >= 0, values[np.maximum(k, 0)], 0.0)


def _small_unique(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(first row of each distinct key, each row's key number) for small non-negative integer keys,
    with keys numbered in increasing order (np.unique's answer without its sort)."""
    if not len(keys):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    first = np.full(int(keys.max()) + 1, -1, np.int64)
    first[keys[::-1]] = np.arange(len(keys) - 1, -1, -1)  # the last write wins: the first occurrence
    present = np.flatnonzero(first >= 0)
    number = np.zeros(len(first), np.int64)
    number[present] = np.arange(len(present))
    return first[present], number[keys]


def _codes(column) -> tuple[list, np.ndarray]:
    """(values, per-row index into them) of a string column, dictionary-encoded or not; nulls index one
    past the last value."""
    column = column.unify_dictionaries() if pa.types.is_dictionary(column.type) else column
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    values = array.dictionary.to_pylist()
    codes = pc.fill_null(array.indices, len(values)).to_numpy().astype(np.int64) if len(array) else np.zeros(0, np.int64)
    return values, codes


def compare(a: ProfileData, b: ProfileData) -> dict:
    sa, sb = a.profile.summary, b.profile.summary
    keys = ["total_time", "instruction_count", "mfu_estimated_percent", "hfu_estimated_percent", "mbu_estimated_percent",
            "hbm_read_bytes", "hbm_write_bytes", "dma_transfer_count", "dma_active_time_percent",
            *(f"{e}_engine_active_time_percent" for e in ENGINE_ORDER if e != "dma")]
    metrics = [{"metric": k, "a": sa.get(k), "b": sb.get(k)} for k in keys]
    ops_a = {r["node_name"]: r for r in a.profile.table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist()}
    ops_b = {r["node_name"]: r for r in b.profile.table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist()}
    ops = []
    for name in set(ops_a) | set(ops_b):
        ta = ops_a.get(name, {}).get("device_time_ns", 0)
        tb = ops_b.get(name, {}).get("device_time_ns", 0)
        ops.append({"name": name, "a_time_ns": ta, "b_time_ns": tb, "delta_ns": tb - ta,
                    "a_launches": ops_a.get(name, {}).get("launch_count", 0),
                    "b_launches": ops_b.get(name, {}).get("launch_count", 0)})
    ops.sort(key=lambda r: -max(r["a_time_ns"], r["b_time_ns"]))
    return {"a": a.describe(), "b": b.describe(), "metrics": metrics, "ops": ops}
