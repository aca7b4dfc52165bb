"""Host CPU utilization and memory, sampled while a capture runs (ProfileMode CPU_UTIL / HOST_MEMORY).

Linux's /proc is read every ``interval`` seconds on a thread of its own: per-CPU utilization over
the interval from /proc/stat, used memory (MemTotal - MemAvailable) from /proc/meminfo. Samples are
JSON lines in the session (``host_samples.jsonl``), ingested into CpuUsage and HostMemUsage.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from ..session.layout import HOST_SAMPLES_FILE

DEFAULT_INTERVAL = 0.1


def _cpu_times() -> dict[str, tuple[int, int]]:
    """cpu id ("average" for the total line) -> (busy jiffies, total jiffies)."""
    times = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu"):
                break
            name, *fields = line.split()
            values = [int(v) for v in fields[:8]]
            idle = values[3] + values[4]  # idle + iowait
            times["average" if name == "cpu" else name[3:]] = (sum(values) - idle, sum(values))
    return times


def _memory() -> tuple[int, int]:
    """(used bytes, total bytes)."""
    info = {}
    with open("/proc/meminfo") as f:
        for line in f:
            key, _, rest = line.partition(":")
            info[key] = int(rest.split()[0]) * 1024
    return info["MemTotal"] - info.get("MemAvailable", info.get("MemFree", 0)), info["MemTotal"]


class HostSampler:
    def __init__(self, directory: Path, cpu: bool, memory: bool, interval: float = DEFAULT_INTERVAL):
        self.path = Path(directory) / HOST_SAMPLES_FILE
        self.cpu, self.memory, self.interval = cpu, memory, interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.problem: str | None = None

    def start(self) -> None:
        try:
            self._previous = _cpu_times() if self.cpu else {}
            if self.memory:
                _memory()
        except (OSError, ValueError, KeyError) as err:  # no /proc: not Linux, or a restricted container
            self.problem = f"host CPU and memory samples are unavailable here ({err})"
            return
        self._file = open(self.path, "a", encoding="utf-8")
        self._thread = threading.Thread(target=self._run, name="neuron-explorer host sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._thread is not None:
            self._stop.set()
            self._thread.join()
            self._file.close()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            sample: dict = {"t": time.perf_counter_ns()}
            try:
                if self.cpu:
                    now = _cpu_times()
                    sample["cpu"] = {k: 100.0 * (b - self._previous[k][0]) / max(1, t - self._previous[k][1])
                                     for k, (b, t) in now.items() if k in self._previous}
                    self._previous = now
                if self.memory:
                    sample["mem_used"], sample["mem_total"] = _memory()
            except (OSError, ValueError, KeyError):
                continue
            self._file.write(json.dumps(sample, separators=(",", ":")) + "\n")
            self._file.flush()
