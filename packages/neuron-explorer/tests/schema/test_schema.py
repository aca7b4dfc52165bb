"""The schema: printed, self-describing, versioned."""

import json

import pytest
from neuron_explorer import SCHEMA_VERSION, TABLES, SchemaVersionError, describe_schema
from neuron_explorer.schema import check_readable

REFERENCE_NAMES = {  # fields spelled as Neuron Explorer's profile schema reference spells them
    "Instruction": {"start_ts", "end_ts", "duration_ns", "engine", "timeline_track", "opcode", "operands", "pc",
                    "evt_wait_time_ns", "nki_source_location", "stack_frame_ids", "hbm_read_bytes", "psum_write_bytes",
                    "raw_flops", "adjusted_flops", "performance_mode", "pcore_idx", "hlo_name"},
    "OpcodeSummary": {"engine", "opcode", "instruction_count", "instruction_time_ns", "active_time_ns", "active_time_percent"},
    "ActiveTime": {"start_ts", "end_ts", "engine", "pcore_idx", "duration_ns"},
    "FrameworkNode": {"node_name", "children_names", "parent_name", "children_ids", "start_ts", "end_ts", "time_intervals",
                      "hfu", "mfu", "hfu_per_interval", "mfu_per_interval", "mbu_per_interval", "total_time_tensor",
                      "total_time_vector", "total_time_scalar", "total_time_sync", "total_time_gpsimd",
                      "tensor_engine_instruction_count"},
    "Summary": {"total_time", "model_flops", "hardware_flops", "mbu_estimated_percent", "mfu_estimated_percent",
                "hfu_estimated_percent", "dma_active_time_percent", "tensor_engine_active_time_percent"},
    "Flow": {"in_id", "out_id", "in_table", "out_table", "dependency_type", "gap_time"},
    "Metadata": {"profile_schema_version", "is_simulation", "tensor_engine_num_rows"},
    "SystemProfileEvents": {"name", "start_ts", "end_ts", "trace_event_source", "instance_id", "process_id", "thread_id",
                            "nc_idx", "worker_gid", "flow_id", "framework_stream_id", "extra_attributes_json"},
    "TensorInfo": {"variable_name", "type", "shape", "size", "load_to_sbuf_repeat_factor"},
    "StackFrame": {"id", "file_location_id", "parent_frame_id"},
    "DmaPacket": {"start_ts", "end_ts", "engine_idx", "transfer_bytes", "queue_name", "throughput"},
    "SemaphoreUpdate": {"timestamp", "id", "value", "update_source"},
}


@pytest.mark.parametrize("table", sorted(REFERENCE_NAMES))
def test_tables_use_the_reference_field_names(table):
    assert REFERENCE_NAMES[table] <= set(TABLES[table].field_names)


def test_schema_prints_as_json_and_yaml():
    doc = json.loads(describe_schema("json"))
    assert doc["profile_schema_version"] == SCHEMA_VERSION
    assert set(doc["tables"]) == set(TABLES)
    assert doc["tables"]["Instruction"]["fields"]["start_ts"]["unit"] == "nanoseconds"
    text = describe_schema("yaml")
    assert text.startswith(f'profile_schema_version: "{SCHEMA_VERSION}"') and "  Instruction:\n" in text
    with pytest.raises(ValueError, match="xml"):
        describe_schema("xml")


@pytest.mark.parametrize("version, ok", [("1.0.0", True), ("1.0.7", True), ("1.1.0", False), ("2.0.0", False),
                                         ("0.9.0", False)])
def test_reading_checks_the_major_and_minor_version(version, ok):
    if ok:
        check_readable(version, "1.0.0", "file.parquet")
    else:
        with pytest.raises(SchemaVersionError, match=f"file.parquet has format version {version}"):
            check_readable(version, "1.0.0", "file.parquet")


def test_malformed_versions_are_rejected():
    with pytest.raises(SchemaVersionError, match="not MAJOR.MINOR.PATCH"):
        check_readable("seven", "1.0.0", "x")
