"""Roll-ups over executions: Summary rows, OpcodeSummary, and the FrameworkNode hierarchy.

Instruction statistics (FLOPs, bytes, engine time) come from executions in the device profile;
launch counts and device time from every execution the system trace holds (with a device profile
of the first execution only, the statistics cover that one).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
from neuron_sim import get_architecture

from .intervals import merge_intervals
from .lookups import int_ns
from .schedule import ENGINES

_BYTES = ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes", "psum_write_bytes")
_SUMS = ("instruction_count", "model_flops", "transpose_flops", "hardware_flops", "adjusted_hardware_flops",
         "matmul_instruction_count", "dma_transfer_count", "dma_transfer_total_bytes", "dma_active_ns", "total_active_ns",
         *_BYTES, *(f"{e}_engine_{k}" for e in ENGINES for k in ("instruction_count", "instruction_ns", "active_ns")))


class Peaks:
    """The utilization denominators of a platform target."""

    def __init__(self, target: str):
        arch = get_architecture(target)
        self.flops_per_ns = arch.tensor.peak_bf16_flops * 1e-9
        self.hbm_bytes_per_ns = arch.hbm_bytes_per_ns_per_core
        self.base_clock_hz = arch.base_clock_hz

    def percents(self, model_flops, hardware_flops, hbm_bytes, time_ns) -> tuple[float, float, float]:
        if time_ns <= 0:
            return 0.0, 0.0, 0.0
        return (100.0 * model_flops / (self.flops_per_ns * time_ns), 100.0 * hardware_flops / (self.flops_per_ns * time_ns),
                100.0 * hbm_bytes / (self.hbm_bytes_per_ns * time_ns))


def summary_row(scope: str, totals: dict, time_ns: float, peaks: Peaks, launch_id=None, nc=None) -> dict:
    seconds = time_ns * 1e-9
    hbm = totals["hbm_read_bytes"] + totals["hbm_write_bytes"]
    mfu, hfu, mbu = peaks.percents(totals["model_flops"], totals["hardware_flops"], hbm, time_ns)

    def pct(ns):
        return 100.0 * ns / time_ns if time_ns > 0 else 0.0

    row = {
        "scope": scope, "launch_id": launch_id, "nc_idx": nc, "total_time": seconds,
        "neuroncore_cycle_count": int(seconds * peaks.base_clock_hz), "instruction_count": totals["instruction_count"],
        "model_flops": totals["model_flops"], "hardware_flops": totals["hardware_flops"],
        "transpose_flops": totals["transpose_flops"], "adjusted_hardware_flops": totals["adjusted_hardware_flops"],
        "mfu_estimated_percent": mfu, "hfu_estimated_percent": hfu, "mbu_estimated_percent": mbu,
        "mm_arithmetic_intensity": totals["model_flops"] / hbm if hbm else 0.0,
        "peak_flops_bandwidth_ratio": peaks.flops_per_ns / peaks.hbm_bytes_per_ns,
        **{name: totals[name] for name in _BYTES},
        "dma_transfer_count": totals["dma_transfer_count"], "dma_transfer_total_bytes": totals["dma_transfer_total_bytes"],
        "dma_transfer_average_bytes": totals["dma_transfer_total_bytes"] / totals["dma_transfer_count"]
        if totals["dma_transfer_count"] else 0.0,
        "dma_active_time": totals["dma_active_ns"] * 1e-9, "dma_active_time_percent": pct(totals["dma_active_ns"]),
        "matmul_instruction_count": totals["matmul_instruction_count"],
        "total_active_time": totals["total_active_ns"] * 1e-9, "total_active_time_percent": pct(totals["total_active_ns"]),
    }
    for e in ENGINES:
        row[f"{e}_engine_instruction_count"] = totals[f"{e}_engine_instruction_count"]
        row[f"{e}_engine_instruction_time"] = totals[f"{e}_engine_instruction_ns"] * 1e-9
        row[f"{e}_engine_active_time"] = totals[f"{e}_engine_active_ns"] * 1e-9
        row[f"{e}_engine_active_time_percent"] = pct(totals[f"{e}_engine_active_ns"])
    return row


def zero_totals() -> dict:
    return dict.fromkeys(_SUMS, 0)


@dataclass
class _Node:
    id: int
    level: str
    name: str
    parent: _Node | None
    children: list = field(default_factory=list)
    launches: list = field(default_factory=list)  # (start, end, model_flops, hardware_flops, hbm_bytes, profiled)
    # Per schedule: [its roll-up, executions, earliest start, latest start] - totals are the schedules'
    # roll-ups times their executions, so an execution costs one list append and a few comparisons.
    schedules: dict = field(default_factory=dict)

    @property
    def totals(self) -> dict:
        totals = zero_totals()
        for rollup, count, _, _ in self.schedules.values():
            for k in _SUMS:
                totals[k] += count * rollup[k]
        return totals

    def engine_span(self, engine: str) -> tuple[float, float] | None:
        """[earliest start, latest end] of the node's instructions on ``engine``."""
        spans = [(first + rollup[f"{engine}_first_start"], last + rollup[f"{engine}_last_end"])
                 for rollup, _, first, last in self.schedules.values() if rollup[f"{engine}_first_start"] is not None]
        if not spans:
            return None
        return min(a for a, _ in spans), max(b for _, b in spans)


