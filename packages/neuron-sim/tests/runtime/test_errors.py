"""Asynchronous errors: kept on the queue, later work skipped, raised at the next sync point."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ExecutionError


def fail(message="boom"):
    def task():
        raise ValueError(message)

    return task


def test_launch_error_is_raised_at_synchronize_with_context(runtime, h):
    q = runtime.device(2).new_queue("work")
    sub = q.launch(h.failing_program(), h.copy_buffers(), context="aten::add(Tensor[128, 64], Tensor[128, 64])")
    with pytest.raises(ExecutionError) as info:
        q.synchronize()
    err = info.value
    msg = str(err)
    assert "reads_unset_register" in msg
    assert "neuron:2" in msg and "'work'" in msg
    assert "aten::add(Tensor[128, 64], Tensor[128, 64])" in msg
    assert "r_unset" in msg  # the original error's text
    assert isinstance(err.__cause__, ExecutionError) and "r_unset" in str(err.__cause__)
    assert (err.launch_name, err.device, err.queue, err.launch_id) == ("reads_unset_register", "neuron:2", "work", sub.launch_id)
    assert err.context.startswith("aten::add")


def test_later_tasks_are_skipped_and_counted_and_the_queue_recovers(runtime, h):
    q = runtime.device(0).default_queue
    ran = []
    q.submit(lambda: ran.append("before"))
    q.launch(h.failing_program(), h.copy_buffers())
    bufs = h.copy_buffers()
    q.launch(h.copy_program(), bufs)
    q.submit(lambda: ran.append("after"))
    q.submit(lambda: ran.append("after2"))
    with pytest.raises(ExecutionError, match="3 later task\\(s\\) on this queue were skipped") as info:
        q.synchronize()
    assert info.value.skipped == 3
    assert ran == ["before"]
    assert not bufs["y"].any()  # the skipped launch never ran
    q.synchronize()  # the error was cleared...
    q.launch(h.copy_program(), bufs)  # ...and the queue works again
    q.submit(lambda: ran.append("recovered"))
    q.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x"])
    assert ran == ["before", "recovered"]


def test_host_task_error_is_kept_too(runtime):
    q = runtime.device(0).default_queue
    q.submit(fail("fallback op exploded"), name="aten::weird", context="aten::weird(Tensor[3])")
    with pytest.raises(ExecutionError, match="fallback op exploded") as info:
        q.synchronize()
    assert isinstance(info.value.__cause__, ValueError)
    assert "host task 'aten::weird'" in str(info.value)


def test_query_does_not_raise(runtime):
    q = runtime.device(0).default_queue
    q.submit(fail())
    q.wait_idle()
    assert q.query() is True
    assert q.has_error
    with pytest.raises(ExecutionError):
        q.synchronize()
    assert not q.has_error


def test_other_queues_are_unaffected(runtime):
    dev = runtime.device(0)
    bad, good = dev.new_queue(), dev.new_queue()
    bad.submit(fail())
    bad.wait_idle()
    ran = []
    good.submit(lambda: ran.append(1))
    good.synchronize()  # does not raise the other queue's error
    assert ran == [1]
    with pytest.raises(ExecutionError):
        bad.synchronize()


def test_device_synchronize_raises_and_clears(runtime):
    dev = runtime.device(1)
    dev.new_queue().submit(fail("first"))
    with pytest.raises(ExecutionError, match="first"):
        dev.synchronize()
    dev.synchronize()


def test_runtime_synchronize_reports_every_failed_queue(runtime):
    a = runtime.device(0).new_queue()
    b = runtime.device(3).new_queue()
    a.submit(fail("on zero"))
    a.wait_idle()
    b.submit(fail("on three"))
    with pytest.raises(ExecutionError) as info:
        runtime.synchronize()
    msg = str(info.value)
    assert "on zero" in msg.splitlines()[0]  # the earliest failure is the one raised
    assert "also failed" in msg and "on three" in msg and "neuron:3" in msg
    assert info.value.other_failures == 1
    runtime.synchronize()  # both were cleared


def test_event_synchronize_raises_errors_before_the_event(runtime):
    q = runtime.device(0).default_queue
    q.submit(fail("before the event"))
    ev = q.record_event()
    ev.query()  # never raises, whatever the state
    with pytest.raises(ExecutionError, match="before the event"):
        ev.synchronize()
    q.synchronize()


def test_event_synchronize_ignores_errors_after_the_event(runtime):
    q = runtime.device(0).default_queue
    ev = q.record_event()
    q.submit(fail("after the event"))
    q.wait_idle()
    ev.synchronize()
    with pytest.raises(ExecutionError, match="after the event"):
        q.synchronize()


def test_events_and_waits_still_complete_on_a_failed_queue(runtime):
    dev = runtime.device(0)
    bad, other = dev.new_queue(), dev.new_queue()
    bad.submit(fail())
    ev = bad.record_event()
    other.wait_event(ev)
    ran = []
    other.submit(lambda: ran.append(1))
    other.synchronize()  # would hang if the marker were skipped
    assert ran == [1]
    with pytest.raises(ExecutionError):
        bad.synchronize()


def test_worker_survives_base_exceptions(runtime):
    q = runtime.device(0).default_queue

    def exit_task():
        raise SystemExit(3)

    q.submit(exit_task)
    with pytest.raises(ExecutionError, match="SystemExit"):
        q.synchronize()
    q.submit(lambda: None)
    q.synchronize()
