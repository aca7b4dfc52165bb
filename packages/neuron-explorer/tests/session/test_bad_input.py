"""Corrupt, truncated, foreign and newer inputs: each a clear error naming the file, never a crash."""

import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from explorer_helpers import buffers_for, capture, chain_program
from neuron_explorer import (
    ExplorerError,
    MissingNeffError,
    ProfileFormatError,
    SchemaVersionError,
    ingest,
    open_profile,
)
from neuron_explorer.profile import Profile
from neuron_explorer.session import layout


@pytest.fixture
def session(tmp_path):
    program = chain_program()

    def work(rt):
        for i in range(3):
            rt.device(0).launch(program, buffers_for(program, i), name="aten::exp")

    return capture(tmp_path / "capture", work).session_dir


def _edit_info(session, **changes):
    path = session / layout.SESSION_FILE
    info = json.loads(path.read_text())
    info.update(changes)
    path.write_text(json.dumps(info))


def test_corrupt_session_json(session):
    (session / layout.SESSION_FILE).write_text('{"format": "neuron-explorer-sess')
    with pytest.raises(ProfileFormatError, match=r"session.json is not valid JSON \(corrupt or truncated\)"):
        ingest(session)


def test_foreign_session_json(session):
    (session / layout.SESSION_FILE).write_text(json.dumps({"format": "something-else"}))
    with pytest.raises(ProfileFormatError, match="not a neuron-explorer capture session"):
        ingest(session)


def test_session_from_a_newer_format(session):
    _edit_info(session, version="2.0.0")
    with pytest.raises(SchemaVersionError, match="newer neuron-explorer"):
        ingest(session)


def test_truncated_trace_is_read_up_to_the_cut_with_a_warning(session):
    trace = session / layout.SYSTEM_TRACE_FILE
    data = trace.read_bytes()
    trace.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 20])  # cut the last record in half
    profile = Profile(ingest(session))
    assert profile.table("ExecutionInfo").num_rows == 2
    assert any(w["category"] == "Truncated Trace" for w in profile.table("Warning").to_pylist())


def test_garbage_in_the_middle_of_the_trace_names_the_line(session):
    trace = session / layout.SYSTEM_TRACE_FILE
    lines = trace.read_text().splitlines(keepends=True)
    lines.insert(1, "\x00\x01 not json\n")
    trace.write_text("".join(lines))
    with pytest.raises(ProfileFormatError, match=r"system_trace.jsonl, line 2: not a JSON record"):
        ingest(session)


def test_a_record_with_a_wrong_field_type(session):
    trace = session / layout.SYSTEM_TRACE_FILE
    lines = trace.read_text().splitlines()
    record = json.loads(lines[0])
    record["start_ns"] = "soon"
    trace.write_text("\n".join([json.dumps(record)] + lines[1:]) + "\n")
    with pytest.raises(ProfileFormatError, match=r"line 1: field 'start_ns' is 'soon'"):
        ingest(session)


def test_missing_neff_names_the_file(session):
    (neff,) = (session / layout.NEFF_DIR).glob("*.neff")
    neff.unlink()
    with pytest.raises(MissingNeffError, match=f"NEFF {neff.name} is missing from the profile"):
        ingest(session)
    # without the device profile the session is still viewable
    profile = Profile(ingest(session, ignore_device_profile=True))
    assert profile.table("ExecutionInfo").num_rows == 3 and profile.table("Instruction").num_rows == 0


def test_corrupt_neff_names_the_file(session):
    (neff,) = (session / layout.NEFF_DIR).glob("*.neff")
    neff.write_bytes(b"NEFF but not really")
    with pytest.raises(ProfileFormatError, match=f"NEFF .*{neff.name} is unreadable"):
        ingest(session)


def test_corrupt_device_trace(session):
    (part,) = (session / layout.DEVICE_DIR).glob("*.instructions.parquet")
    part.write_bytes(part.read_bytes()[:100])
    with pytest.raises(ProfileFormatError, match=f"device trace .*{part.name} is corrupt, truncated or not Parquet"):
        ingest(session)


def test_foreign_device_trace(session):
    (part,) = (session / layout.DEVICE_DIR).glob("*.instructions.parquet")
    pq.write_table(pa.table({"x": [1, 2]}), part)
    with pytest.raises(ProfileFormatError, match="was not written by neuron-explorer"):
        ingest(session)


def test_a_failed_ingest_leaves_no_profile(session):
    (neff,) = (session / layout.NEFF_DIR).glob("*.neff")
    neff.unlink()
    with pytest.raises(MissingNeffError):
        ingest(session)
    assert not (session / layout.PROFILE_DIR).exists()
    assert not (session / (layout.PROFILE_DIR + ".partial")).exists()


def test_corrupt_truncated_and_foreign_profile_tables(session):
    profile_dir = ingest(session)
    table = profile_dir / "Instruction.parquet"
    good = table.read_bytes()
    table.write_bytes(good[: len(good) // 2])
    with pytest.raises(ProfileFormatError, match="Instruction.parquet is corrupt, truncated or not Parquet"):
        Profile(profile_dir).table("Instruction")
    pq.write_table(pa.table({"start_ts": [1]}), table)
    with pytest.raises(ProfileFormatError, match="not neuron-explorer's Instruction table"):
        Profile(profile_dir).table("Instruction")


def test_profile_from_a_newer_schema(session):
    profile_dir = ingest(session)
    path = profile_dir / "Summary.parquet"
    t = pq.read_table(path)
    meta = dict(t.schema.metadata)
    meta[b"neuron_explorer.profile_schema_version"] = b"9.0.0"
    pq.write_table(t.replace_schema_metadata(meta), path)
    with pytest.raises(SchemaVersionError, match="Summary.parquet has format version 9.0.0"):
        Profile(profile_dir).table("Summary")


def test_a_stale_profile_is_ingested_again(session):
    first = open_profile(session)
    assert first.table("ExecutionInfo").num_rows == 3
    trace = session / layout.SYSTEM_TRACE_FILE
    trace.write_text("".join(trace.read_text().splitlines(keepends=True)[:1]))
    assert open_profile(session).table("ExecutionInfo").num_rows == 1


def test_not_a_profile_at_all(tmp_path):
    with pytest.raises(ExplorerError, match="holds no capture session"):
        open_profile(tmp_path)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_profile(tmp_path / "missing")
    two = tmp_path / "two"
    for n in range(2):
        shutil.copytree(tmp_path, two / f"h_pid_{n}" / "s", ignore=shutil.ignore_patterns("two"))
        (two / f"h_pid_{n}" / "s" / layout.SESSION_FILE).write_text("{}")
    with pytest.raises(ExplorerError, match="holds 2 capture sessions"):
        open_profile(two)
