"""Summary, OpcodeSummary, FrameworkNode, TensorInfo, stack frames, metadata and the system tables."""

import json

import pytest
from explorer_helpers import ARCH
from neuron_explorer import SCHEMA_VERSION
from neuron_sim.timing import estimate


def _execution(profile, name):
    return next(r for r in profile.table("ExecutionInfo").to_pylist() if r["name"] == name)


def test_execution_summary_matches_the_timing_models_summary(mixed_session, mixed_profile):
    ex = _execution(mixed_profile, "aten::mm")
    ref = estimate(mixed_session.programs["matmul"], ARCH).summary
    row = mixed_profile.table("Summary", filters=[("launch_id", "=", ex["launch_id"])]).to_pylist()[0]
    assert row["scope"] == "execution" and row["total_time"] == pytest.approx(ref["total_time"])
    for ours, theirs in (("mfu_estimated_percent", "mfu_estimated_percent"), ("mbu_estimated_percent", "mbu_estimated_percent"),
                         ("hfu_estimated_percent", "hfu_estimated_percent"), ("model_flops", "model_flops"),
                         ("hbm_read_bytes", "hbm_read_bytes"), ("hbm_write_bytes", "hbm_write_bytes"),
                         ("vector_engine_active_time", "vector_active_time_ns"), ("scalar_engine_active_time", "scalar_active_time_ns"),
                         ("dma_active_time", "dma_active_time_ns"), ("dma_transfer_total_bytes", "dma_transfer_bytes")):
        scale = 1e-9 if theirs.endswith("_ns") else 1
        assert row[ours] == pytest.approx(ref[theirs] * scale, rel=1e-9), ours
    # TensorE also counts its LoadStationary (LDWEIGHTS) rows as busy, the timing model only MultiplyMoving
    assert row["tensor_engine_active_time"] >= ref["tensor_active_time_ns"] * 1e-9


def test_profile_summary_adds_up_the_executions(mixed_profile):
    rows = mixed_profile.table("Summary").to_pylist()
    executions = [r for r in rows if r["scope"] == "execution"]
    profile = mixed_profile.summary
    assert len([r for r in rows if r["scope"] == "profile"]) == 1
    for key in ("total_time", "model_flops", "instruction_count", "hbm_read_bytes", "dma_transfer_count"):
        assert profile[key] == pytest.approx(sum(r[key] for r in executions)), key
    assert profile["instruction_count"] == mixed_profile.table("Instruction").num_rows
    peak = ARCH.tensor.peak_bf16_flops
    assert profile["mfu_estimated_percent"] == pytest.approx(100 * profile["model_flops"] / (peak * profile["total_time"]))


def test_opcode_summary_counts_every_instruction(mixed_profile):
    rows = mixed_profile.table("OpcodeSummary").to_pylist()
    instructions = mixed_profile.table("Instruction", columns=["engine", "opcode", "duration_ns"]).to_pylist()
    assert sum(r["instruction_count"] for r in rows) == len(instructions)
    mm = next(r for r in rows if (r["engine"], r["opcode"]) == ("tensor", "MATMUL"))
    mine = [i["duration_ns"] for i in instructions if (i["engine"], i["opcode"]) == ("tensor", "MATMUL")]
    assert mm["instruction_count"] == len(mine)
    assert mm["instruction_time_ns"] == pytest.approx(sum(mine), abs=len(mine))
    assert 0 < mm["active_time_ns"] <= mm["instruction_time_ns"] + len(mine)


def test_framework_nodes_roll_up_ops_and_the_programs_they_launched(mixed_profile):
    nodes = {r["id"]: r for r in mixed_profile.table("FrameworkNode").to_pylist()}
    executions = [r for r in mixed_profile.table("ExecutionInfo").to_pylist() if r["kind"] == "neff"]
    ops = {n["node_name"]: n for n in nodes.values() if n["level"] == "op"}
    assert set(ops) == {"aten::mm", "scale_add", "aten::exp", "matmul_relu", "aten::add"}
    mm = ops["aten::mm"]
    launches = [e for e in executions if e["name"] == "aten::mm"]
    assert mm["launch_count"] == 2
    assert mm["device_time_ns"] == pytest.approx(sum(e["execution_end_ts"] - e["execution_start_ts"] for e in launches), abs=2)
    (graph_id,) = json.loads(mm["children_ids"])
    graph = nodes[graph_id]
    assert graph["level"] == "graph" and graph["parent_id"] == mm["id"] and graph["node_name"] == "matmul_256x256x512_float32"
    assert all(e["framework_node_id"] == graph_id for e in launches)
    rows = mixed_profile.table("Instruction", filters=[("framework_node_id", "=", graph_id)])
    assert graph["tensor_engine_instruction_count"] == sum(1 for e in rows.column("engine").to_pylist() if e == "tensor")
    assert graph["model_flops"] == sum(rows.column("raw_flops").to_pylist()) > 0
    peak = ARCH.tensor.peak_bf16_flops
    assert mm["mfu"] == pytest.approx(100 * mm["model_flops"] / (peak * mm["device_time_ns"] * 1e-9), rel=1e-3)
    first, last = json.loads(mm["total_time_tensor"])
    assert first < last and first >= mm["start_ts"] and last <= mm["end_ts"]
    assert json.loads(mm["time_intervals"])[0][0] == mm["start_ts"]
    assert len(json.loads(mm["mfu_per_interval"])) == len(json.loads(mm["time_intervals"]))


