"""compile_neff: program + timing summary + metadata; NEFFs launch on the runtime in both modes."""

import numpy as np
import pytest
from cc_helpers import Graph, random_inputs
from neuron_sim.neff import Neff
from neuron_sim.runtime import Runtime, RuntimeConfig
from neuronxcc.compiler import compile_graph, compile_neff


def graph():
    g = Graph("gelu_sum")
    x = g.add_input("x", (128, 300), "float32")
    b = g.add_input("b", (300,), "float32")
    h = g.add1("gelu", g.add1("add", x, g.add1("broadcast_in_dim", b, shape=(128, 300), dims=(1,))))
    g.set_outputs([h, g.add1("reduce", h, kind="max", dims=(1,))], ["h", "m"])
    return g


def test_neff_contents(tmp_path):
    neff = compile_neff(graph(), "trn2")
    assert neff.timing_summary and neff.metadata["compiler"] == "neuronx-cc"
    assert neff.metadata["target"] == "trn2"
    assert neff.program.graph is not None
    assert [(t.name, t.kind) for t in neff.program.tensors] == [("x", "input"), ("b", "input"), ("h", "output"), ("m", "output")]
    neff.save(tmp_path / "g.neff")
    loaded = Neff.load(tmp_path / "g.neff")
    assert loaded.program.to_dict() == neff.program.to_dict()
    assert loaded.timing_summary == neff.timing_summary


@pytest.mark.parametrize("target", ["trn2", "trn3"])
def test_compiles_for_each_target(target):
    program = compile_graph(graph(), target)
    assert program.target == target


@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_launch_on_the_runtime(mode):
    from neuron_sim.executor.fast import FastExecutor
    from neuron_sim.runtime import register_executor
    from neuron_sim.trace import TraceSink

    register_executor("fast", FastExecutor, requires_graph=True)  # other test modules may replace it
    neff = compile_neff(graph())
    inputs = random_inputs(graph(), 0)
    rt = Runtime(RuntimeConfig.from_env({"NEURON_SIM_MODE": mode}), blocking=True, trace=TraceSink())
    records = []
    rt.trace.subscribe(records.append)
    h = np.empty((128, 300), np.float32)
    m = np.empty((128,), np.float32)
    rt.device(0).launch(neff, {"x": inputs["x"], "b": inputs["b"], "h": h, "m": m})
    rt.synchronize()
    assert records[0].executor == mode
    # Timing comes from the ISA program in both modes: the launch takes the time the NEFF records.
    assert records[0].end_ns - records[0].start_ns == pytest.approx(neff.timing_summary["total_time_ns"])
    from neuronxcc.compiler.testing import run_fast

    expected = run_fast(graph(), inputs)
    np.testing.assert_array_equal(h, expected["h"])
    np.testing.assert_array_equal(m, expected["m"])


def test_the_compilers_timing_is_the_launches(monkeypatch):
    # Timing is computed once per NEFF: at compile time, then reused by every launch.
    from neuron_sim.timing import per_program, program_timing
    from neuron_sim.trace import TraceSink

    calls = []
    real = per_program.estimate
    monkeypatch.setattr(per_program, "estimate", lambda p, a: calls.append(p) or real(p, a))
    neff = compile_neff(graph(), "trn2")
    rt = Runtime(RuntimeConfig.from_env({}), blocking=True, trace=TraceSink())
    records = []
    rt.trace.subscribe(records.append)
    inputs = random_inputs(graph(), 0)
    for _ in range(2):
        rt.device(0).launch(neff, {"x": inputs["x"], "b": inputs["b"], "h": np.empty((128, 300), np.float32),
                                   "m": np.empty((128,), np.float32)})
    rt.synchronize()
    assert calls == [neff.program]
    assert records[0].timing is records[1].timing is program_timing(neff, rt.config.arch)
    assert records[0].duration_ns == neff.timing_summary["total_time_ns"]


def test_the_program_keeps_the_callers_graph_unchanged_as_its_fast_form():
    # Serialized once (when a NEFF is written), never re-parsed in this process.
    from neuron_sim.graph import graph_of

    g = graph()
    before = g.to_dict()
    neff = compile_neff(g, "trn2")
    assert neff.program.graph is g and graph_of(neff.program) is g
    assert g.to_dict() == before
    assert Neff.from_bytes(neff.to_bytes()).program.graph == before
