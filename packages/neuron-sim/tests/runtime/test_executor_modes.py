"""NEURON_SIM_MODE and the executor registry: fast falls back to exact without a graph form."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ExactExecutor
from neuron_sim.executor import FastExecutor, resolve
from neuron_sim.runtime import known_modes, register_executor, unregister_executor


class CountingExecutor(ExactExecutor):
    runs: list = []

    def run(self, program, buffers=None, reset=True):
        CountingExecutor.runs.append(program.name)
        return super().run(program, buffers, reset)


@pytest.fixture
def fast_registered():
    CountingExecutor.runs = []
    register_executor("fast", CountingExecutor)
    yield CountingExecutor.runs
    unregister_executor("fast")


def launch_and_record(rt, program, bufs):
    records = []
    rt.trace.subscribe(records.append)
    rt.device(0).launch(program, bufs)
    rt.synchronize()
    return records[0]


def test_a_program_without_a_graph_form_runs_exact_under_fast(h):
    rt = h.make_runtime(NEURON_SIM_MODE="fast")
    bufs = h.copy_buffers()
    rec = launch_and_record(rt, h.copy_program(), bufs)
    assert rec.executor == "exact"
    np.testing.assert_array_equal(bufs["y"], bufs["x"])


def test_registered_fast_executor_runs_programs_with_a_graph(h, fast_registered):
    rt = h.make_runtime(NEURON_SIM_MODE="fast")
    program = h.copy_program()
    program.graph = {"nodes": [{"op": "copy", "inputs": ["x"], "outputs": ["y"]}]}
    rec = launch_and_record(rt, program, h.copy_buffers())
    assert rec.executor == "fast"
    assert fast_registered == [program.name]


def test_fast_falls_back_for_programs_without_a_graph(h, fast_registered):
    rt = h.make_runtime(NEURON_SIM_MODE="fast")
    rec = launch_and_record(rt, h.copy_program(), h.copy_buffers())
    assert rec.executor == "exact"
    assert fast_registered == []


def test_fast_is_the_default_mode(h):
    assert h.make_runtime().config.sim_mode == "fast"


def test_exact_mode_ignores_the_graph(h, fast_registered):
    rt = h.make_runtime(NEURON_SIM_MODE="exact")
    program = h.copy_program()
    program.graph = {"nodes": []}
    assert launch_and_record(rt, program, h.copy_buffers()).executor == "exact"
    assert fast_registered == []


def test_new_modes_become_valid_env_values(h):
    register_executor("debug", CountingExecutor)
    try:
        assert "debug" in known_modes()
        assert h.make_runtime(NEURON_SIM_MODE="debug").config.sim_mode == "debug"
    finally:
        unregister_executor("debug")
    assert "debug" not in known_modes()


def test_registry_rejects_bad_input():
    with pytest.raises(ValueError):
        register_executor("Fast", CountingExecutor)
    with pytest.raises(TypeError):
        register_executor("x", 3)
    with pytest.raises(KeyError, match="no executor mode 'nope'"):
        unregister_executor("nope")


def test_unregistering_a_built_in_mode_brings_its_executor_back(h):
    register_executor("fast", CountingExecutor)
    unregister_executor("fast")
    rt = h.make_runtime(NEURON_SIM_MODE="fast")
    program = h.copy_program()
    program.graph = {"inputs": [], "nodes": [], "outputs": []}
    assert isinstance(resolve("fast", program).make(rt.config.arch), FastExecutor)
    assert resolve("fast", h.copy_program()).mode == "exact"  # no graph form: exact runs it


def uninitialized_read_program(h):
    """y = x + t, where the SBUF tile t is never written."""
    from neuron_sim import ProgramBuilder
    from neuron_sim.isa import DmaCopy, TensorTensor

    b = ProgramBuilder("reads_unwritten_sbuf", h.make_runtime().config.arch)
    x = b.input("x", (128, 64), "float32")
    y = b.output("y", (128, 64), "float32")
    a, t = b.sbuf((128, 64), "float32"), b.sbuf((128, 64), "float32")
    b.emit(DmaCopy(dst=a[:, :], src=x[:, :]))
    b.emit(TensorTensor(dst=a[:, :], in0=a[:, :], in1=t[:, :], op="add"))
    b.emit(DmaCopy(dst=y[:, :], src=a[:, :]))
    return b.build()


def test_executor_options_reach_the_executor_and_kept_warnings_come_back_in_the_reports(h, recwarn):
    rt = h.make_runtime()
    q = rt.device(0).default_queue
    program = uninitialized_read_program(h)
    options = {"uninitialized": "warn", "issue_warnings": False}
    subs = [q.launch(program, h.copy_buffers(), executor="exact", executor_options=options) for _ in range(2)]
    plain = q.launch(program, h.copy_buffers(), executor="exact")
    q.synchronize()
    for sub in subs:  # each run reports what it read, not only the first
        (report,) = sub.reports
        assert len(report.warnings) == 1 and "[memory.uninitialized_read] in1 reads 32768 byte(s) of SBUF" in report.warnings[0]
        assert sub.executor == "exact"
    assert plain.reports[0].warnings == ()
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]
    with pytest.raises(ValueError, match="executor 'exact' does not take options"):
        q.launch(program, h.copy_buffers(), executor="exact", executor_options={"colour": "blue"})
    with pytest.raises(ValueError, match="uninitialized must be one of"):
        q.launch(program, h.copy_buffers(), executor="exact", executor_options={"uninitialized": "loudly"})
    rt.synchronize()


def test_an_error_policy_passed_per_launch_fails_the_launch(h):
    from neuron_sim import ExecutionError, UninitializedReadError

    rt = h.make_runtime()
    q = rt.device(0).default_queue
    q.launch(uninitialized_read_program(h), h.copy_buffers(), executor="exact", executor_options={"uninitialized": "error"})
    with pytest.raises(ExecutionError) as info:
        q.synchronize()
    assert isinstance(info.value.original, UninitializedReadError)
