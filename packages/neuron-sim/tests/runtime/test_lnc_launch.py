"""An LNC=2 launch: one program per physical core of the logical core (an NKI ``kernel[2]``),
sharing HBM, launched as one task. The cores run at once, so the task's device time is the
longer program's, not the sum."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ProgramBuilder, ValidationError
from neuron_sim.isa import DmaCopy
from neuron_sim.timing import estimate

from .conftest import ARCH


def half_copy(core: int, bounces: int):
    """Core ``core`` copies its half of the rows of x [128, 64] to y, through SBUF ``bounces`` times
    (more bounces: a longer program)."""
    b = ProgramBuilder(f"half_copy_core{core}", ARCH)
    x = b.input("x", (128, 64), "float32")
    y = b.output("y", (128, 64), "float32")
    rows = slice(64 * core, 64 * core + 64)
    t = b.sbuf((64, 64), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[rows, :]))
    for _ in range(bounces):
        u = b.sbuf((64, 64), "float32")
        b.emit(DmaCopy(dst=u[:, :], src=t[:, :]))
        t = u
    b.emit(DmaCopy(dst=y[rows, :], src=t[:, :]))
    return b.build()


@pytest.fixture
def lnc2_runtime(h):
    rt = h.make_runtime(NEURON_LOGICAL_NC_CONFIG=2)
    yield rt
    rt.synchronize()


def test_two_programs_run_as_one_task_in_the_time_of_the_longer(lnc2_runtime, h):
    programs = [half_copy(0, bounces=6), half_copy(1, bounces=1)]
    times = [estimate(p, ARCH).total_ns for p in programs]
    assert times[0] > times[1]
    records = []
    lnc2_runtime.trace.subscribe(records.append)
    q = lnc2_runtime.device(0).default_queue
    bufs = h.copy_buffers()
    start = q.record_event()
    sub = q.launch(programs, bufs, name="kernel[2]")
    after = q.launch(programs[1], h.copy_buffers(seed=1))  # the next task starts when both cores are done
    end = q.record_event()
    q.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x"])  # each core wrote its half
    assert sub.device_time_ns == pytest.approx(max(times))
    assert [t.total_ns for t in sub.timings] == pytest.approx(times) and sub.timing is None
    assert after.start_ns == pytest.approx(sub.end_ns)
    assert start.elapsed_time(end) * 1e6 == pytest.approx(max(times) + times[1])
    launches = [r for r in records if r.name == "kernel[2]"]
    assert len(launches) == 1 and launches[0].launch_id == sub.launch_id
    assert launches[0].duration_ns == pytest.approx(max(times))


def test_the_programs_share_buffers_each_binding_what_it_declares(lnc2_runtime, h):
    # core 1's program has no tensor "x2": the buffer binds to core 0's only.
    b = ProgramBuilder("second_input", ARCH)
    x2 = b.input("x2", (128, 64), "float32")
    y = b.output("y", (128, 64), "float32")
    t = b.sbuf((128, 64), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x2[:, :]))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    q = lnc2_runtime.device(0).default_queue
    bufs = h.copy_buffers() | {"x2": np.full((128, 64), 3.0, np.float32)}
    q.launch([half_copy(0, 0), b.build()], bufs)  # core 1 overwrites y whole with x2, after core 0
    q.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x2"])
    with pytest.raises(ValidationError, match=r"launch.unknown_buffer.*\['nope'\]"):
        q.launch([half_copy(0, 0), half_copy(1, 0)], h.copy_buffers() | {"nope": np.zeros(4)})


def test_more_programs_than_physical_cores_are_refused(h):
    strict = h.make_runtime(NEURON_LOGICAL_NC_CONFIG=1)
    with pytest.raises(ValidationError, match=r"\[launch.lnc\] 2 programs .* logical core of 1 \(NEURON_LOGICAL_NC_CONFIG=1\)"):
        strict.device(0).launch([half_copy(0, 0), half_copy(1, 0)], h.copy_buffers())
    default = h.make_runtime()  # the simulator's default LNC: an LNC=2 kernel still runs, as NKI allows
    default.device(0).launch([half_copy(0, 0), half_copy(1, 0)], bufs := h.copy_buffers())
    default.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x"])
    with pytest.raises(ValidationError, match="launch.lnc"):
        default.device(0).launch([half_copy(0, 0)] * 3, h.copy_buffers())
    with pytest.raises(ValidationError, match="launch.programs"):
        default.device(0).launch([], h.copy_buffers())


def test_a_failing_core_fails_the_launch(lnc2_runtime, h):
    from neuron_sim import ExecutionError

    q = lnc2_runtime.device(0).default_queue
    q.launch([half_copy(0, 0), h.failing_program()], h.copy_buffers())
    with pytest.raises(ExecutionError, match="r_unset"):
        q.synchronize()
