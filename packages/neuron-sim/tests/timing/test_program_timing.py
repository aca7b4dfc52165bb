"""program_timing: a program's device time is computed once and reused by every launch - from the
same process's result, or from the summary a NEFF carries when this model made it."""

from __future__ import annotations

import dataclasses
import gc
import weakref

import numpy as np
import pytest
from neuron_sim import get_architecture
from neuron_sim.neff import Neff
from neuron_sim.programs import tiled_matmul
from neuron_sim.runtime import Runtime, RuntimeConfig
from neuron_sim.timing import RecordedTiming, estimate, per_program, program_timing
from neuron_sim.trace import TraceSink

TRN2 = get_architecture("trn2")


@pytest.fixture
def estimates(monkeypatch):
    """The programs the timing model is run on, in order."""
    calls = []
    real = per_program.estimate
    monkeypatch.setattr(per_program, "estimate", lambda p, a: calls.append(p) or real(p, a))
    return calls


def matmul():
    return tiled_matmul(128, 128, 512, dtype="float32", arch=TRN2)


def launch_records(neff_or_program, launches: int = 1, arch=TRN2):
    rt = Runtime(RuntimeConfig.from_env({}, arch=arch), blocking=True, trace=TraceSink())
    records = []
    rt.trace.subscribe(records.append)
    rng = np.random.default_rng(0)
    for _ in range(launches):
        rt.device(0).launch(neff_or_program, {"lhsT": rng.standard_normal((128, 128), np.float32),
                                              "rhs": rng.standard_normal((128, 512), np.float32),
                                              "out": np.zeros((128, 512), np.float32)})
    rt.synchronize()
    return records


def test_launches_of_one_program_share_one_result(estimates):
    program = matmul()
    records = launch_records(program, launches=3)
    assert estimates == [program]
    assert all(r.timing is program_timing(program, TRN2) for r in records)
    assert records[0].duration_ns == estimate(program, TRN2).total_ns


def test_a_result_dies_with_its_program():
    program = matmul()
    result = weakref.ref(program_timing(program, TRN2))
    del program
    gc.collect()
    assert result() is None


def test_a_neff_read_back_launches_on_its_recorded_summary(estimates):
    program = matmul()
    summary = estimate(program, TRN2).summary
    loaded = Neff.from_bytes(Neff(program, timing_summary=summary).to_bytes())
    (record,) = launch_records(loaded)
    assert estimates == []  # no timing model run for the launch
    assert isinstance(record.timing, RecordedTiming) and record.duration_ns == summary["total_time_ns"]
    # The per-instruction records (a trace reads them) come from the same model, on first use.
    expected = estimate(program, TRN2)
    assert [(r.opcode, r.start_ts, r.end_ts) for r in record.instructions()] == \
           [(r.opcode, r.start_ts, r.end_ts) for r in expected.instructions]
    assert len(estimates) == 1


@pytest.mark.parametrize("change", ["other model", "other target", "no model", "bad total"])
def test_a_summary_this_model_did_not_make_is_recomputed(estimates, change):
    program = matmul()
    summary = dict(estimate(program, TRN2).summary)
    true_ns = summary["total_time_ns"]
    summary["total_time_ns"] = 1.0  # what a stale summary would claim
    if change == "other model":
        summary["timing_model"] = "0" * 32
    elif change == "other target":
        summary["target"] = "trn3"
    elif change == "no model":
        del summary["timing_model"]
    else:
        summary["total_time_ns"] = "fast"
    (record,) = launch_records(Neff(program, timing_summary=summary))
    assert len(estimates) == 1 and record.duration_ns == true_ns


def test_a_summary_of_other_architecture_numbers_is_recomputed(estimates):
    # Same name, other numbers: a summary records the numbers it was computed with, not just the name.
    slower = dataclasses.replace(TRN2, tensor=dataclasses.replace(TRN2.tensor, clock_hz=TRN2.tensor.clock_hz / 4))
    program = matmul()
    summary = estimate(program, TRN2).summary
    (record,) = launch_records(Neff(program, timing_summary=summary), arch=slower)
    assert len(estimates) == 1
    assert record.duration_ns == estimate(program, slower).total_ns != summary["total_time_ns"]
