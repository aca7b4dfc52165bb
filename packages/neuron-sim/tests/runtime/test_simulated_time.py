"""The simulated clock: launches take the timing model's device time; events measure it."""

from __future__ import annotations

import threading

import pytest
from neuron_sim.runtime import Event, RuntimeUsageError
from neuron_sim.timing import estimate


def test_elapsed_time_is_the_sum_of_device_times(runtime, matmul, h):
    q = runtime.device(0).new_queue()
    device_ns = estimate(matmul).total_ns
    # a real figure: no faster than the PE array's fp32 peak (a quarter of its 79 TFLOP/s bf16),
    # and this small product (latency, 1.3 MB of DMA) within a few times of it
    pe_floor_ns = 2 * 256 * 256 * 512 / (79e12 / 4) * 1e9
    assert pe_floor_ns <= device_ns <= 5 * pe_floor_ns
    start, end = Event(), Event()
    start.record(q)
    q.launch(matmul, h.matmul_buffers())
    q.launch(matmul, h.matmul_buffers(1))
    end.record(q)
    assert end.sim_time_ns - start.sim_time_ns == pytest.approx(2 * device_ns)
    assert start.elapsed_time(end) == pytest.approx(2 * device_ns / 1e6)  # milliseconds


def test_two_programs_add_up(runtime, matmul, h):
    copy = h.copy_program()
    q = runtime.device(0).default_queue
    start = q.record_event()
    a = q.launch(matmul, h.matmul_buffers())
    b = q.launch(copy, h.copy_buffers())
    end = q.record_event()
    assert b.start_ns == a.end_ns
    expected = estimate(matmul).total_ns + estimate(copy).total_ns
    assert start.elapsed_time(end) * 1e6 == pytest.approx(expected)


def test_host_tasks_advance_by_their_device_time(runtime):
    q = runtime.device(0).default_queue
    start = q.record_event()
    q.submit(lambda: None, device_time_ns=1500.0, kind="copy")
    q.submit(lambda: None)  # host work without device time costs nothing on the device timeline
    end = q.record_event()
    assert start.elapsed_time(end) == pytest.approx(1500.0 / 1e6)


def test_queues_of_one_core_serialize_launches(runtime, matmul, h):
    dev = runtime.device(0)
    q1, q2 = dev.new_queue(), dev.new_queue()
    t = estimate(matmul).total_ns
    a = q1.launch(matmul, h.matmul_buffers())
    b = q2.launch(matmul, h.matmul_buffers(1))
    c = q1.launch(matmul, h.matmul_buffers(2))
    assert (a.start_ns, b.start_ns, c.start_ns) == pytest.approx((0.0, t, 2 * t))  # submission order
    ev2 = q2.record_event()
    assert ev2.sim_time_ns == pytest.approx(2 * t)
    dev.synchronize()
    assert dev.sim_time_ns == pytest.approx(3 * t)


def test_non_core_work_overlaps_launches_on_other_queues(runtime, matmul, h):
    dev = runtime.device(0)
    compute, copies = dev.new_queue(), dev.new_queue()
    t = estimate(matmul).total_ns
    compute.launch(matmul, h.matmul_buffers())
    s = copies.submit(lambda: None, device_time_ns=100.0, kind="copy")
    assert s.start_ns == 0.0  # a copy does not hold the NeuronCore
    held = copies.submit(lambda: None, device_time_ns=100.0, kind="collective", occupies_core=True)
    assert held.start_ns == pytest.approx(t)


def test_devices_have_independent_cores(runtime, matmul, h):
    a = runtime.device(0).launch(matmul, h.matmul_buffers())
    b = runtime.device(1).launch(matmul, h.matmul_buffers(1))
    assert a.start_ns == b.start_ns == 0.0


def test_wait_event_carries_simulated_time_across_queues(runtime, matmul, h):
    dev = runtime.device(0)
    producer, consumer = dev.new_queue(), dev.new_queue()
    t = estimate(matmul).total_ns
    producer.launch(matmul, h.matmul_buffers())
    ready = producer.record_event()
    consumer.wait_event(ready)
    copy = consumer.submit(lambda: None, device_time_ns=50.0, kind="copy")
    assert copy.start_ns == pytest.approx(t)  # the copy waited for the launch, on the device timeline too
    other = dev.new_queue().submit(lambda: None, device_time_ns=50.0, kind="copy")
    assert other.start_ns == 0.0


def test_simulated_time_does_not_depend_on_host_timing(runtime, matmul, h):
    """A queue blocked in host time does not shift the device timeline of launches behind it."""
    dev = runtime.device(0)
    slow, fast = dev.new_queue(), dev.new_queue()
    gate = threading.Event()
    slow.submit(lambda: gate.wait(30))
    a = slow.launch(matmul, h.matmul_buffers())
    b = fast.launch(matmul, h.matmul_buffers(1))  # runs first in host time
    fast.synchronize()
    gate.set()
    slow.synchronize()
    assert a.start_ns == 0.0 and b.start_ns == pytest.approx(a.end_ns)


def test_elapsed_time_errors(runtime):
    q = runtime.device(0).default_queue
    recorded, never = q.record_event(), Event()
    with pytest.raises(RuntimeUsageError, match="end event was never recorded"):
        recorded.elapsed_time(never)
    with pytest.raises(RuntimeUsageError, match="start event was never recorded"):
        never.elapsed_time(recorded)
    untimed = Event(enable_timing=False).record(q)
    with pytest.raises(RuntimeUsageError, match="enable_timing=False"):
        recorded.elapsed_time(untimed)


def test_elapsed_time_waits_for_pending_events(runtime):
    q = runtime.device(0).new_queue()
    gate = threading.Event()
    start = q.record_event()
    q.submit(lambda: gate.wait(30), device_time_ns=10.0)
    end = q.record_event()
    assert not end.query()
    threading.Timer(0.05, gate.set).start()
    assert start.elapsed_time(end) == pytest.approx(1e-5)  # implicit synchronize, documented
    assert end.query()


def test_rerecording_moves_the_event(runtime):
    q = runtime.device(0).default_queue
    start = q.record_event()
    ev = Event().record(q)
    q.submit(lambda: None, device_time_ns=200.0)
    ev.record(q)
    assert start.elapsed_time(ev) == pytest.approx(2e-4)
