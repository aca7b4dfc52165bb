"""torch.profiler on the neuron device: ProfilerActivity.PrivateUse1 gives every op the simulated
device time of the launches it issued (key_averages' device columns), the Chrome trace a device
track with flows from the ops, and a NeuronConfig the Neuron Explorer session of the same steps."""

from __future__ import annotations

import json

import pytest
import torch
import torch_neuronx
from neuron_explorer import CaptureConfigError, open_profile
from tnx_helpers import op_records, sin_kernel
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, schedule
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def _device_us(prof) -> dict[str, float]:
    """Self device time (us) per op name, ops with none left out (the device events' own rows too)."""
    return {e.key: e.self_device_time_total for e in prof.key_averages()
            if e.self_device_time_total > 0 and e.device_type == DeviceType.CPU}


def _launch_us(fn) -> dict[str, float]:
    """The simulated device time (us) of the launches and copies ``fn`` issues, per op record name."""
    with op_records() as records:
        fn()
    out: dict[str, float] = {}
    for r in records:
        out[r.name] = out.get(r.name, 0.0) + (r.end_ns - r.start_ns) / 1e3
    return {k: v for k, v in out.items() if v > 0}


def _matmul_relu():
    x = torch.randn(64, 128, device="neuron")
    w = torch.randn(128, 96, device="neuron")
    return lambda: torch.relu(x @ w)


def test_key_averages_has_the_simulated_device_time_of_each_op():
    step = _matmul_relu()
    step()  # compiled and warm
    expected = _launch_us(step)
    with profile(activities=ACTIVITIES) as prof:
        step()
        torch.neuron.synchronize()
    got = _device_us(prof)
    assert set(got) == {"aten::mm", "aten::relu"}, got
    assert set(expected) == {"aten::mm", "aten::relu"}, expected
    for name, us in expected.items():
        assert got[name] == pytest.approx(us, rel=1e-3, abs=1e-3), name
    table = prof.key_averages().table(sort_by="self_privateuse1_time_total", row_limit=5)
    assert "aten::mm" in table and "Self NEURON" in table
    # aten::matmul calls aten::mm: its total includes the child's device time, its self time none.
    matmul = next(e for e in prof.key_averages() if e.key == "aten::matmul")
    assert matmul.device_time_total == pytest.approx(got["aten::mm"], rel=1e-3)


def test_device_time_adds_up_to_event_elapsed_time():
    step = _matmul_relu()
    step()
    start, end = torch.Event(device="neuron", enable_timing=True), torch.Event(device="neuron", enable_timing=True)
    with profile(activities=ACTIVITIES) as prof:  # the events time the same steps the profiler sees
        start.record()
        for _ in range(2):
            step()
        end.record()
        torch.neuron.synchronize()
    total_us = sum(_device_us(prof).values())
    assert total_us > 0
    assert total_us == pytest.approx(start.elapsed_time(end) * 1e3, rel=1e-3)


def test_chrome_trace_has_a_device_track_and_flows_from_the_ops(tmp_path):
    step = _matmul_relu()
    step()
    with profile(activities=ACTIVITIES) as prof:
        step()
        torch.neuron.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    assert len(kernels) == 2 and all(e["dur"] > 0 for e in kernels), kernels
    ops = {e["args"]["External id"]: e for e in events if e.get("cat") == "cpu_op"}
    issued_by = sorted(ops[k["args"]["External id"]]["name"] for k in kernels)  # linked to the op that issued it
    assert issued_by == ["aten::mm", "aten::relu"], issued_by
    assert sorted(k["name"] for k in kernels) == ["mm", "relu"]  # named by the launched program
    # A flow from a launch event inside each op, on the op's thread, to its kernel on the device track.
    starts = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e.get("cat") == "ac2g" and e["ph"] == "f"}
    assert len(starts) == len(ends) == 2 and set(starts) == set(ends)
    for flow, end in ends.items():
        kernel = next(k for k in kernels if k["ts"] == end["ts"] and k["tid"] == end["tid"])
        op = ops[kernel["args"]["External id"]]
        start = starts[flow]
        assert (start["pid"], start["tid"]) == (op["pid"], op["tid"])
        assert op["ts"] <= start["ts"] <= op["ts"] + op["dur"] and start["ts"] <= kernel["ts"]
    launches = [e for e in events if e.get("name") == "nrt_execute" and e.get("ph") == "X"]
    assert len(launches) == 2, launches
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "thread_name"}
    assert any(name.startswith("neuron:0 ") for name in names), names


def test_a_profile_without_privateuse1_has_no_device_time():
    step = _matmul_relu()
    step()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        step()
        torch.neuron.synchronize()
    assert _device_us(prof) == {}


def test_backward_ops_get_their_device_time():
    w = torch.randn(32, 16, device="neuron", requires_grad=True)
    x = torch.randn(8, 32, device="neuron")

    def step():
        (x @ w).relu().sum().backward()

    step()
    with profile(activities=ACTIVITIES) as prof:
        step()
        torch.neuron.synchronize()
    got = _device_us(prof)
    assert "aten::mm" in got and "aten::threshold_backward" in got, got


def test_an_nki_kernel_call_is_the_op_its_launch_is_attributed_to():
    x = torch.rand(128, 64, device="neuron")
    out = torch.empty_like(x)

    def step():
        sin_kernel(x, out)

    step()  # compiled and warm
    expected = _launch_us(step)
    assert set(expected) == {"sin_kernel"}, expected
    with profile(activities=ACTIVITIES) as prof:
        step()
        torch.neuron.synchronize()
    got = _device_us(prof)
    assert set(got) == {"nki::sin_kernel"}, got
    assert got["nki::sin_kernel"] == pytest.approx(expected["sin_kernel"], rel=1e-3)
    torch.testing.assert_close(out.cpu(), torch.sin(x.cpu()))


