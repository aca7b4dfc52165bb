"""Events time simulated work: Event.elapsed_time is the simulator's device time in ms, equal to
the runtime timeline for the work between the events, growing with the work and blind to host time."""

from __future__ import annotations

import time

import pytest
import torch
import torch_neuronx
from tnx_helpers import op_records
from torch_neuronx import execution
from torch_neuronx.ops import costs


def _timed(fn, event_cls=torch_neuronx.Event):
    queue = execution.queue(0)
    start, end = event_cls(enable_timing=True), event_cls(enable_timing=True)
    start.record()
    t0 = queue.sim_time_ns
    fn()
    end.record()
    t1 = queue.sim_time_ns
    end.synchronize()
    return start.elapsed_time(end), (t1 - t0) / 1e6


def _launch_ms(fn) -> float:
    """The simulated device time of the NEFF launches ``fn`` makes, from their op records."""
    with op_records() as records:
        fn()
    launches = [r for r in records if r.task_kind == "neff"]
    assert launches, [r.name for r in records]
    return sum(r.end_ns - r.start_ns for r in launches) / 1e6


def test_elapsed_time_equals_the_runtime_timeline():
    a = torch.randn(256, 256, device="neuron")
    a @ a  # compiled outside the timed block
    ms, timeline_ms = _timed(lambda: a @ a)
    assert ms == pytest.approx(timeline_ms, rel=1e-12)
    assert ms == pytest.approx(_launch_ms(lambda: a @ a), rel=1e-12)  # exactly the matmul's modelled time


def test_elapsed_time_of_a_known_fallback_op(fallback_only):
    a = torch.ones(1024, device="neuron")
    b = torch.ones(1024, device="neuron")
    torch.neuron.synchronize()
    ms, _ = _timed(lambda: a + b)
    # A CPU-fallback launch costs its modelled host round trip: 2 x 4 KiB in, 4 KiB out.
    assert ms == pytest.approx(costs.fallback_ns(8192, 4096) / 1e6, rel=1e-12)


def test_elapsed_time_grows_with_work():
    a = torch.randn(128, 128, device="neuron")
    one, _ = _timed(lambda: a @ a)
    four, _ = _timed(lambda: [a @ a for _ in range(4)])
    assert four == pytest.approx(4 * one, rel=1e-9)
    big = torch.randn(512, 512, device="neuron")
    larger, _ = _timed(lambda: big @ big)
    assert larger > one


def test_elapsed_time_ignores_host_time():
    a = torch.randn(64, 64, device="neuron")
    idle, _ = _timed(lambda: time.sleep(0.2))
    assert idle == 0.0
    plain, _ = _timed(lambda: a.sin())

    def with_sleep():
        time.sleep(0.1)
        a.sin()
        time.sleep(0.1)

    slept, _ = _timed(with_sleep)
    assert slept == pytest.approx(plain, rel=1e-12)


def test_torch_event_reaches_the_same_implementation():
    a = torch.randn(128, 128, device="neuron")
    ms, timeline_ms = _timed(lambda: a @ a, event_cls=lambda **kw: torch.Event(device="neuron", **kw))
    assert ms == pytest.approx(timeline_ms, rel=1e-12)
    nms, _ = _timed(lambda: a @ a)
    assert ms == pytest.approx(nms, rel=1e-12)


def test_event_query_synchronize_and_misuse():
    e = torch_neuronx.Event(enable_timing=True)
    assert e.query()  # never recorded
    with pytest.raises(RuntimeError, match="recorded"):
        e.elapsed_time(torch_neuronx.Event(enable_timing=True))
    e.record()
    e.synchronize()
    assert e.query()
    untimed = torch_neuronx.Event()
    untimed.record()
    with pytest.raises(RuntimeError, match="enable_timing"):
        e.elapsed_time(untimed)


def test_elapsed_time_across_streams_shares_one_timeline():
    s = torch_neuronx.Stream()
    a = torch.randn(256, 256, device="neuron")
    torch.neuron.synchronize()
    start = torch_neuronx.Event(enable_timing=True)
    start.record()
    with torch.neuron.stream(s):
        s.wait_event(start)
        a @ a
        end = torch_neuronx.Event(enable_timing=True)
        end.record()
    # The matmul's own device time: the wait on ``start`` adds nothing, the other stream's clock no offset.
    assert start.elapsed_time(end) == pytest.approx(_launch_ms(lambda: a @ a), rel=1e-9)
