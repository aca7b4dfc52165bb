"""nki.benchmark: warm-up and timed iterations that really run, latency percentiles in
microseconds of simulated device time, the kernel's NEFF and a trace of its launches."""

import json

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.neff import Neff
from neuron_sim.runtime import get_runtime
from nki_helpers import rand

PERCENTILES = (0, 1, 10, 25, 50, 90, 99, 100)


def _matmul_body(lhsT, rhs):
    out = nl.ndarray((lhsT.shape[1], rhs.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray((lhsT.shape[1], rhs.shape[1]), nl.float32, buffer=nl.psum)
    for k in nl.affine_range(lhsT.shape[0] // 128):
        a = nl.ndarray((128, lhsT.shape[1]), lhsT.dtype, buffer=nl.sbuf)
        b = nl.ndarray((128, rhs.shape[1]), rhs.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=lhsT[k * 128:(k + 1) * 128, :])
        nisa.dma_copy(dst=b, src=rhs[k * 128:(k + 1) * 128, :])
        nisa.nc_matmul(dst=acc, stationary=a, moving=b)
    res = nl.ndarray(acc.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=res, src=acc)
    nisa.dma_copy(dst=out, src=res)
    return out


@nki.benchmark(warmup=2, iters=5)
def matmul_bench(lhsT, rhs):
    return _matmul_body(lhsT, rhs)


def _exp_body(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(x)))
    return out


@nki.benchmark
def exp_bench_bare(x):  # the defaults: 10 warm-up and 100 timed launches per call
    return _exp_body(x)


LHS, RHS = rand((512, 128), seed=1), rand((512, 512), seed=2)


def test_decorator_form_records_latency_equal_to_the_timing_model():
    out = matmul_bench(LHS, RHS)
    np.testing.assert_allclose(out, LHS.T @ RHS, rtol=1e-4, atol=1e-4)
    result = matmul_bench.benchmark_result
    total_ns = matmul_bench.compile((LHS, RHS), {}).timing()[0].total_ns
    assert (result.warmup, result.iters, len(result.nc_latency.samples_us)) == (2, 5, 5)
    for p in PERCENTILES:
        assert result.nc_latency.get_latency_percentile(p) == pytest.approx(total_ns / 1e3)
    assert result.timing_summary["total_time_ns"] == pytest.approx(total_ns)


def test_timing_summary_is_per_engine():
    matmul_bench(LHS, RHS)
    summary = matmul_bench.benchmark_result.timing_summary
    for engine in ("tensor", "vector", "scalar", "gpsimd", "sync"):
        assert f"{engine}_active_time_ns" in summary and f"{engine}_instruction_count" in summary
    assert summary["tensor_instruction_count"] >= 4
    assert summary["dma_transfer_bytes"] >= LHS.nbytes + RHS.nbytes
    assert summary["model_flops"] == 2 * 512 * 128 * 512
    assert 0 < summary["mfu_estimated_percent"] <= 100


def test_bare_decorator_and_call_forms_agree():
    x = rand((128, 16), seed=5)
    np.testing.assert_allclose(exp_bench_bare(x), np.exp(x), rtol=1e-6)
    bare = exp_bench_bare.benchmark_result
    assert (bare.warmup, bare.iters, len(bare.nc_latency.samples_us)) == (10, 100, 100)
    called = nki.benchmark(nki.jit(_exp_body), warmup=1, iters=2)
    called(x)
    assert called.benchmark_result.nc_latency.get_latency_percentile(50) == bare.nc_latency.get_latency_percentile(50)


def test_latency_is_deterministic_and_grows_with_work():
    matmul_bench(LHS, RHS)
    first = matmul_bench.benchmark_result.nc_latency.get_latency_percentile(99)
    matmul_bench(LHS, RHS)
    assert matmul_bench.benchmark_result.nc_latency.get_latency_percentile(99) == first
    matmul_bench(rand((1024, 128), seed=3), RHS[:1, :].repeat(1024, axis=0))
    assert matmul_bench.benchmark_result.nc_latency.get_latency_percentile(99) > first


def test_percentile_out_of_range():
    matmul_bench(LHS, RHS)
    with pytest.raises(ValueError, match="percentile"):
        matmul_bench.benchmark_result.nc_latency.get_latency_percentile(101)


def test_trn3_target_gives_a_different_valid_timing(monkeypatch):
    matmul_bench(LHS, RHS)
    trn2 = matmul_bench.benchmark_result
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    out = matmul_bench(LHS, RHS)
    trn3 = matmul_bench.benchmark_result
    np.testing.assert_allclose(out, LHS.T @ RHS, rtol=1e-4, atol=1e-4)
    assert trn2.timing_summary["target"] == "trn2" and trn3.timing_summary["target"] == "trn3"
    t2, t3 = (r.nc_latency.get_latency_percentile(50) for r in (trn2, trn3))
    assert t3 > 0 and np.isfinite(t3) and t3 != t2
    assert trn3.timing_summary["total_time_ns"] == pytest.approx(t3 * 1e3)


def test_lnc2_benchmark_reports_the_slower_core():
    @nki.benchmark
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = x.shape[0] // nl.num_programs()
        i = nl.program_id(0)
        t = nl.load(x[i * rows:(i + 1) * rows, :])
        nl.store(out[i * rows:(i + 1) * rows, :], nl.exp(t))
        return out

    x = rand((256, 256), seed=4)
    np.testing.assert_allclose(halves[2](x), np.exp(x), rtol=1e-6)
    result = halves.benchmark_result  # recorded on the kernel, also when launched as halves[2]
    cores = result.timing_summary["cores"]
    assert len(cores) == 2
    assert result.nc_latency.get_latency_percentile(50) == pytest.approx(max(c["total_time_ns"] for c in cores) / 1e3)


def test_warmup_and_timed_iterations_are_launches(records):
    kernel = nki.benchmark(nki.jit(_matmul_body), warmup=3, iters=4)
    kernel(LHS, RHS)
    launches = [r for r in records if r.name == "_matmul_body"]
    assert len(launches) == 7 and all(r.executor == "exact" and r.queue == "nki" for r in launches)
    timed = [r.duration_ns / 1e3 for r in launches[3:]]
    assert list(kernel.benchmark_result.nc_latency.samples_us) == timed


def test_every_iteration_starts_from_the_callers_arrays():
    @nki.benchmark(warmup=2, iters=3)
    def add_one_in_place(x):
        nl.store(x, nl.add(nl.load(x), 1.0))

    x = np.zeros((128, 8), np.float32)
    add_one_in_place(x)
    np.testing.assert_array_equal(x, 1.0)  # one call's effect, not five


def test_save_neff_name_writes_a_neff_that_runs(tmp_path):
    path = tmp_path / "matmul.neff"
    kernel = nki.benchmark(nki.jit(_matmul_body), warmup=0, iters=1, save_neff_name=str(path))
    out = kernel(LHS, RHS)
    assert kernel.benchmark_result.neff_paths == (str(path),)
    neff = Neff.load(path)
    compiled = kernel.compile((LHS, RHS), {})
    assert [i.to_dict() for i in neff.program.instructions] == [i.to_dict() for i in compiled.programs[0].instructions]
    assert neff.timing_summary["total_time_ns"] == pytest.approx(kernel.last_device_time_ns)
    assert neff.metadata["kernel"] == "_matmul_body"
    (output,) = neff.program.outputs
    again = np.empty(output.shape, np.float32)
    queue = get_runtime().device(0).new_queue()
    queue.launch(neff, {"lhsT": LHS, "rhs": RHS, output.name: again}, executor="exact")
    queue.synchronize()
    np.testing.assert_array_equal(again, out)


def test_save_trace_name_writes_a_chrome_trace_of_the_timed_launches(tmp_path):
    path = tmp_path / "matmul.json"
    kernel = nki.benchmark(nki.jit(_matmul_body), warmup=1, iters=2, save_trace_name=str(path))
    kernel(LHS, RHS)
    assert kernel.benchmark_result.trace_path == str(path)
    doc = json.loads(path.read_text())
    assert doc["otherData"] == {"format": "nki-trace", "version": 1, "kernel": "_matmul_body", "target": "trn2"}
    events = doc["traceEvents"]
    launches = [e for e in events if e.get("cat") == "launch"]
    assert len(launches) == 2 and {e["name"] for e in launches} == {"_matmul_body"}
    samples = kernel.benchmark_result.nc_latency.samples_us
    assert [e["dur"] for e in launches] == pytest.approx(list(samples))
    # one after another on the device (to float rounding of the absolute clock)
    assert launches[1]["ts"] >= launches[0]["ts"] + launches[0]["dur"] - 1e-6
    instructions = [e for e in events if e.get("cat") == "instruction"]
    per_launch = len(kernel.last_timing[0].instructions)
    assert len(instructions) == 2 * per_launch
    for e in instructions:  # each inside its launch, pointing at the kernel's source
        launch = next(x for x in launches if x["args"]["launch_id"] == e["args"]["launch_id"])
        assert launch["ts"] - 1e-6 <= e["ts"] and e["ts"] + e["dur"] <= launch["ts"] + launch["dur"] + 1e-6
        assert e["args"]["source"].startswith(__file__)
    names = {e["args"]["name"] for e in events if e.get("name") == "thread_name"}
    assert {"queue nki", "TensorMatrix", "TensorE"} <= names


def test_lnc2_kernel_saves_a_neff_per_core_and_traces_both(tmp_path):
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        rows = x.shape[0] // nl.num_programs()
        i = nl.program_id(0)
        nl.store(out[i * rows:(i + 1) * rows, :], nl.exp(nl.load(x[i * rows:(i + 1) * rows, :])))
        return out

    kernel = nki.benchmark(halves, warmup=0, iters=1, save_neff_name=str(tmp_path / "h.neff"),
                           save_trace_name=str(tmp_path / "h.json"))
    x = rand((256, 64), seed=9)
    np.testing.assert_allclose(kernel[2](x), np.exp(x), rtol=1e-6)
    paths = kernel.benchmark_result.neff_paths
    assert paths == (str(tmp_path / "h_core0.neff"), str(tmp_path / "h_core1.neff"))
    assert [Neff.load(p).metadata["core"] for p in paths] == [0, 1]
    names = {e["args"]["name"] for e in json.loads((tmp_path / "h.json").read_text())["traceEvents"]
             if e.get("name") == "thread_name"}
    assert any(n.startswith("core0 ") for n in names) and any(n.startswith("core1 ") for n in names)


def test_benchmark_settings_are_checked():
    with pytest.raises(ValueError, match="iters"):
        nki.benchmark(nki.jit(_matmul_body), iters=0)
    with pytest.raises(ValueError, match="warmup"):
        nki.benchmark(nki.jit(_matmul_body), warmup=-1)


def test_baremetal_saves_the_neff_of_its_one_launch(tmp_path, records):
    run = nki.baremetal(nki.jit(_matmul_body), save_neff_name="bm.neff", artifacts_dir=str(tmp_path))
    np.testing.assert_allclose(run(LHS, RHS), LHS.T @ RHS, rtol=1e-4, atol=1e-4)
    assert len([r for r in records if r.name == "_matmul_body"]) == 1
    assert Neff.load(tmp_path / "bm.neff").metadata["kernel"] == "_matmul_body"


@pytest.mark.parametrize("num_execs,profile_nth,profiled", [(20, 10, [10, 20]), (3, 1, [1, 2, 3]), (2, 5, [5])])
def test_profile_num_execs_profiles_every_nth_execution(tmp_path, num_execs, profile_nth, profiled):
    import neuronxcc.nki as legacy  # nki.profile is the legacy API's

    @legacy.profile(working_directory=str(tmp_path), save_neff_name="k.neff", save_trace_name="run.ntff",
                 num_execs=num_execs, profile_nth=profile_nth)
    def add(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.load(b)))
        return out

    a, b = rand((128, 256), seed=3), rand((128, 256), seed=4)
    assert add(a, b) is None
    kernel = add.kernel
    assert kernel.benchmark_result.iters == max(num_execs, profile_nth)  # every execution ran
    traces = sorted(p.name for p in tmp_path.glob("*.ntff"))
    assert traces == sorted("run.ntff" if n == 1 else f"run_exec_{n}.ntff" for n in profiled)
    reports = sorted((tmp_path / "json_reports").iterdir())
    assert len(reports) == len(profiled)
    for path in reports:
        summary = json.loads(path.read_text())
        assert summary["total_time_ns"] == pytest.approx(kernel.last_device_time_ns)
    for name in traces:  # one execution's launch per trace
        events = json.loads((tmp_path / name).read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        assert any(e.get("ph") == "X" for e in events)
    with pytest.raises(ValueError, match="num_execs"):
        legacy.profile(working_directory=str(tmp_path), num_execs=0)
