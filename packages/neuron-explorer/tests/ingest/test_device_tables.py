"""Instruction, DmaPacket, SemaphoreUpdate, ActiveTime and Flow rows against the timing model's own schedule."""

import numpy as np
import pyarrow.compute as pc
import pytest
from explorer_helpers import ARCH
from neuron_explorer.ingest.intervals import merge_intervals
from neuron_sim.timing import estimate


def _executions(profile):
    return {r["launch_id"]: r for r in profile.table("ExecutionInfo").to_pylist()}


def _launch_of(profile, name):
    return next(r for r in profile.table("ExecutionInfo").to_pylist() if r["name"] == name)


@pytest.mark.parametrize("op, program", [("aten::mm", "matmul"), ("scale_add", "scale_add"), ("aten::exp", "chain"),
                                         ("matmul_relu", "matmul_relu"), ("aten::add", "semaphores")])
def test_instruction_rows_are_the_schedule_shifted_to_the_execution(mixed_session, mixed_profile, op, program):
    ex = _launch_of(mixed_profile, op)
    timing = estimate(mixed_session.programs[program], ARCH)
    rows = mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    base = ex["execution_start_ts"]
    assert len(rows) == len(timing.instructions) == ex["row_count"] > 0
    for row, rec in zip(rows, timing.instructions, strict=True):
        assert (row["opcode"], row["engine"], row["timeline_track"], row["pc"]) == (rec.opcode, rec.engine, rec.timeline_track,
                                                                                    rec.index)
        assert abs(row["start_ts"] - (rec.start_ts + base)) <= 1 and abs(row["end_ts"] - (rec.end_ts + base)) <= 1
        assert row["duration_ns"] == row["end_ts"] - row["start_ts"]
        assert row["evt_wait_time_ns"] == round(rec.evt_wait_time_ns) and row["waited_on"] == rec.waited_on
        assert (row["hbm_read_bytes"], row["sbuf_write_bytes"], row["raw_flops"]) == (rec.hbm_read_bytes, rec.sbuf_write_bytes,
                                                                                     rec.raw_flops)
        program_inst = mixed_session.programs[program].instructions[rec.index]
        assert row["operands"] == program_inst.describe()
        assert row["nki_source_location"] == program_inst.location
        assert row["hlo_name"] == op and row["nc_idx"] == ex["nc_idx"]


def test_instruction_ids_are_unique_and_dense(mixed_profile):
    ids = mixed_profile.table("Instruction", columns=["id"]).column("id").to_numpy()
    assert np.array_equal(np.sort(ids), np.arange(len(ids)))


def test_dma_packets_match_the_schedule_and_point_at_their_trigger(mixed_session, mixed_profile):
    ex = _launch_of(mixed_profile, "aten::mm")
    timing = estimate(mixed_session.programs["matmul"], ARCH)
    packets = mixed_profile.table("DmaPacket", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    assert len(packets) == len(timing.dma) > 0
    instructions = {r["id"]: r for r in mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()}
    for packet, rec in zip(packets, timing.dma, strict=True):
        assert packet["queue_name"] == rec.queue_name and packet["transfer_bytes"] == rec.transfer_bytes
        assert abs(packet["start_ts"] - (rec.start_ts + ex["execution_start_ts"])) <= 1
        trigger = instructions[packet["instruction_id"]]
        assert trigger["engine"] == "dma" and trigger["pc"] == rec.instruction_index == packet["pc"]
        assert trigger["start_ts"] <= packet["start_ts"] <= packet["end_ts"] <= trigger["end_ts"]
        assert packet["variable"] in (rec.source, rec.dest) and packet["variable"] != "SBUF"
        assert packet["throughput"] == pytest.approx(packet["transfer_bytes"] / (rec.end_ts - rec.start_ts) * 1e9)


def test_semaphore_updates_name_the_instruction_that_made_them(mixed_session, mixed_profile):
    ex = _launch_of(mixed_profile, "aten::add")
    timing = estimate(mixed_session.programs["semaphores"], ARCH)
    updates = mixed_profile.table("SemaphoreUpdate", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    assert [(u["id"], u["value"], u["update_source"]) for u in updates] == [
        (s.semaphore, s.value, s.update_source) for s in timing.semaphores]
    instructions = {r["id"]: r for r in mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()}
    signal = next(u for u in updates if u["id"] == "ready")
    assert instructions[signal["instruction_id"]]["opcode"] == "SEM_SIGNAL"


def test_active_time_is_the_union_of_each_engines_rows(mixed_profile):
    ex = _launch_of(mixed_profile, "aten::mm")
    rows = mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])])
    active = mixed_profile.table("ActiveTime", filters=[("launch_id", "=", ex["launch_id"])])
    for engine in ("tensor", "vector", "scalar"):
        mine = rows.filter(pc.equal(rows.column("engine"), engine))
        s, e = merge_intervals(mine.column("start_ts").to_numpy(), mine.column("end_ts").to_numpy())
        got = active.filter(pc.equal(active.column("engine"), engine))
        assert got.column("duration_ns").to_numpy().sum() == pytest.approx((e - s).sum(), abs=len(s))
    packets = mixed_profile.table("DmaPacket", filters=[("launch_id", "=", ex["launch_id"])])
    s, e = merge_intervals(packets.column("start_ts").to_numpy(), packets.column("end_ts").to_numpy())
    dma = active.filter(pc.equal(active.column("engine"), "dma"))
    assert dma.column("duration_ns").to_numpy().sum() == pytest.approx((e - s).sum(), abs=len(s))


