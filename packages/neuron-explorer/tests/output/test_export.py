"""Perfetto (.pftrace via the perfetto package's protos), Chrome JSON and summary text."""

import json

import pytest
from neuron_explorer.output.export import export
from neuron_explorer.output.summary_text import summary_text
from perfetto.protos.perfetto.trace.perfetto_trace_pb2 import Trace, TrackEvent


@pytest.fixture(scope="module")
def exported(mixed_profile, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    return {fmt: export(mixed_profile, fmt, out / fmt) for fmt in ("json", "perfetto")}


def test_files_follow_the_explorer_names(exported, mixed_profile):
    neffs = {e["neff_name"] for e in mixed_profile.table("ExecutionInfo").to_pylist() if e["neff_name"]}
    for fmt, ext in (("json", "json"), ("perfetto", "pftrace")):
        names = sorted(p.name for p in exported[fmt])
        assert f"system_profile.{ext}" in names
        assert len(names) == 1 + len(neffs)
        assert all(n.startswith("device_profile_model_") for n in names if not n.startswith("system"))


def test_chrome_json_holds_every_instruction_and_its_dependencies(exported, mixed_profile):
    events = []
    for path in exported["json"]:
        doc = json.loads(path.read_text())
        assert doc["displayTimeUnit"] == "ns"
        if path.name.startswith("device_profile"):
            events += doc["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    packets = mixed_profile.table("DmaPacket").num_rows
    assert len(slices) == mixed_profile.table("Instruction").num_rows + packets
    flows = mixed_profile.table("Flow", filters=[("in_table", "=", "Instruction"), ("out_table", "=", "Instruction")]).num_rows
    assert sum(e["ph"] == "s" for e in events) == sum(e["ph"] == "f" for e in events) == flows
    tracks = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"TensorMatrix", "Vector", "Scalar", "qSyncIO0"} <= tracks
    mm = next(e for e in slices if e["name"] == "MATMUL")
    assert mm["dur"] > 0 and "operands" in mm["args"] and mm["args"]["source"]


def test_chrome_json_system_profile_links_runtime_calls_to_device_executions(exported):
    doc = json.loads(next(p for p in exported["json"] if p.name == "system_profile.json").read_text())
    processes = {e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert any("(device clock)" in p for p in processes) and any("(host clock)" in p for p in processes)
    starts = {e["id"] for e in doc["traceEvents"] if e["ph"] == "s"}
    ends = {e["id"] for e in doc["traceEvents"] if e["ph"] == "f"}
    assert len(starts) == 6 and starts == ends


def _packets(path):
    trace = Trace()
    trace.ParseFromString(path.read_bytes())
    return trace.packet


def test_pftrace_is_a_valid_perfetto_trace_with_nested_tracks(exported, mixed_profile):
    begins_total = ends_total = flows_out = flows_in = 0
    names = set()
    for path in exported["perfetto"]:
        if not path.name.startswith("device"):
            continue
        packets = _packets(path)
        descriptors = {p.track_descriptor.uuid: p.track_descriptor for p in packets if p.HasField("track_descriptor")}
        events = [p for p in packets if p.HasField("track_event")]
        assert all(p.track_event.track_uuid in descriptors for p in events)
        assert all(descriptors[d.parent_uuid].name.startswith("NeuronCore") for d in descriptors.values() if d.parent_uuid)
        names |= {d.name for d in descriptors.values()}
        # slices on one track never overlap (overlapping DMA triggers of a queue get lanes of their own)
        open_slice = {}
        for p in events:
            te = p.track_event
            if te.type == TrackEvent.TYPE_SLICE_BEGIN:
                assert te.track_uuid not in open_slice or open_slice[te.track_uuid] <= p.timestamp
                open_slice[te.track_uuid] = float("inf")
                begins_total += 1
                flows_out += len(te.flow_ids)
                flows_in += len(te.terminating_flow_ids)
                if te.name == "MATMUL":
                    assert {a.name for a in te.debug_annotations} >= {"pc", "operands", "launch_id"}
            else:
                assert te.type == TrackEvent.TYPE_SLICE_END
                open_slice[te.track_uuid] = p.timestamp
                ends_total += 1
    assert begins_total == ends_total == mixed_profile.table("Instruction").num_rows + mixed_profile.table("DmaPacket").num_rows
    assert {"TensorMatrix", "Vector", "Scalar", "qSyncIO0", "qSyncIO0 data"} <= names
    assert flows_out == flows_in > 0


def test_summary_text_names_the_top_ops_and_engines(mixed_profile):
    text = summary_text(mixed_profile)
    assert "MFU" in text and "engine busy: tensor" in text
    assert "Top 10 operations by device time" in text and "aten::mm" in text
    top = mixed_profile.top_ops(1)[0]["node_name"]
    ops_section = text.split("Top 10 operations by device time:")[1]
    assert ops_section.splitlines()[2].strip().startswith(top)


def test_unknown_format(mixed_profile, tmp_path):
    with pytest.raises(ValueError, match="output format must be one of parquet, json, perfetto, summary-text"):
        export(mixed_profile, "csv", tmp_path)
