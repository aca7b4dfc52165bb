"""Compile metrics of ``torch.compile(backend="neuron")`` and the log lines printed while compiling.

Every graph the backend receives is recorded: its name (``graph3_backward``), its size, where its
NEFF came from (``compiled``, ``disk`` or ``memory`` cache hit, ``eager`` fallback) and the seconds
it took. ``torch_neuronx.compile_metrics()`` returns the totals and the records.

Log lines go to the ``torch_neuronx.compile`` logger, shown on stderr unless
``TORCH_NEURONX_COMPILE_LOG=0`` (then they are only there for handlers the user adds).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from dataclasses import asdict, dataclass

LOG_ENV = "TORCH_NEURONX_COMPILE_LOG"
logger = logging.getLogger("torch_neuronx.compile")


@dataclass
class GraphRecord:
    name: str
    kind: str  # forward / backward / inference
    ops: int  # ATen calls in the AOTAutograd graph
    source: str  # compiled / disk / memory / eager / host (nothing for the device)
    seconds: float  # trace + lower + compile (or cache read)
    instructions: int = 0
    device_us: float = 0.0  # simulated device time of one launch


_lock = threading.Lock()
_records: list[GraphRecord] = []


def _ensure_handler() -> None:
    if logger.handlers or os.environ.get(LOG_ENV, "1").strip() in ("0", "false", "off"):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[neuron compile] %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False


def record(rec: GraphRecord) -> None:
    with _lock:
        _records.append(rec)
        done = sum(r.source == "compiled" for r in _records)
        hits = sum(r.source in ("disk", "memory") for r in _records)
    _ensure_handler()
    what = {"compiled": "compiled", "disk": "NEFF from disk cache", "memory": "NEFF from memory cache",
            "eager": "runs eagerly (fallback)", "host": "host work only, nothing to compile"}[rec.source]
    detail = f", {rec.instructions} instructions, {rec.device_us / 1e3:.2f} ms device" if rec.instructions else ""
    logger.info(f"{rec.name}: {rec.ops} ops {what} in {rec.seconds:.2f} s{detail} "
                f"({done} compiled, {hits} cache hits so far)")


def log(message: str) -> None:
    _ensure_handler()
    logger.info(message)


def compile_metrics() -> dict:
    """Totals and per-graph records of the graphs ``torch.compile(backend="neuron")`` has handled in
    this process: ``graphs_compiled``, ``cache_hits`` (disk + memory), ``eager_fallbacks``,
    ``compile_seconds`` and ``graphs`` (one dict per graph, in the order they were handled)."""
    with _lock:
        records = list(_records)
    return {
        "graphs_compiled": sum(r.source == "compiled" for r in records),
        "cache_hits": sum(r.source in ("disk", "memory") for r in records),
        "disk_cache_hits": sum(r.source == "disk" for r in records),
        "eager_fallbacks": sum(r.source == "eager" for r in records),
        "compile_seconds": sum(r.seconds for r in records),
        "graphs": [asdict(r) for r in records],
    }


def reset_compile_metrics() -> None:
    with _lock:
        _records.clear()
