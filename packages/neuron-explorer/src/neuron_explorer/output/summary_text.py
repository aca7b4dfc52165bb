"""``--output-format summary-text``: the profile's key figures as plain text."""

from __future__ import annotations

from ..profile import Profile

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")


def _time(ns: float) -> str:
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("us", 1e3)):
        if abs(ns) >= scale:
            return f"{ns / scale:.3f} {unit}"
    return f"{ns:.0f} ns"


def summary_text(profile: Profile, top: int = 10) -> str:
    meta, s = profile.metadata, profile.summary
    total_ns = (s.get("total_time") or 0.0) * 1e9
    executions = profile.table("ExecutionInfo", columns=["kind", "device_profiled"])
    kinds = executions.column("kind").to_pylist()
    lines = [
        f"Profile: {profile.name}  ({meta['instance_type']})",
        f"  schema {meta['profile_schema_version']}, neuron-explorer {meta['explorer_version']}, neuron-sim "
        f"{meta['runtime_version']}; captured {meta['first_ts']} .. {meta['last_ts']}",
        f"  {len(kinds)} runtime tasks: {kinds.count('neff')} device executions "
        f"({sum(executions.column('device_profiled').to_pylist())} with instruction traces), "
        f"{kinds.count('copy')} copies, {len(kinds) - kinds.count('neff') - kinds.count('copy')} host tasks",
        "",
        f"Device time (profiled executions): {_time(total_ns)}   instructions: {s.get('instruction_count', 0):,}",
        f"  MFU {s.get('mfu_estimated_percent', 0):.2f}%   HFU {s.get('hfu_estimated_percent', 0):.2f}%   "
        f"MBU {s.get('mbu_estimated_percent', 0):.2f}%   arithmetic intensity {s.get('mm_arithmetic_intensity', 0):.1f} "
        f"FLOP/B (ridge {s.get('peak_flops_bandwidth_ratio', 0):.1f})",
        "  engine busy: " + "   ".join(f"{e} {s.get(f'{e}_engine_active_time_percent', 0):.1f}%" for e in ENGINES)
        + f"   dma {s.get('dma_active_time_percent', 0):.1f}%",
        f"  HBM read {s.get('hbm_read_bytes', 0):,} B, written {s.get('hbm_write_bytes', 0):,} B; "
        f"{s.get('dma_transfer_count', 0):,} DMA transfers, {s.get('dma_transfer_total_bytes', 0):,} B",
        "",
        f"Top {top} operations by device time:",
        f"  {'operation':40s} {'launches':>9s} {'device time':>12s} {'share':>7s} {'MFU':>7s} {'MBU':>7s}",
    ]
    ops = profile.top_ops(top)
    all_time = sum(r["device_time_ns"] for r in profile.table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist())
    for r in ops:
        share = 100.0 * r["device_time_ns"] / all_time if all_time else 0.0
        lines.append(f"  {r['node_name'][:40]:40s} {r['launch_count']:9d} {_time(r['device_time_ns']):>12s} "
                     f"{share:6.1f}% {r['mfu']:6.2f}% {r['mbu']:6.2f}%")
    lines += ["", f"Top {top} opcodes by instruction time:"]
    for r in profile.table("OpcodeSummary").to_pylist()[:top]:
        lines.append(f"  {r['engine']:7s} {r['opcode']:24s} {r['instruction_count']:10,d}  {_time(r['instruction_time_ns']):>12s}"
                     f"  active {r['active_time_percent']:5.1f}%")
    warnings = profile.table("Warning").to_pylist()
    if warnings:
        lines += ["", "Warnings:"] + [f"  [{w['category']}] {w['message']}" for w in warnings]
    return "\n".join(lines) + "\n"
