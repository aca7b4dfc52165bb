"""The run summary, with Neuron Explorer's metric definitions.

MFU = model FLOPs / (TensorE peak FLOP/s x total time), peak = 2 x PEs x clock (the BF16 rate);
HFU counts the FLOPs the array actually spent (transposes included); MBU = HBM bytes read+written
/ total time / the bandwidth of one HBM stack (profile-schema-reference.rst, Summary table).
"""

from __future__ import annotations

import functools
import hashlib
from operator import itemgetter

import numpy as np

from ..arch import Architecture
from ..fingerprint import code_fingerprint
from .records import COMPUTE, DMA, SYNC, TENSOR, TimingResult

MODEL_KEY = "timing_model"  # which model made a summary: a NEFF's summary is reused only if this one did

# Engines whose busy time is reported (TensorE counts MultiplyMoving, the "TensorMatrix" track).
ENGINE_TRACKS = ("tensor", "vector", "scalar", "gpsimd", "sync")
ENGINE_CODES = {engine: i for i, engine in enumerate((*ENGINE_TRACKS, "dma"))}


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


@functools.lru_cache(maxsize=32)
def timing_model_id(arch: Architecture) -> str:
    """Identifies the timing model (the neuron-sim code fingerprint) and the architecture's
    numbers a summary was computed with."""
    return hashlib.sha256(f"{code_fingerprint()}\n{arch!r}".encode()).hexdigest()[:32]


def summarize(result: TimingResult, arch: Architecture) -> dict:
    total = result.total_ns
    rows = result.rows
    n = len(rows)
    # Column-wise with numpy: this runs once per estimate over every row. Rows that share a
    # memoized cost entry (the same object) share its engine and byte counts.
    cost_ids = np.fromiter(map(id, map(itemgetter(2), rows)), np.uint64, n)
    _, first, inverse, uses = np.unique(cost_ids, return_index=True, return_inverse=True, return_counts=True)
    order = np.argsort(first)  # entries in order of first use: the float sums keep their order
    entry_codes = np.empty(len(first), dtype=np.int64)
    totals = dict.fromkeys(
        ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
         "psum_write_bytes", "model_flops", "adjusted_flops", "transpose_flops"), 0)
    first = first.tolist()
    for u in order.tolist():
        _, kind, cost = rows[first[u]][:3]
        entry_codes[u] = ENGINE_CODES["tensor" if kind == TENSOR else "dma" if kind == DMA else cost[1]]
        if kind == SYNC:
            continue
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
        uses_u = int(uses[u])
        for name, value in fields.items():
            totals[name] += uses_u * value
    engines = entry_codes[inverse.reshape(-1)]  # per row
    counts = np.bincount(engines, minlength=len(ENGINE_CODES)).tolist()
    starts = np.fromiter(map(itemgetter(3), rows), np.float64, n)
    ends = np.fromiter(map(itemgetter(4), rows), np.float64, n)
    model_flops, transpose_flops = totals["model_flops"], totals["transpose_flops"]

    summary: dict = {
        "target": arch.name,
        MODEL_KEY: timing_model_id(arch),
        "total_time_ns": total,
        "total_time": total * 1e-9,
        "neuroncore_cycle_count": int(total * arch.base_clock_hz * 1e-9),
        "instruction_count": n,
        "hardware_flops": model_flops + transpose_flops,
        **totals,
    }
    for engine in ENGINE_TRACKS:  # DMA rows (engine "dma") are covered by the DMA records below
        code = ENGINE_CODES[engine]
        mine = engines == code
        busy = merged_busy_ns(starts[mine], ends[mine])
        summary[f"{engine}_instruction_count"] = counts[code]
        summary[f"{engine}_active_time_ns"] = busy
        summary[f"{engine}_active_time_percent"] = 100.0 * busy / total if total else 0.0
    dma_busy = merged_busy_ns([d.start_ts for d in result.dma], [d.end_ts for d in result.dma])
    dma_bytes = sum(d.transfer_bytes for d in result.dma)
    summary["dma_instruction_count"] = counts[ENGINE_CODES["dma"]]
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
