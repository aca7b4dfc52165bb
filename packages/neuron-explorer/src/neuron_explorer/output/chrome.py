"""Chrome trace-event JSON (the documented ``traceEvents`` format Perfetto and chrome://tracing
read), written as the events stream in."""

from __future__ import annotations

import json
from pathlib import Path

from .events import TraceEvent
from .lanes import Lanes

FLOW_CATEGORY = "dependency"


class ChromeTraceWriter:
    def __init__(self, path: str | Path, metadata: dict | None = None):
        self.path = Path(path)
        self._file = open(self.path, "w", encoding="utf-8")
        self._file.write('{"displayTimeUnit":"ns","otherData":' + json.dumps(metadata or {}) + ',"traceEvents":[\n')
        self._first = True
        self._pids: dict[str, int] = {}
        self._tids: dict[tuple[str, str], int] = {}
        self._lanes = Lanes()
        self.events = 0

    def _emit(self, obj: dict) -> None:
        self._file.write(("" if self._first else ",\n") + json.dumps(obj, separators=(",", ":")))
        self._first = False

    def _ids(self, group: str, track: str) -> tuple[int, int]:
        pid = self._pids.get(group)
        if pid is None:
            pid = self._pids[group] = len(self._pids) + 1
            self._emit({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": group}})
            self._emit({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        tid = self._tids.get((group, track))
        if tid is None:
            tid = self._tids[(group, track)] = len(self._tids) + 1
            self._emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}})
        return pid, tid

    def add(self, event: TraceEvent) -> None:
        track = self._lanes.place(event.group, event.track, event.start_ns, event.end_ns)
        pid, tid = self._ids(event.group, track)
        ts = event.start_ns / 1000.0
        dur = max(event.end_ns - event.start_ns, 0) / 1000.0
        self._emit({"ph": "X", "name": event.name, "pid": pid, "tid": tid, "ts": ts, "dur": dur, "args": event.args})
        for flow in event.flows_out:
            self._emit({"ph": "s", "cat": FLOW_CATEGORY, "name": "dependency", "id": flow, "pid": pid, "tid": tid,
                        "ts": ts + dur})
        for flow in event.flows_in:
            self._emit({"ph": "f", "bp": "e", "cat": FLOW_CATEGORY, "name": "dependency", "id": flow, "pid": pid,
                        "tid": tid, "ts": ts})
        self.events += 1

    def close(self) -> None:
        self._file.write("\n]}\n")
        self._file.close()
