"""A launch whose loop bounds are read at run time runs when it is submitted (after the work
queued before it) and takes its place on the timeline with the timing of the iterations it ran;
its errors are raised at the launch, naming it, and leave its outputs invalid like any failure."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ExecutionError, InvalidMemoryError, Program, TensorDecl
from neuron_sim.executor import exact
from neuron_sim.isa import DmaCopy, LoopEnd, LoopStart, Memset, RegisterLoad, TensorScalar
from neuron_sim.memory.access_pattern import SBUF, hbm, onchip
from neuron_sim.timing import estimate
from neuron_sim.trace import TraceSession

from .conftest import ARCH


def counted_loop(name="counted"):
    """out[0, 0] = n, counting to the bound n read from HBM tensor "n" at run time."""
    acc = onchip(SBUF, "float32", 0, 1, (1,), 0)
    slot = onchip(SBUF, "int32", 0, 1, (1,), 64)
    n_hbm = hbm("n", "int32", (1, 1), 0, None)
    out_hbm = hbm("out", "float32", (1, 1), 0, None)
    insts = [
        Memset(dst=acc, value=0.0),
        DmaCopy(dst=slot, src=n_hbm),
        RegisterLoad(register="n", src=slot),
        LoopStart(register="i", upper="n"),
        TensorScalar(dst=acc, src=acc, op0="add", operand0=1.0),
        LoopEnd(register="i"),
        DmaCopy(dst=out_hbm, src=acc),
    ]
    tensors = [TensorDecl("n", (1, 1), "int32", "input"), TensorDecl("out", (1, 1), "float32", "output")]
    return Program(name, tensors, insts, ARCH.name)


def test_the_launch_is_timed_by_the_iterations_it_ran(runtime):
    q = runtime.device(0).default_queue
    program = counted_loop()
    subs, outs = [], []
    for n in (3, 40):
        out = np.zeros((1, 1), np.float32)
        subs.append(q.launch(program, {"n": np.array([[n]], np.int32), "out": out}))
        outs.append(out)
    q.synchronize()
    assert [float(o[0, 0]) for o in outs] == [3.0, 40.0]
    for sub, n in zip(subs, (3, 40)):
        (report,) = sub.reports
        assert list(report.trip_counts.values()) == [[n]]
        assert sub.device_time_ns == pytest.approx(estimate(program, ARCH, dict(report.trip_counts)).total_ns)
    assert subs[1].device_time_ns > subs[0].device_time_ns
    assert subs[1].start_ns == pytest.approx(subs[0].end_ns) and subs[0].launch_id < subs[1].launch_id


def test_a_failing_run_time_loop_launch_raises_at_the_launch_and_leaves_its_output_invalid(runtime, monkeypatch):
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 50)
    dev = runtime.device(0)
    out = dev.allocate(4, tag="out")
    with pytest.raises(ExecutionError, match=r"launch 'counted' \(#\d+\) failed") as info:
        dev.launch(counted_loop(), {"n": np.array([[51]], np.int32), "out": out})  # a runaway loop
    assert f"'counted' (#{info.value.launch_id}) failed" in str(info.value) and info.value.launch_name == "counted"
    later = dev.launch(counted_loop("later"), {"n": np.array([[2]], np.int32), "out": np.zeros((1, 1), np.float32)})
    assert later.launch_id == info.value.launch_id + 1  # the failed launch took its id in submission order
    with pytest.raises(InvalidMemoryError):
        dev.check_valid(out.address, 4)


def test_a_failing_run_time_loop_launch_is_published_with_its_error(runtime, monkeypatch):
    """A profiler sees the failed launch: its record, with its id and error, where it would have started."""
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 50)
    q = runtime.device(0).default_queue
    earlier = q.submit(lambda: None, device_time_ns=500.0, name="earlier")
    with TraceSession(sink=runtime.device(0).trace) as session:
        with pytest.raises(ExecutionError) as info:
            q.launch(counted_loop(), {"n": np.array([[51]], np.int32), "out": np.zeros((1, 1), np.float32)})
    (record,) = [r for r in session.records if r.name == "counted"]
    assert record.launch_id == info.value.launch_id and record.kind == "neff"
    assert record.error is not None and type(info.value.original).__name__ in record.error, record.error
    assert record.start_ns == record.end_ns == earlier.end_ns
    assert record.host_end_ns >= record.host_start_ns
