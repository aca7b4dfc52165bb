"""A launch's call site (the framework user's ``file:line``, as torch-neuronx gives it for an eager
op): every Instruction row of that execution points at it, its StackFrame resolves to it and the
file is copied into the session; launches without one keep their program's own locations."""

import json
import shutil

import pytest
from explorer_helpers import buffers_for, capture, chain_program
from neuron_explorer import ProfileFormatError, ingest, open_profile
from neuron_explorer.session import layout

TRAIN_LINE = 7  # lines of this file the launches claim to come from
EVAL_LINE = 9


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    program = chain_program()
    sites = [f"{__file__}:{TRAIN_LINE}", None, f"{__file__}:{EVAL_LINE}", f"{__file__}:{TRAIN_LINE}"]

    def work(rt):
        for i, site in enumerate(sites):
            rt.device(0).launch(program, buffers_for(program, i), name="aten::exp", call_site=site)

    session = capture(tmp_path_factory.mktemp("sites"), work).session_dir
    return session, program, sites


def _frame_locations(profile) -> dict[str, tuple[str, int]]:
    """stack_frame_ids value -> (file, line) through the StackFrame tables."""
    files = {r["id"]: r["name"] for r in profile.table("StackFrameFileName").to_pylist()}
    lines = {r["id"]: (files[str(r["file_name_id"])], r["line_number"])
             for r in profile.table("StackFrameFileLocation").to_pylist()}
    return {f"[{r['id']}]": lines[str(r["file_location_id"])] for r in profile.table("StackFrame").to_pylist()}


def test_each_execution_points_at_its_own_call_site(run):
    session, program, sites = run
    profile = open_profile(session)
    frames = _frame_locations(profile)
    launches = [r["launch_id"] for r in profile.table("ExecutionInfo").to_pylist() if r["name"] == "aten::exp"]
    assert len(launches) == len(sites)
    for launch_id, site in zip(launches, sites, strict=True):
        rows = profile.table("Instruction", filters=[("launch_id", "=", launch_id)]).to_pylist()
        assert len(rows) == len(program.instructions)
        if site is None:  # the program's own lines (here: explorer_helpers.chain_program)
            assert [r["nki_source_location"] for r in rows] == [program.instructions[r["pc"]].location for r in rows]
            assert all(frames[r["stack_frame_ids"]][0].endswith("explorer_helpers.py") for r in rows)
        else:
            assert {r["nki_source_location"] for r in rows} == {site}
            assert {frames[r["stack_frame_ids"]] for r in rows} == {(__file__, int(site.rpartition(":")[2]))}


def test_the_call_site_file_is_captured_for_the_source_view(run):
    session, _, _ = run
    index = json.loads((session / layout.SOURCES_DIR / layout.SOURCES_INDEX).read_text())
    assert (session / layout.SOURCES_DIR / index[__file__]).read_bytes() == open(__file__, "rb").read()
    captured = {r["name"]: r["captured"] for r in open_profile(session).table("StackFrameFileName").to_pylist()}
    assert captured[__file__] is True


def test_a_call_site_that_is_not_a_string_names_the_line(run, tmp_path):
    session, _, _ = run
    copy = tmp_path / "copy"
    shutil.copytree(session, copy)
    trace = copy / layout.SYSTEM_TRACE_FILE
    lines = trace.read_text().splitlines()
    record = json.loads(lines[0])
    record["call_site"] = 42
    trace.write_text("\n".join([json.dumps(record)] + lines[1:]) + "\n")
    with pytest.raises(ProfileFormatError, match=r"line 1: field 'call_site' is 42, expected a 'file:line' string"):
        ingest(copy)
