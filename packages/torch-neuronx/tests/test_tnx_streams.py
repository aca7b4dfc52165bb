"""Streams: torch_neuronx.Stream / torch.Stream on neuron are simulator queues; order within a
stream, independence across streams, and cross-stream order only through events."""

from __future__ import annotations

import gc
import os
import threading

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal, gate_stream
from torch_neuronx import execution


def test_stream_objects():
    s = torch_neuronx.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device("neuron", 0)
    assert s.stream_id != 0
    t = torch.Stream(device="neuron")
    assert t.device.type == "neuron" and t.stream_id not in (0, s.stream_id)
    assert torch.neuron.default_stream().stream_id == 0
    assert torch.neuron.current_stream() == torch.neuron.default_stream()
    with torch.neuron.stream(s):
        assert torch.neuron.current_stream() == s
        assert torch.accelerator.current_stream() == s
    assert torch.neuron.current_stream().stream_id == 0
    with torch_neuronx.stream(t):  # a plain torch.Stream works the same
        assert torch.accelerator.current_stream().stream_id == t.stream_id
    assert s.query()
    s.synchronize()


def test_launches_go_on_the_current_stream():
    s = torch_neuronx.Stream()
    queue = execution.queue(0, s)
    default = execution.queue(0, 0)
    x = torch.ones(256, device="neuron")
    before_s, before_default = queue.sim_time_ns, default.sim_time_ns
    with torch.neuron.stream(s):
        y = x * 2
    assert queue.sim_time_ns > before_s
    assert default.sim_time_ns == before_default
    s.synchronize()
    assert_equal(y, torch.full((256,), 2.0))


def test_order_within_a_stream():
    x = torch.zeros(1000, device="neuron")
    gate = gate_stream(bound_s=30)
    for _ in range(20):  # each op reads the previous one's result
        x.add_(1).mul_(2)
    assert not torch.neuron.current_stream().query()
    gate.set()
    expected = torch.zeros(1000)
    for _ in range(20):
        expected.add_(1).mul_(2)
    assert_equal(x, expected)


def test_streams_run_independently():
    s1, s2 = torch_neuronx.Stream(), torch_neuronx.Stream()
    a = torch.arange(64.0, device="neuron")
    torch.neuron.synchronize()
    with torch.neuron.stream(s1):
        gate = gate_stream(bound_s=30)
        b = a + 1
    with torch.neuron.stream(s2):
        c = a * 3
    s2.synchronize()  # returns while s1 is still held: no implicit order between streams
    assert not s1.query()
    assert_equal(c, torch.arange(64.0) * 3)
    gate.set()
    s1.synchronize()
    assert_equal(b, torch.arange(64.0) + 1)


def test_cross_stream_order_through_events():
    producer, consumer = torch_neuronx.Stream(), torch_neuronx.Stream()
    a = torch.arange(64.0, device="neuron")
    torch.neuron.synchronize()
    with torch.neuron.stream(producer):
        gate = gate_stream(bound_s=30)
        b = a + 1
        done = torch_neuronx.Event()
        done.record()
    with torch.neuron.stream(consumer):
        consumer.wait_event(done)
        c = b * 2
    assert not done.query()
    assert not consumer.query()  # waits for the producer
    gate.set()
    consumer.synchronize()
    assert done.query()
    assert_equal(c, (torch.arange(64.0) + 1) * 2)


def test_wait_stream_and_torch_event():
    producer, consumer = torch.Stream(device="neuron"), torch.Stream(device="neuron")
    x = torch.zeros(16, device="neuron")
    with torch.neuron.stream(producer):
        gate = gate_stream(bound_s=30)
        x.fill_(5)
    consumer.wait_stream(producer)
    with torch.neuron.stream(consumer):
        y = x + 1
        ev = torch.Event(device="neuron")
        ev.record(consumer)
    gate.set()
    ev.synchronize()
    assert ev.query()
    assert_equal(y, torch.full((16,), 6.0))


