"""The recorder: what each device-profile mode, filter and limit keeps, and the session it writes."""

import json
import threading

import pytest
from explorer_helpers import buffers_for, capture, chain_program, private_runtime
from neuron_explorer import CaptureConfig, CaptureConfigError, Recorder, open_profile
from neuron_explorer.session import layout


def _run(tmp_path, config, launches=3, cores="0-1", second_core=False):
    program = chain_program()

    def work(rt):
        for i in range(launches):
            rt.device(0).launch(program, buffers_for(program, i), name="aten::exp")
        if second_core:
            rt.device(1).launch(program, buffers_for(program), name="aten::exp")
        rt.device(0).submit(lambda: None, name="fallback_op")

    rec = capture(tmp_path, work, config, cores)
    return rec, [json.loads(line) for line in (rec.session_dir / layout.SYSTEM_TRACE_FILE).read_text().splitlines()]


def test_session_directory_layout(tmp_path):
    rec, lines = _run(tmp_path, CaptureConfig(device_profile="session"))
    host_dir, stamp = rec.session_dir.parent, rec.session_dir.name
    assert host_dir.parent == tmp_path and "_pid_" in host_dir.name and stamp[:8].isdigit()
    info = json.loads((rec.session_dir / layout.SESSION_FILE).read_text())
    assert info["complete"] and info["tasks"] == 4 and info["format"] == layout.SESSION_FORMAT
    assert len(list((rec.session_dir / layout.NEFF_DIR).glob("*.neff"))) == 1  # one program, written once
    assert len(list((rec.session_dir / layout.DEVICE_DIR).glob("*.instructions.parquet"))) == 1
    assert [line["device_profiled"] for line in lines] == [True, True, True, False]


def test_model_mode_profiles_the_first_execution_after_warmup(tmp_path):
    _, lines = _run(tmp_path, CaptureConfig(device_profile="model", num_warmup=1), launches=3, second_core=True)
    neff = sorted((line for line in lines if line["kind"] == "neff"), key=lambda line: line["launch_id"])
    assert [(line["nc"], line["device_profiled"]) for line in neff] == [(0, False), (0, True), (0, False), (1, False)]


def test_session_mode_skips_warmup_executions(tmp_path):
    _, lines = _run(tmp_path, CaptureConfig(device_profile="session", num_warmup=2), launches=3)
    assert [line["device_profiled"] for line in lines if line["kind"] == "neff"] == [False, False, True]


def test_system_profile_only_writes_no_device_traces(tmp_path):
    rec, lines = _run(tmp_path, CaptureConfig(device_profile="0"))
    assert not any(line["device_profiled"] for line in lines) and len(lines) == 4
    assert not (rec.session_dir / layout.NEFF_DIR).exists()
    profile = open_profile(rec.session_dir)
    assert profile.table("Instruction").num_rows == 0
    assert "no device profile" in profile.table("Warning").column("message").to_pylist()[0]


def test_core_filter_keeps_only_the_named_cores(tmp_path):
    _, lines = _run(tmp_path, CaptureConfig(device_profile="session", cores={1}), second_core=True)
    assert [line["nc"] for line in lines] == [1]


def test_event_type_filter_drops_tasks_with_no_kept_event(tmp_path):
    _, lines = _run(tmp_path, CaptureConfig(device_profile="0", event_types={"nc_exec_running"}))
    assert [line["events"] for line in lines] == [["nc_exec_running"]] * 3


def test_events_past_the_per_core_limit_are_dropped_and_reported(tmp_path):
    rec, lines = _run(tmp_path, CaptureConfig(device_profile="session", max_events_per_nc=2), launches=3)
    assert len(lines) == 2
    info = json.loads((rec.session_dir / layout.SESSION_FILE).read_text())
    assert info["dropped_per_nc"] == {"0": 2}
    warnings = open_profile(rec.session_dir).table("Warning").to_pylist()
    assert any(w["category"] == "Dropped Events" and "2 events of NeuronCore 0" in w["message"] for w in warnings)


def test_sources_of_the_programs_are_copied_into_the_session(tmp_path):
    rec, _ = _run(tmp_path, CaptureConfig(device_profile="session"))
    index = json.loads((rec.session_dir / layout.SOURCES_DIR / layout.SOURCES_INDEX).read_text())
    (original, stored), = index.items()
    assert original.endswith("explorer_helpers.py")
    assert (rec.session_dir / layout.SOURCES_DIR / stored).read_bytes() == open(original, "rb").read()


def test_concurrent_queues_are_all_recorded(tmp_path):
    program = chain_program()

    def work(rt):
        def issue(device):
            q = rt.device(device).new_queue("worker")
            for i in range(20):
                q.launch(program, buffers_for(program, i), name=f"op{device}")

        threads = [threading.Thread(target=issue, args=(d,)) for d in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    rec = capture(tmp_path, work, CaptureConfig(device_profile="session"))
    lines = (rec.session_dir / layout.SYSTEM_TRACE_FILE).read_text().splitlines()
    assert len(lines) == 40 and len({json.loads(x)["launch_id"] for x in lines}) == 40


def test_recorder_refuses_cores_that_do_not_exist_before_capturing(tmp_path):
    runtime, sink = private_runtime("0")
    rec = Recorder(tmp_path, CaptureConfig(cores={0, 3}), sink=sink, cores_available=list(runtime.config.visible_cores))
    with pytest.raises(CaptureConfigError, match=r"\[3\]"):
        rec.start()
    assert not rec.capturing and sink.subscriber_count == 0 and not any(tmp_path.iterdir())


def test_a_recorder_captures_one_session(tmp_path):
    _, sink = private_runtime()
    rec = Recorder(tmp_path, sink=sink, cores_available=[0])
    with rec:
        with pytest.raises(RuntimeError, match="already capturing"):
            rec.start()
    with pytest.raises(RuntimeError, match="one session"):
        rec.start()
    assert sink.subscriber_count == 0


def test_host_cpu_and_memory_are_sampled_while_capturing(tmp_path):
    import time as _time

    program = chain_program()

    def work(rt):
        rt.device(0).launch(program, buffers_for(program), name="aten::exp")
        _time.sleep(0.35)  # a few sampling intervals

    rec = capture(tmp_path, work, CaptureConfig(device_profile="session", cpu_util=True, host_memory=True))
    profile = open_profile(rec.session_dir)
    cpu = profile.table("CpuUsage").to_pylist()
    memory = profile.table("HostMemUsage").to_pylist()
    assert len(memory) >= 2 and all(0 < m["used_percent"] < 100 and m["used_bytes"] > 0 for m in memory)
    averages = [c for c in cpu if c["cpu_id"] == "average"]
    assert len(averages) == len(memory) and all(0 <= c["util_percent"] <= 100 for c in cpu)
    assert {c["cpu_id"] for c in cpu} >= {"average", "0"}
    assert all(0 <= m["timestamp"] for m in memory) and memory == sorted(memory, key=lambda m: m["timestamp"])