def test_tensor_info_lists_each_neffs_tensors_with_their_sbuf_loads(mixed_session, mixed_profile):
    neff = _execution(mixed_profile, "aten::mm")["neff_name"]
    rows = {r["variable_name"]: r for r in mixed_profile.table("TensorInfo", filters=[("neff_name", "=", neff)]).to_pylist()}
    assert set(rows) == {"lhsT", "rhs", "out"}
    assert rows["rhs"]["type"] == "IN" and rows["out"]["type"] == "OUT" and rows["rhs"]["shape"] == "[256, 512]"
    assert rows["rhs"]["size"] == 256 * 512 * 4
    assert rows["rhs"]["load_to_sbuf_total_size_bytes"] >= rows["rhs"]["size"]
    assert rows["rhs"]["load_to_sbuf_repeat_factor"] == pytest.approx(rows["rhs"]["load_to_sbuf_total_size_bytes"] / rows["rhs"]["size"])
    assert rows["out"]["load_to_sbuf_dma_count"] == 0


def test_stack_frames_resolve_to_the_kernel_source_lines(mixed_profile):
    files = {r["id"]: r for r in mixed_profile.table("StackFrameFileName").to_pylist()}
    locations = {r["id"]: r for r in mixed_profile.table("StackFrameFileLocation").to_pylist()}
    frames = {r["id"]: r for r in mixed_profile.table("StackFrame").to_pylist()}
    kernel_rows = mixed_profile.table("Instruction", filters=[("hlo_name", "=", "scale_add")]).to_pylist()
    for row in kernel_rows:
        (frame_id,) = json.loads(row["stack_frame_ids"])
        location = locations[str(frames[str(frame_id)]["file_location_id"])]
        path = files[str(location["file_name_id"])]["name"]
        assert f"{path}:{location['line_number']}" == row["nki_source_location"]
        assert path.endswith("kernels.py") and files[str(location["file_name_id"])]["captured"]


def test_metadata_describes_the_capture_and_the_simulated_core(mixed_profile):
    m = mixed_profile.metadata
    assert m["profile_schema_version"] == SCHEMA_VERSION and m["is_simulation"] is True and m["target"] == "trn2"
    assert m["tensor_engine_num_rows"] == ARCH.tensor.rows and m["num_dma_engines_per_neuroncore"] == ARCH.dma.engines
    assert m["hbm_ddr_bandwidth"] == pytest.approx(ARCH.hbm_bytes_per_ns_per_core * 1e9)
    ex = mixed_profile.table("ExecutionInfo")
    assert m["first_hw_timestamp"] == min(ex.column("execution_start_ts").to_pylist())
    assert m["device_profile"] == "session" and m["first_ts"] <= m["last_ts"]


def test_execution_info_and_system_events_cover_every_task(mixed_profile):
    ex = mixed_profile.table("ExecutionInfo").to_pylist()
    assert sorted(r["kind"] for r in ex) == ["copy", "host"] + ["neff"] * 6
    assert {r["nc_idx"] for r in ex} == {0, 1}
    events = mixed_profile.table("SystemProfileEvents").to_pylist()
    by_type = {}
    for e in events:
        by_type.setdefault(e["event_type"], []).append(e)
    assert len(by_type["nc_exec_running"]) == len(by_type["nrt_execute"]) == 6
    assert len(by_type["dmem_buf_copy"]) == len(by_type["host_task"]) == 1
    assert all(e["trace_event_source"] == "neuron_hw" for e in by_type["nc_exec_running"])
    launch = mixed_profile.table("Flow", filters=[("dependency_type", "=", "LAUNCH")]).to_pylist()
    ids = {e["id"]: e for e in events}
    assert len(launch) == 6
    for f in launch:
        rt, hw = ids[f["in_id"]], ids[f["out_id"]]
        assert rt["event_type"] == "nrt_execute" and hw["event_type"] == "nc_exec_running"
        assert rt["launch_id"] == hw["launch_id"] and rt["flow_id"] == hw["flow_id"] == [str(rt["launch_id"])]


def test_schema_fields_describe_every_column(mixed_profile):
    from neuron_explorer import TABLES

    rows = mixed_profile.table("SchemaFields").to_pylist()
    assert {(r["table_name"], r["field_name"]) for r in rows} == {(t.name, f.name) for t in TABLES.values() for f in t.fields}
    for name, table in TABLES.items():
        assert mixed_profile.table(name).schema.names == table.field_names, name