def test_simulated_time_orders_across_streams_only_with_events():
    s1, s2 = torch_neuronx.Stream(), torch_neuronx.Stream()
    q1, q2 = execution.queue(0, s1), execution.queue(0, s2)
    x = torch.randn(512, 512, device="neuron")
    with torch.neuron.stream(s1):
        for _ in range(5):
            y = x @ x
        e = torch_neuronx.Event()
        e.record()
    with torch.neuron.stream(s2):
        # No wait: a host-to-device copy (DMA, not the core) may run before s1's matmuls end.
        z = torch.ones(512, 512).to("neuron")
    independent_end = q2.sim_time_ns
    with torch.neuron.stream(s2):
        s2.wait_event(e)
        w = y + z
    assert independent_end < q1.sim_time_ns
    assert q2.sim_time_ns > q1.sim_time_ns  # the waiting op starts after the event
    torch.neuron.synchronize()
    assert torch.allclose(w.cpu(), (x.cpu() @ x.cpu()) + 1, rtol=1e-4, atol=1e-3)


def test_non_blocking_copies_on_a_side_stream():
    s = torch_neuronx.Stream()
    src = torch.arange(1 << 12, dtype=torch.float32).pin_memory()
    with torch.neuron.stream(s):
        dev = src.to("neuron", non_blocking=True)
        back = torch.empty_like(src).pin_memory()
        back.copy_(dev * 2, non_blocking=True)
    s.synchronize()
    assert_equal(back, torch.arange(1 << 12, dtype=torch.float32) * 2)


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.parametrize("make", [torch_neuronx.Stream, lambda: torch.Stream(device="neuron")],
                         ids=["torch_neuronx.Stream", "torch.Stream"])
def test_collected_streams_release_their_queues(make):
    """2,001 streams made and dropped leave the queue count, the threads and the memory at their
    baseline (each stream was a runtime queue forever, +23 KiB each; then, once released, a
    worker thread for ~5 s), and the work queued on them still runs. Streams run concurrently: an
    add on a side stream without the waits may read ``x`` before the previous add wrote it."""
    device = execution.runtime().device(0)
    x = torch.ones(64, device="neuron")
    make()
    gc.collect()
    before, threads, rss = len(device.queues), threading.active_count(), _rss_bytes()
    for i in range(2001):
        s = make()
        if i % 500 == 0:  # some of them do work, ordered with the default stream as CUDA code orders it
            s.wait_stream(torch.neuron.current_stream())
            with torch.neuron.stream(s):
                x.add_(1)
            torch.neuron.current_stream().wait_stream(s)  # an event on a stream about to be released
        del s
    make()
    torch.neuron.synchronize()
    assert len(device.queues) <= before + 2, [q.name for q in device.queues]
    assert threading.active_count() <= threads + 6  # the few streams that did work may still have theirs
    assert _rss_bytes() - rss < 8 << 20  # 2,001 leaked queues (or their threads) were ~40 MiB
    assert_equal(x, torch.full((64,), 6.0))


def test_a_released_stream_still_current_keeps_its_order():
    x = torch.zeros(1000, device="neuron")
    torch.neuron.set_stream(torch_neuronx.Stream())  # the only reference is dropped here
    try:
        gate = gate_stream(bound_s=30)
        x.add_(1)
        torch_neuronx.Stream()  # releases the collected stream's queue (its work is pending)
        x.mul_(3)  # on a queue re-created for the same stream: after the add_
        gate.set()
        torch.neuron.current_stream().synchronize()
    finally:
        torch.neuron.set_stream(torch.neuron.default_stream())
    assert_equal(x, torch.full((1000,), 3.0))


def test_a_plain_torch_stream_kept_alive_keeps_its_queue_and_its_work():
    device = execution.runtime().device(0)
    kept = torch.Stream(device="neuron")
    x = torch.zeros(8, device="neuron")
    with torch.neuron.stream(kept):
        x.add_(2)
    for _ in range(50):
        torch.Stream(device="neuron")  # dropped: released at the next new stream
    gc.collect()
    torch.Stream(device="neuron")
    assert f"stream{kept.stream_id}" in [q.name for q in device.queues]
    rebuilt = torch.Stream(stream_id=kept.stream_id, device_index=kept.device_index, device_type=kept.device_type)
    del rebuilt  # a stream rebuilt from its ids made no new stream: dropping it releases nothing
    gc.collect()
    torch.Stream(device="neuron")
    with torch.neuron.stream(kept):
        x.mul_(3)
    kept.synchronize()
    assert f"stream{kept.stream_id}" in [q.name for q in device.queues]
    assert_equal(x, torch.full((8,), 6.0))