def test_flow_edges_name_the_producer_each_wait_was_for(mixed_profile):
    """chain: DMA in -> exp (ScalarE) -> add (VectorE) -> DMA out, each step waiting for the previous one."""
    ex = _launch_of(mixed_profile, "aten::exp")
    rows = mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    ids = [r["id"] for r in rows]
    assert [r["opcode"] for r in rows] == ["DMA_COPY", "ACTIVATE", "TENSOR_TENSOR", "DMA_COPY"]
    flows = mixed_profile.table("Flow", filters=[("in_table", "=", "Instruction"), ("out_table", "=", "Instruction"),
                                                 ("out_id", "in", ids)]).to_pylist()
    edges = {(f["in_id"], f["out_id"]): f for f in flows}
    assert set(edges) == {(ids[0], ids[1]), (ids[1], ids[2]), (ids[2], ids[3])}
    for (a, b), f in edges.items():
        producer, consumer = rows[ids.index(a)], rows[ids.index(b)]
        assert f["dependency_type"] == "FLOW_DEPENDENCE"
        assert consumer["waited_on"] == producer["timeline_track"]
        assert f["gap_time"] == pytest.approx(consumer["start_ts"] - producer["end_ts"], abs=1)


def test_a_semaphore_wait_depends_on_the_signal(mixed_profile):
    ex = _launch_of(mixed_profile, "aten::add")
    rows = {r["id"]: r for r in mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()}
    wait = next(r for r in rows.values() if r["opcode"] == "SEM_WAIT")
    flows = mixed_profile.table("Flow", filters=[("out_id", "=", wait["id"]), ("out_table", "=", "Instruction")]).to_pylist()
    assert [f["dependency_type"] for f in flows] == ["SEMAPHORE"]
    assert rows[flows[0]["in_id"]]["opcode"] == "SEM_SIGNAL" and wait["waited_on"] == "ready"


def test_dma_trigger_edges_link_every_transfer(mixed_profile):
    packets = mixed_profile.table("DmaPacket")
    edges = mixed_profile.table("Flow", filters=[("dependency_type", "=", "DMA_TRIGGER")])
    pairs = set(zip(edges.column("in_id").to_pylist(), edges.column("out_id").to_pylist()))
    assert pairs == set(zip(packets.column("instruction_id").to_pylist(), packets.column("id").to_pylist()))


def test_hbm_usage_integrates_to_the_hbm_bytes_moved(mixed_profile):
    usage = mixed_profile.table("HbmUsage")
    packets = mixed_profile.table("DmaPacket")
    for nc in (0, 1):
        mine = usage.filter(pc.equal(usage.column("nc_idx"), nc))
        order = np.argsort(mine.column("timestamp").to_numpy(), kind="stable")
        moved = mine.column("total_transfer_bytes").to_numpy()[order]
        assert np.all(np.diff(moved) >= -1)
        hbm = packets.filter(pc.and_(pc.equal(packets.column("nc_idx"), nc), pc.invert(pc.is_null(packets.column("variable")))))
        assert moved[-1] == pytest.approx(hbm.column("transfer_bytes").to_numpy().sum(), rel=1e-6)
        assert mine.column("current_throughput").to_numpy()[order][-1] == pytest.approx(0.0, abs=1e-3)


def test_sbuf_occupancy_follows_each_tiles_first_write_and_last_access(mixed_profile):
    """chain: tile t (1 KiB per partition) lives from its load to the add that last reads it, tile u
    (1 KiB) from the exp that writes it to the store that reads it: 2 KiB at the peak, then none."""
    ex = _launch_of(mixed_profile, "aten::exp")
    rows = mixed_profile.table("Instruction", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    usage = mixed_profile.table("SbufUsage", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    per_partition = ARCH.sbuf_bytes_per_partition
    load, exp, add, store = rows
    assert [u["timestamp"] for u in usage] == [load["end_ts"], exp["end_ts"], add["end_ts"], store["end_ts"]]
    expected = [1024, 2048, 1024, 0]
    for u, live in zip(usage, expected, strict=True):
        for quadrant in (0, 32, 64, 96):
            assert u[f"partition_{quadrant}_util_percent"] == pytest.approx(100 * live / per_partition)
    assert mixed_profile.table("PsumUsage", filters=[("launch_id", "=", ex["launch_id"])]).num_rows == 0


def test_psum_occupancy_is_per_bank(mixed_profile):
    ex = _launch_of(mixed_profile, "matmul_relu")
    usage = mixed_profile.table("PsumUsage", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()
    peak = max(usage, key=lambda u: u["avg_util_percent"])
    banks = [peak[f"bank_{b}_util_percent"] for b in range(8)]
    assert banks[0] == pytest.approx(100.0) and sum(banks[1:]) == 0  # one 128x512 fp32 accumulator fills bank 0
    assert usage[-1]["avg_util_percent"] == 0