class Rollups:
    def __init__(self):
        self._nodes: list[_Node] = []
        self._ops: dict[str, _Node] = {}
        self._graphs: dict[tuple[str, str], _Node] = {}
        self._profile_schedules: dict[str, list] = {}  # schedule key -> [roll-up, opcode stats, executions]
        self.profiled_ns = 0.0
        self.target: str | None = None

    def graph_node(self, op: str, graph: str) -> int:
        node = self._graphs.get((op, graph))
        if node is None:
            parent = self._ops.get(op)
            if parent is None:
                parent = self._ops[op] = self._new("op", op, None)
            node = self._graphs[(op, graph)] = self._new("graph", graph, parent)
            parent.children.append(node)
        return node.id

    def _new(self, level, name, parent) -> _Node:
        node = _Node(len(self._nodes), level, name, parent)
        self._nodes.append(node)
        return node

    def add_execution(self, node_id: int, start: float, end: float, view=None) -> None:
        node = self._nodes[node_id]
        roll = view.rollup if view is not None else None
        hbm = roll["hbm_read_bytes"] + roll["hbm_write_bytes"] if roll else 0
        entry = (start, end, roll["model_flops"] if roll else 0, roll["hardware_flops"] if roll else 0, hbm, roll is not None)
        for n in (node, node.parent):
            n.launches.append(entry)
            if roll is None:
                continue
            s = n.schedules.get(view.key)
            if s is None:
                n.schedules[view.key] = [roll, 1, start, start]
            else:
                s[1] += 1
                s[2] = min(s[2], start)
                s[3] = max(s[3], start)
        if roll is not None:
            self.profiled_ns += end - start
            s = self._profile_schedules.get(view.key)
            if s is None:
                self._profile_schedules[view.key] = [roll, view.opcodes, 1]
            else:
                s[2] += 1

    @property
    def profile(self) -> dict:
        totals = zero_totals()
        for rollup, _, count in self._profile_schedules.values():
            for k in _SUMS:
                totals[k] += count * rollup[k]
        return totals

    @property
    def opcodes(self) -> dict[tuple[str, str], list[float]]:
        merged: dict[tuple[str, str], list[float]] = {}
        for _, opcodes, count in self._profile_schedules.values():
            for key, (n, time, busy) in opcodes.items():
                acc = merged.setdefault(key, [0, 0.0, 0.0])
                acc[0] += count * n
                acc[1] += count * time
                acc[2] += count * busy
        return merged

    # --- tables ------------------------------------------------------------------------------
    def framework_rows(self, peaks: Peaks) -> list[dict]:
        """One row per node; the utilization denominators are ``peaks``'."""
        return [self._node_row(n, peaks) for n in self._nodes]

    def _node_row(self, node: _Node, peaks: Peaks) -> dict:
        launches = np.array([x[:5] for x in node.launches], dtype=np.float64).reshape(-1, 5)
        profiled = np.array([x[5] for x in node.launches], dtype=bool)
        durations = launches[:, 1] - launches[:, 0]
        device_ns = float(durations.sum())
        profiled_ns = float(durations[profiled].sum())
        t = node.totals
        mfu, hfu, mbu = peaks.percents(t["model_flops"], t["hardware_flops"], t["hbm_read_bytes"] + t["hbm_write_bytes"],
                                       profiled_ns)
        intervals, per_interval = _merged_intervals(launches, profiled, peaks)
        row = {
            "id": node.id, "level": node.level, "node_name": node.name,
            "parent_name": node.parent.name if node.parent else "", "parent_id": node.parent.id if node.parent else None,
            "children_names": json.dumps([c.name for c in node.children]),
            "children_ids": json.dumps([c.id for c in node.children]),
            "launch_count": len(node.launches), "device_time_ns": int(round(device_ns)),
            "start_ts": int(int_ns(launches[:, 0].min())) if len(launches) else 0,
            "end_ts": int(int_ns(launches[:, 1].max())) if len(launches) else 0,
            "time_intervals": json.dumps(intervals),
            "mfu": mfu, "hfu": hfu, "mbu": mbu,
            "mfu_per_interval": json.dumps(per_interval[:, 0].tolist()),
            "hfu_per_interval": json.dumps(per_interval[:, 1].tolist()),
            "mbu_per_interval": json.dumps(per_interval[:, 2].tolist()),
            "model_flops": t["model_flops"], "hardware_flops": t["hardware_flops"],
            **{k: t[k] for k in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes")},
        }
        for e in ENGINES:
            span = node.engine_span(e)
            row[f"{e}_engine_instruction_count"] = t[f"{e}_engine_instruction_count"]
            row[f"total_time_{e}"] = json.dumps([int(x) for x in int_ns(span)]) if span else "[]"
            row[f"active_time_{e}_ns"] = int(round(t[f"{e}_engine_active_ns"]))
        row["active_time_dma_ns"] = int(round(t["dma_active_ns"]))
        return row

    def opcode_rows(self) -> list[dict]:
        total = self.profiled_ns
        return [{"engine": e, "opcode": o, "instruction_count": int(c), "instruction_time_ns": int(round(t)),
                 "active_time_ns": int(round(a)), "active_time_percent": 100.0 * a / total if total else 0.0}
                for (e, o), (c, t, a) in sorted(self.opcodes.items(), key=lambda kv: -kv[1][1])]


def _merged_intervals(launches: np.ndarray, profiled: np.ndarray, peaks: Peaks):
    """Executions merged where they touch, with the utilization of each merged interval (an array of
    [MFU, HFU, MBU] rows, rounded to 4 decimals)."""
    if not len(launches):
        return [], np.zeros((0, 3))
    starts, ends = merge_intervals(launches[:, 0], launches[:, 1])
    owner = np.searchsorted(starts, launches[:, 0], side="right") - 1
    stats = np.zeros((len(starts), 4))
    np.add.at(stats, owner, np.column_stack([launches[:, 2:5], np.where(profiled, launches[:, 1] - launches[:, 0], 0.0)]))
    intervals = [[int(a), int(b)] for a, b in zip(int_ns(starts), int_ns(ends))]
    time = stats[:, 3]
    with np.errstate(divide="ignore", invalid="ignore"):
        per = np.column_stack([100.0 * stats[:, 0] / (peaks.flops_per_ns * time), 100.0 * stats[:, 1] / (peaks.flops_per_ns * time),
                               100.0 * stats[:, 2] / (peaks.hbm_bytes_per_ns * time)])
    return intervals, np.round(np.where(time[:, None] > 0, per, 0.0), 4)
