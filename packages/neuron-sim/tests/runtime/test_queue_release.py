"""Releasing a queue (a collected stream): no more work is accepted, and once idle the queue is
removed from its device - without losing its work, its error or its place on the timeline."""

from __future__ import annotations

import threading

import pytest
from neuron_sim import ExecutionError
from neuron_sim.runtime import RuntimeUsageError


def test_a_released_idle_queue_is_removed_and_refuses_work(runtime, h):
    dev = runtime.device(0)
    q = dev.new_queue("stream1")
    q.submit(lambda: None, device_time_ns=500.0)
    q.synchronize()
    q.release()
    assert q.released and q not in dev.queues
    with pytest.raises(RuntimeUsageError, match=r"<Queue 'stream1' of neuron:0> was released"):
        q.submit(lambda: None)
    with pytest.raises(RuntimeUsageError, match="was released"):
        q.launch(h.copy_program(), h.copy_buffers())
    with pytest.raises(RuntimeUsageError, match="was released"):
        q.record_event()
    q.release()  # twice: harmless
    assert dev.sim_time_ns == 500.0  # its work still counts on the device's timeline
    assert dev.new_queue("stream1").name == "stream1"  # the name is free again


def test_a_busy_queue_finishes_its_work_before_it_goes(runtime):
    dev = runtime.device(0)
    q = dev.new_queue()
    gate, ran = threading.Event(), []
    q.submit(lambda: gate.wait(30))
    q.submit(lambda: ran.append("after"))
    event = q.record_event()
    q.release()
    assert q in dev.queues  # still running
    gate.set()
    event.synchronize()  # events recorded before the release still work
    dev.synchronize()
    assert ran == ["after"] and q not in dev.queues


def test_the_error_of_a_released_queue_surfaces_at_the_next_synchronize(runtime):
    dev = runtime.device(1)
    q = dev.new_queue("doomed")

    def boom():
        raise ValueError("lost stream failed")

    q.submit(boom)
    q.release()
    with pytest.raises(ExecutionError, match="lost stream failed") as info:
        dev.synchronize()
    assert info.value.queue == "doomed"
    dev.synchronize()  # raised once
    q2 = runtime.device(1).new_queue()
    q2.submit(boom)
    q2.wait_idle()
    q2.release()
    with pytest.raises(ExecutionError, match="lost stream failed"):
        runtime.synchronize()


def test_the_default_queue_cannot_be_released(runtime):
    with pytest.raises(RuntimeUsageError, match="default queue and cannot be released"):
        runtime.device(0).default_queue.release()


def test_many_short_lived_queues_do_not_accumulate(runtime):
    dev = runtime.device(0)
    before = len(dev.queues)
    for _ in range(2001):
        q = dev.new_queue()
        q.submit(lambda: None, device_time_ns=1.0)
        q.release()
    dev.synchronize()
    assert len(dev.queues) == before


def test_a_queue_recreated_for_a_released_stream_starts_at_the_devices_current_time(runtime):
    dev = runtime.device(0)
    q = dev.new_queue("stream5")
    gate = threading.Event()
    q.submit(lambda: gate.wait(30), device_time_ns=700.0)
    dev.default_queue.submit(lambda: None, device_time_ns=1200.0, occupies_core=True)
    q.release()  # still busy: it stays until its work is done, but its name is free
    again = dev.new_queue("stream5", start_ns=dev.sim_time_ns)
    sub = again.submit(lambda: None, device_time_ns=10.0)
    assert (sub.start_ns, sub.end_ns) == (1200.0, 1210.0)  # after all the device's earlier work, not at 0
    assert [x.name for x in dev.queues].count("stream5") == 2
    gate.set()
    dev.synchronize()
    assert q not in dev.queues and again in dev.queues
    fresh = dev.new_queue("stream6")  # a new stream overlaps earlier work, as one that existed all along
    assert fresh.submit(lambda: None, device_time_ns=10.0).start_ns == 0.0
    dev.synchronize()


@pytest.mark.parametrize("start_ns", [-1.0, float("nan"), float("inf"), "0", True])
def test_a_queue_start_time_must_be_a_simulated_time(runtime, start_ns):
    with pytest.raises(ValueError, match=r"start_ns must be a finite simulated time >= 0 \(ns\)"):
        runtime.device(0).new_queue("bad", start_ns=start_ns)
    assert [q.name for q in runtime.device(0).queues] == ["default"]
