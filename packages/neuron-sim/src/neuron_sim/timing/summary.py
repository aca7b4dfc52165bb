"""The run summary, with Neuron Explorer's metric definitions.

MFU = model FLOPs / (TensorE peak FLOP/s x total time), peak = 2 x PEs x clock (the BF16 rate);
HFU counts the FLOPs the array actually spent (transposes included); MBU = HBM bytes read+written
/ total time / the bandwidth of one HBM stack (profile-schema-reference.rst, Summary table).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from ..arch import Architecture
from .records import COMPUTE, DMA, SYNC, TENSOR, TimingResult

# Engines whose busy time is reported (TensorE counts MultiplyMoving, the "TensorMatrix" track).
ENGINE_TRACKS = ("tensor", "vector", "scalar", "gpsimd", "sync")


def merged_busy_ns(starts, ends) -> float:
    """Length of the union of the intervals [starts[i], ends[i])."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.size == 0:
        return 0.0
    order = np.argsort(starts, kind="stable")
    s, reach = starts[order], np.maximum.accumulate(ends[order])
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]  # a gap before this interval starts a new busy segment
    closes = np.append(opens[1:], True)
    return float((reach[closes] - s[opens]).sum())


def summarize(result: TimingResult, arch: Architecture) -> dict:
    total = result.total_ns
    intervals: dict[str, tuple[list[float], list[float]]] = {e: ([], []) for e in ENGINE_TRACKS}
    counts: Counter = Counter()
    uses: Counter = Counter()  # how many rows share each cost entry (entries are memoized)
    entries: dict[int, tuple] = {}
    for row in result.rows:
        kind, cost = row[1], row[2]
        engine = "tensor" if kind == TENSOR else "dma" if kind == DMA else cost[1]
        counts[engine] += 1
        if kind != DMA:
            starts, ends = intervals[engine]
            starts.append(row[3])
            ends.append(row[4])
        if kind != SYNC:
            key = id(cost)
            uses[key] += 1
            entries[key] = (kind, cost)
    totals = dict.fromkeys(
        ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
         "psum_write_bytes", "model_flops", "adjusted_flops", "transpose_flops"), 0)
    for key, n in uses.items():
        kind, cost = entries[key]
        if kind == COMPUTE:
            _, _, _, _, _, sr, sw, pr, pw, _ = cost
            fields = {"sbuf_read_bytes": sr, "sbuf_write_bytes": sw, "psum_read_bytes": pr, "psum_write_bytes": pw}
        elif kind == TENSOR:
            _, _, _, st_bytes, sr, pr, pw, raw, adjusted, tflops, _ = cost
            fields = {"sbuf_read_bytes": st_bytes + sr, "psum_read_bytes": pr, "psum_write_bytes": pw,
                      "model_flops": raw, "adjusted_flops": adjusted, "transpose_flops": tflops}
        else:
            hbm_r, hbm_w, sbuf_r, sbuf_w = cost[6:10]
            fields = {"hbm_read_bytes": hbm_r, "hbm_write_bytes": hbm_w, "sbuf_read_bytes": sbuf_r, "sbuf_write_bytes": sbuf_w}
        for name, value in fields.items():
            totals[name] += n * value
    model_flops, transpose_flops = totals["model_flops"], totals["transpose_flops"]

    summary: dict = {
        "target": arch.name,
        "total_time_ns": total,
        "total_time": total * 1e-9,
        "neuroncore_cycle_count": int(total * arch.base_clock_hz * 1e-9),
        "instruction_count": sum(counts.values()),
        "hardware_flops": model_flops + transpose_flops,
        **totals,
    }
    for engine in ENGINE_TRACKS:
        busy = merged_busy_ns(*intervals[engine])
        summary[f"{engine}_instruction_count"] = counts.get(engine, 0)
        summary[f"{engine}_active_time_ns"] = busy
        summary[f"{engine}_active_time_percent"] = 100.0 * busy / total if total else 0.0
    dma_busy = merged_busy_ns([d.start_ts for d in result.dma], [d.end_ts for d in result.dma])
    dma_bytes = sum(d.transfer_bytes for d in result.dma)
    summary["dma_instruction_count"] = counts.get("dma", 0)
    summary["dma_active_time_ns"] = dma_busy
    summary["dma_active_time_percent"] = 100.0 * dma_busy / total if total else 0.0
    summary["dma_transfer_bytes"] = dma_bytes
    summary["dma_transfer_average_bytes"] = dma_bytes / len(result.dma) if result.dma else 0.0
    peak = arch.tensor.peak_bf16_flops
    seconds = total * 1e-9
    hbm_bytes = totals["hbm_read_bytes"] + totals["hbm_write_bytes"]
    summary["mfu_estimated_percent"] = 100.0 * model_flops / (peak * seconds) if seconds else 0.0
    summary["hfu_estimated_percent"] = 100.0 * (model_flops + transpose_flops) / (peak * seconds) if seconds else 0.0
    summary["mbu_estimated_percent"] = 100.0 * hbm_bytes / total / arch.hbm_bytes_per_ns_per_core if total else 0.0
    summary["mm_arithmetic_intensity"] = model_flops / hbm_bytes if hbm_bytes else 0.0
    summary["peak_flops_bandwidth_ratio"] = peak / (arch.hbm_bytes_per_ns_per_core * 1e9)
    return summary
