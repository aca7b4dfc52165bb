"""Blocking mode (NEURON_LAUNCH_BLOCKING=1): every task runs in the caller's thread and raises there."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from neuron_sim import ExecutionError
from neuron_sim.runtime import Runtime, RuntimeConfig, get_runtime
from neuron_sim.trace import TraceSink


def test_launch_error_raises_at_the_launch(blocking_runtime, h):
    q = blocking_runtime.device(0).default_queue
    with pytest.raises(ExecutionError) as info:
        q.launch(h.failing_program(), h.copy_buffers(), context="aten::mul")
    assert "reads_unset_register" in str(info.value) and "aten::mul" in str(info.value)
    assert "r_unset" in str(info.value.__cause__)
    assert info.value.skipped == 0
    q.synchronize()  # nothing is kept for later
    assert not q.has_error


def test_work_is_done_when_the_call_returns(blocking_runtime, h):
    q = blocking_runtime.device(0).new_queue()
    bufs = h.copy_buffers()
    q.launch(h.copy_program(), bufs)
    np.testing.assert_array_equal(bufs["y"], bufs["x"])  # no synchronize needed
    caller = []
    q.submit(lambda: caller.append(threading.current_thread()))
    assert caller == [threading.current_thread()]
    ev = q.record_event()
    assert ev.query()


def test_host_task_error_raises_at_submit(blocking_runtime):
    def bad():
        raise KeyError("nope")

    with pytest.raises(ExecutionError, match="nope") as info:
        blocking_runtime.device(0).submit(bad, name="aten::index")
    assert isinstance(info.value.__cause__, KeyError)


def test_simulated_time_is_the_same_as_async(blocking_runtime, matmul, h):
    from neuron_sim.timing import estimate

    q = blocking_runtime.device(0).default_queue
    start = q.record_event()
    q.launch(matmul, h.matmul_buffers())
    q.launch(matmul, h.matmul_buffers(1))
    end = q.record_event()
    assert start.elapsed_time(end) == pytest.approx(2 * estimate(matmul).total_ns / 1e6)


def test_env_variable_turns_it_on(monkeypatch, h):
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    rt = get_runtime()
    assert rt.blocking
    with pytest.raises(ExecutionError):
        rt.device(0).launch(h.failing_program(), h.copy_buffers())


def test_argument_overrides_env(h):
    rt = Runtime(RuntimeConfig.from_env({"NEURON_LAUNCH_BLOCKING": "0"}), blocking=True, trace=TraceSink())
    with pytest.raises(ExecutionError):
        rt.device(0).launch(h.failing_program(), h.copy_buffers())
