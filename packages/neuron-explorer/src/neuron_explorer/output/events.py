"""The profile as trace events (slices on named tracks, with flow links), for the Perfetto and Chrome
exporters. Read a row group at a time: exporting never loads a whole table.

* system profile: device lanes (one per NeuronCore and queue, on the device clock) hold every task
  the runtime ran; host lanes (one per runtime thread, on the host clock) hold the runtime side of
  the same tasks; a flow links the two halves of each device execution.
* device profiles, one per NEFF: every instruction on its engine track or DMA queue, the DMA
  transfers on their queue's data track, flows for the dependencies the Flow table holds.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import pyarrow.compute as pc

from ..profile import Profile

BATCH_ROWS = 1 << 16


@dataclass(slots=True)
class TraceEvent:
    group: str  # a process-level grouping of tracks
    track: str
    name: str
    start_ns: int
    end_ns: int
    args: dict = field(default_factory=dict)
    flows_out: tuple = ()
    flows_in: tuple = ()


def system_events(profile: Profile) -> Iterator[TraceEvent]:
    for batch in profile.parquet("ExecutionInfo").iter_batches(BATCH_ROWS):
        for r in batch.to_pylist():
            if r["execution_end_ts"] <= r["execution_start_ts"] and r["kind"] != "neff":
                continue  # host work with no device time
            yield TraceEvent(
                f"NeuronCore {r['nc_idx']} (device clock)", f"queue {r['queue']}", r["name"], r["execution_start_ts"],
                r["execution_end_ts"],
                {k: r[k] for k in ("launch_id", "kind", "context", "neff_name", "executor", "error") if r[k] is not None},
                flows_in=(r["launch_id"],) if r["kind"] == "neff" else (),
            )
    for batch in profile.parquet("SystemProfileEvents").iter_batches(BATCH_ROWS):
        for r in batch.to_pylist():
            if r["trace_event_source"] == "neuron_hw":
                continue  # shown on the device lanes above
            yield TraceEvent(
                f"{r['instance_id']} pid {r['process_id']} (host clock)", f"thread {r['thread_id']}", r["name"],
                r["start_ts"], r["end_ts"],
                {"event_type": r["event_type"], "launch_id": r["launch_id"], "nc_idx": r["nc_idx"],
                 "queue": r["framework_stream_id"], **json.loads(r["extra_attributes_json"] or "{}")},
                flows_out=(r["launch_id"],) if r["event_type"] == "nrt_execute" else (),
            )


def device_neffs(profile: Profile) -> dict[int, str]:
    """launch_id -> NEFF name of every device-profiled execution."""
    table = profile.table("ExecutionInfo", columns=["launch_id", "neff_name", "device_profiled"])
    table = table.filter(table.column("device_profiled"))
    return dict(zip(table.column("launch_id").to_pylist(), table.column("neff_name").to_pylist()))


def device_events(profile: Profile, with_flows: bool = True) -> Iterator[tuple[str, TraceEvent]]:
    """(NEFF name, event) for every instruction and DMA transfer."""
    neffs = device_neffs(profile)
    outgoing: dict[int, list] = {}
    incoming: dict[int, list] = {}
    if with_flows:
        flows = profile.table("Flow", filters=[("in_table", "=", "Instruction"), ("out_table", "=", "Instruction")])
        for n, (a, b) in enumerate(zip(flows.column("in_id").to_pylist(), flows.column("out_id").to_pylist()), 1):
            outgoing.setdefault(a, []).append(n)
            incoming.setdefault(b, []).append(n)
    columns = ["id", "launch_id", "nc_idx", "start_ts", "end_ts", "engine", "timeline_track", "opcode", "operands", "pc",
               "nki_source_location", "evt_wait_time_ns", "waited_on", "hbm_read_bytes", "hbm_write_bytes"]
    for batch in profile.parquet("Instruction").iter_batches(BATCH_ROWS, columns=columns):
        for r in batch.to_pylist():
            args = {"pc": r["pc"], "operands": r["operands"], "launch_id": r["launch_id"]}
            if r["nki_source_location"]:
                args["source"] = r["nki_source_location"]
            if r["evt_wait_time_ns"]:
                args["waited_ns"] = r["evt_wait_time_ns"]
                args["waited_on"] = r["waited_on"]
            if r["hbm_read_bytes"] or r["hbm_write_bytes"]:
                args["hbm_bytes"] = r["hbm_read_bytes"] + r["hbm_write_bytes"]
            yield neffs.get(r["launch_id"], "unknown"), TraceEvent(
                f"NeuronCore {r['nc_idx']}", r["timeline_track"], r["opcode"], r["start_ts"], r["end_ts"], args,
                tuple(outgoing.get(r["id"], ())), tuple(incoming.get(r["id"], ())))
    for batch in profile.parquet("DmaPacket").iter_batches(BATCH_ROWS):
        batch = batch.select(["launch_id", "nc_idx", "queue_name", "engine_idx", "start_ts", "end_ts", "transfer_bytes",
                              "source", "dest"])
        for r in batch.to_pylist():
            yield neffs.get(r["launch_id"], "unknown"), TraceEvent(
                f"NeuronCore {r['nc_idx']}", f"{r['queue_name']} data", f"{r['source']} -> {r['dest']}", r["start_ts"],
                r["end_ts"], {"bytes": r["transfer_bytes"], "dma_engine": r["engine_idx"], "launch_id": r["launch_id"]})


def neff_names(profile: Profile) -> list[str]:
    table = profile.table("ExecutionInfo", columns=["neff_name"])
    return sorted(set(pc.drop_null(table.column("neff_name")).to_pylist()))
