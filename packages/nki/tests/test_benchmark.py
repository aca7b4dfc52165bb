"""nki.benchmark: latency percentiles in microseconds of simulated device time."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
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


@nki.benchmark
def matmul_bench_bare(lhsT, rhs):
    return _matmul_body(lhsT, rhs)


LHS, RHS = rand((512, 128), seed=1), rand((512, 512), seed=2)


def test_decorator_form_records_latency_equal_to_the_timing_model():
    out = matmul_bench(LHS, RHS)
    np.testing.assert_allclose(out, LHS.T @ RHS, rtol=1e-4, atol=1e-4)
    result = matmul_bench.benchmark_result
    total_ns = matmul_bench.compile((LHS, RHS), {}).timing()[0].total_ns
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
    matmul_bench(LHS, RHS)
    matmul_bench_bare(LHS, RHS)
    called = nki.benchmark(nki.jit(_matmul_body), warmup=1, iters=1)
    called(LHS, RHS)
    latency = matmul_bench.benchmark_result.nc_latency.get_latency_percentile(50)
    assert matmul_bench_bare.benchmark_result.nc_latency.get_latency_percentile(50) == latency
    assert called.benchmark_result.nc_latency.get_latency_percentile(50) == latency


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
