"""The registered fast executor runs programs that carry a real graph-level form (neuron_sim.graph)."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest
from neuron_sim.executor.fast import FastExecutor
from neuron_sim.graph import Graph, graph_of
from neuron_sim.runtime import register_executor


@pytest.fixture(autouse=True)
def _fast_registered():
    # Other tests replace or unregister "fast"; these need the real one.
    register_executor("fast", FastExecutor, requires_graph=True)
    yield


def exp_program(h, internal: bool = False):
    """copy_program's ISA (y = x, through an internal HBM tensor if asked) with a graph form
    computing y = exp(x): the mode shows in the result."""
    program = h.copy_program(internal=internal, name="exp_graph")
    g = Graph("exp_graph")
    x = g.add_input("x", (128, 64), "float32")
    g.set_outputs([g.add1("exp", x)], ["y"])
    program.graph = g.to_dict()
    return program


def test_fast_mode_runs_a_program_with_a_graph(h):
    rt = h.make_runtime(NEURON_SIM_MODE="fast")
    records = []
    rt.trace.subscribe(records.append)
    bufs = h.copy_buffers()
    rt.device(0).launch(exp_program(h), bufs)
    rt.synchronize()
    assert records[0].executor == "fast"
    np.testing.assert_array_equal(bufs["y"], np.exp(bufs["x"]))


def test_graph_cache_is_per_program_and_released(h):
    # Programs are dataclasses (unhashable, equal by value): the parsed graph is cached by identity.
    a, b = exp_program(h), exp_program(h)
    ga, gb = graph_of(a), graph_of(b)
    assert ga is graph_of(a) and gb is not ga
    bufs = h.copy_buffers()
    FastExecutor().run(a, {k: v.reshape(-1).view(np.uint8) for k, v in bufs.items()})
    np.testing.assert_array_equal(bufs["y"], np.exp(bufs["x"]))
    parsed = weakref.ref(ga)  # program.graph is a dict: the parsed Graph lives in graph_of's cache only
    del a, ga
    gc.collect()
    assert parsed() is None  # released with its program
    assert graph_of(b) is gb


def test_internal_tensors_hold_hbm_for_a_fast_launch_too(h):
    # The graph form never reads them, but they are part of what the launch occupies on the device:
    # the same HBM peak as an exact launch, and the same out-of-memory error when they do not fit.
    program = exp_program(h, internal=True)
    for mode in ("fast", "exact"):
        rt = h.make_runtime(NEURON_SIM_MODE=mode)
        device = rt.device(0)
        bufs = h.copy_buffers()
        before = device.memory_stats()["peak_allocated_bytes"]
        device.launch(program, bufs)
        rt.synchronize()
        expected = np.exp(bufs["x"]) if mode == "fast" else bufs["x"]
        np.testing.assert_array_equal(bufs["y"], expected)
        assert device.memory_stats()["peak_allocated_bytes"] - before >= 128 * 64 * 4, mode
        assert device.memory_stats()["allocated_bytes"] == 0


@pytest.mark.parametrize("device_mode", ["fast", "exact"])
def test_the_executor_can_be_chosen_per_launch(h, device_mode):
    rt = h.make_runtime(NEURON_SIM_MODE=device_mode)
    records = []
    rt.trace.subscribe(records.append)
    program = exp_program(h)
    q = rt.device(0).default_queue
    runs = {mode: h.copy_buffers(seed=3) for mode in ("fast", "exact")}
    for mode, bufs in runs.items():
        q.launch(program, bufs, executor=mode)
    q.launch(program, default := h.copy_buffers(seed=3))
    q.synchronize()
    assert [r.executor for r in records] == ["fast", "exact", device_mode]
    np.testing.assert_array_equal(runs["fast"]["y"], np.exp(runs["fast"]["x"]))  # the graph form: exp
    np.testing.assert_array_equal(runs["exact"]["y"], runs["exact"]["x"])  # the ISA: a copy
    np.testing.assert_array_equal(default["y"], runs[device_mode]["y"])
    assert [r.duration_ns for r in records] == pytest.approx([records[0].timing.total_ns] * 3)  # from the ISA either way


def test_an_unknown_executor_is_refused_at_the_launch(h, runtime):
    with pytest.raises(ValueError, match="unknown executor mode 'fastest'; choose one of"):
        runtime.device(0).launch(exp_program(h), h.copy_buffers(), executor="fastest")