def test_ops_on_a_side_stream_are_on_their_own_track(tmp_path):
    step = _matmul_relu()
    step()
    side = torch.neuron.Stream()
    with profile(activities=ACTIVITIES) as prof:
        step()
        with torch.neuron.stream(side):
            step()
        torch.neuron.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    tracks = {e["tid"] for e in events if e.get("cat") == "kernel"}
    assert len(tracks) == 2, tracks


def test_schedule_profiles_only_the_active_steps(tmp_path):
    step = _matmul_relu()
    config = NeuronConfig(profile_output_dir=tmp_path)
    exporter = NeuronProfiler(config)
    traces = []

    def on_trace_ready(prof):
        traces.append(exporter.export_trace(prof))

    with profile(activities=ACTIVITIES, experimental_config=config, on_trace_ready=on_trace_ready,
                 schedule=schedule(wait=1, warmup=1, active=2, repeat=2)) as prof:
        for _ in range(8):
            step()
            torch.neuron.synchronize()
            prof.step()
    assert len(config.sessions) == 2 and len(traces) == 2
    assert traces == [s / "trace.json" for s in config.sessions]
    for trace in traces:
        kernels = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("cat") == "kernel"]
        assert len(kernels) == 4, kernels  # two active steps of mm + relu
    assert config.get_session_dir() == config.sessions[-1]


def test_neuron_config_writes_the_explorer_session_of_the_window(tmp_path):
    step = _matmul_relu()
    step()
    config = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir=tmp_path,
                          capture_enabled_for_nc="0")
    with NeuronProfiler(config).profile() as prof:
        for _ in range(3):
            step()
        torch.neuron.synchronize()
    session = config.get_session_dir()
    assert session.parent.parent == tmp_path and session.parent.name.endswith(f"_pid_{__import__('os').getpid()}")
    assert (session / "trace.json").is_file()
    ops = {r["node_name"]: r for r in open_profile(session).table("FrameworkNode", filters=[("level", "=", "op")]).to_pylist()}
    assert ops["aten::mm"]["launch_count"] == 3 and ops["aten::relu"]["launch_count"] == 3
    # The profile's device time per op is torch.profiler's.
    got = _device_us(prof)
    assert ops["aten::mm"]["device_time_ns"] / 1e3 == pytest.approx(got["aten::mm"], rel=1e-3)


def test_correlate_device_time_false_leaves_the_device_columns_empty(tmp_path):
    step = _matmul_relu()
    step()
    config = NeuronConfig(profile_output_dir=tmp_path, correlate_device_time=False)
    with profile(activities=ACTIVITIES, experimental_config=config) as prof:
        step()
        torch.neuron.synchronize()
    assert _device_us(prof) == {}
    assert config.get_session_dir().is_dir()  # the Explorer session is still captured


def test_without_a_neuron_config_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    step = _matmul_relu()
    with profile(activities=ACTIVITIES):
        step()
        torch.neuron.synchronize()
    assert list(tmp_path.iterdir()) == []


def test_legacy_profiler_times_ops_by_the_device_clock():
    step = _matmul_relu()
    step()
    expected = _launch_us(step)
    with torch.autograd.profiler.profile(use_device="neuron") as prof:
        step()
        torch.neuron.synchronize()
    got = {e.key: e.self_device_time_total for e in prof.key_averages() if e.self_device_time_total > 0 and e.device_type == DeviceType.CPU}
    # The legacy path keeps whole microseconds of each op's device time.
    assert set(got) == {"aten::mm", "aten::relu"}, got
    for name, us in expected.items():
        assert got[name] == pytest.approx(us, abs=1.0), name


def test_bad_configs_name_the_value(tmp_path):
    with pytest.raises(CaptureConfigError, match=r"NeuronCore\(s\) \[99\]"):
        NeuronConfig(capture_enabled_for_nc="99")
    with pytest.raises(CaptureConfigError, match="capture_enabled_for_nc='0,x'"):
        NeuronConfig(capture_enabled_for_nc="0,x")
    with pytest.raises(TypeError, match="ProfileMode members, got 'DEVICE'"):
        NeuronConfig(modes=["DEVICE"])
    with pytest.raises(CaptureConfigError, match="max_events_per_nc=0"):
        NeuronConfig(max_events_per_nc=0)
    with pytest.raises(RuntimeError, match="no profiled window has finished"):
        NeuronProfiler(NeuronConfig(profile_output_dir=tmp_path)).export_trace(object())
    with pytest.raises(TypeError, match="takes a NeuronConfig"):
        NeuronProfiler(torch_neuronx)


def test_neff_cache_dir_copies_the_neffs_compiled_in_the_window(tmp_path, monkeypatch):
    # A disk cache of this test's own: NEFFs an earlier run left in the shared one would load
    # from disk instead of being compiled in the window.
    cache_dir = tmp_path / "neff-cache"
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(cache_dir))
    config = NeuronConfig(profile_output_dir=tmp_path / "profiles", neff_cache_dir=cache_dir)
    x = torch.randn(3, 77, 5, device="neuron")  # a shape no other test compiles
    with NeuronProfiler(config).profile():
        torch.tanh(x * 3.0)
        torch.neuron.synchronize()
    copied = list((config.get_session_dir() / "neff_cache").glob("*.neff"))
    assert len(copied) >= 2, copied  # the mul and the tanh
