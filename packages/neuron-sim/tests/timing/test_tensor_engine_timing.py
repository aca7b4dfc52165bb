"""TensorE: MultiplyMoving cost formula, background LoadStationary, fp32 slowdown, throttling."""

from __future__ import annotations

import pytest
from helpers import TRN2, ps, sb
from neuron_sim import Program
from neuron_sim.isa import Matmul
from neuron_sim.timing import estimate


def _matmuls(n, dtype="bfloat16", accumulate=True, moving=512):
    st = sb(dtype, 128, 128)
    mv = sb(dtype, 128, moving, offset=1024)
    dst = ps("float32", 128, moving)
    return [Matmul(dst=dst, stationary=st, moving=mv, accumulate=accumulate and i > 0) for i in range(n)]


def _mm_records(timing):
    return [r for r in timing.instructions if r.opcode == "MATMUL"]


def test_multiply_moving_costs_one_cycle_per_moving_column():
    timing = estimate(Program("mm", [], _matmuls(200), "trn2"), TRN2)
    last = _mm_records(timing)[-1]  # past the throttling ramp
    assert last.duration_ns == pytest.approx(TRN2.tensor.cycles_to_ns(512))


def test_fp32_matmul_is_four_times_slower():
    bf = _mm_records(estimate(Program("mm", [], _matmuls(200), "trn2"), TRN2))[-1]
    fp = _mm_records(estimate(Program("mm", [], _matmuls(200, dtype="float32"), "trn2"), TRN2))[-1]
    assert fp.duration_ns == pytest.approx(4 * bf.duration_ns)


def test_small_moving_tiles_pay_the_pipeline_floor():
    timing = estimate(Program("mm", [], _matmuls(200, moving=16), "trn2"), TRN2)
    assert _mm_records(timing)[-1].duration_ns == pytest.approx(TRN2.tensor.cycles_to_ns(64))


def test_load_stationary_overlaps_the_previous_multiply():
    timing = estimate(Program("mm", [], _matmuls(50), "trn2"), TRN2)
    mms = _mm_records(timing)
    gaps = [b.start_ts - a.end_ts for a, b in zip(mms[10:], mms[11:])]
    assert max(gaps) == pytest.approx(0.0, abs=1e-6)
    loads = [r for r in timing.instructions if r.opcode == "LDWEIGHTS"]
    assert loads[20].start_ts < mms[19].end_ts


def test_tensor_engine_ramps_up_after_idle():
    timing = estimate(Program("mm", [], _matmuls(40), "trn2"), TRN2)
    mms = _mm_records(timing)
    assert mms[0].duration_ns == pytest.approx(2 * mms[-1].duration_ns)
    assert mms[0].performance_mode == "throttled"
    assert mms[-1].performance_mode == ""


def test_model_flops_count_two_per_mac():
    timing = estimate(Program("mm", [], _matmuls(3), "trn2"), TRN2)
    assert timing.summary["model_flops"] == 3 * 2 * 128 * 128 * 512


def test_fp8_double_row_contracts_twice_the_rows_in_the_time_of_one_bf16_pass():
    fp8 = [Matmul(dst=ps("float32", 128, 512), stationary=sb("float8_e4m3", 128, 256), moving=sb("float8_e4m3", 128, 1024, offset=1024),
                  perf_mode="double_row") for _ in range(200)]
    timing = estimate(Program("mm", [], fp8, "trn2"), TRN2)
    last = _mm_records(timing)[-1]
    assert last.duration_ns == pytest.approx(TRN2.tensor.cycles_to_ns(512))
    assert last.raw_flops == 2 * 256 * 128 * 512
