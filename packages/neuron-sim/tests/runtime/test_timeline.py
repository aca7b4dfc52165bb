"""The core's timeline is the one owner of scheduling: it places each task at the end of its
queue's lane, after the last task occupying the core if it occupies the core too, and no earlier
than a start time the caller gives (``not_before_ns``)."""

from __future__ import annotations

import pytest
from neuron_sim.runtime.timeline import Timeline
from neuron_sim.timing import estimate


def test_a_lane_runs_its_tasks_back_to_back():
    tl = Timeline()
    lane = tl.lane("q")
    assert tl.reserve(lane, 100.0, occupies_core=False) == (0.0, 100.0)
    assert tl.reserve(lane, 50.0, occupies_core=True) == (100.0, 150.0)
    assert lane.end_ns == 150.0 and tl.core_free_ns == 150.0 and tl.end_ns == 150.0


def test_tasks_that_occupy_the_core_serialize_across_lanes_and_others_overlap():
    tl = Timeline()
    a, b, c = tl.lane("a"), tl.lane("b"), tl.lane("c")
    assert tl.reserve(a, 100.0, occupies_core=True) == (0.0, 100.0)
    assert tl.reserve(b, 30.0, occupies_core=False) == (0.0, 30.0)  # a copy beside the launch
    assert tl.reserve(c, 40.0, occupies_core=True) == (100.0, 140.0)  # waits for the core
    assert tl.reserve(b, 10.0, occupies_core=True) == (140.0, 150.0)


def test_not_before_delays_the_start_and_the_rest_of_the_lane():
    tl = Timeline()
    a, b = tl.lane("a"), tl.lane("b")
    tl.reserve(a, 10.0, occupies_core=True)
    assert tl.reserve(a, 5.0, occupies_core=True, not_before_ns=1000.0) == (1000.0, 1005.0)
    assert tl.reserve(a, 5.0, occupies_core=False) == (1005.0, 1010.0)
    assert tl.reserve(b, 20.0, occupies_core=True, not_before_ns=500.0) == (1005.0, 1025.0)  # the core is later
    assert tl.reserve(b, 1.0, occupies_core=False, not_before_ns=3.0) == (1025.0, 1026.0)  # the lane is later


def test_a_removed_lane_still_counts_towards_the_end():
    tl = Timeline()
    gone, kept = tl.lane("gone"), tl.lane("kept")
    tl.reserve(gone, 700.0, occupies_core=False)
    tl.reserve(kept, 10.0, occupies_core=False)
    tl.remove(gone)
    assert tl.end_ns == 700.0


def test_launch_and_submit_start_no_earlier_than_asked(runtime, matmul, h):
    dev = runtime.device(0)
    q, other = dev.new_queue(), dev.new_queue()
    t = estimate(matmul).total_ns
    first = q.launch(matmul, h.matmul_buffers(), not_before_ns=5000.0)
    assert (first.start_ns, first.end_ns) == pytest.approx((5000.0, 5000.0 + t))
    copy = q.submit(lambda: None, device_time_ns=100.0, kind="copy", not_before_ns=1.0)
    assert copy.start_ns == pytest.approx(first.end_ns)  # its lane ends later than asked
    # another queue's launch still serializes on the core, after the first launch:
    second = other.launch(matmul, h.matmul_buffers(1), not_before_ns=10.0)
    assert second.start_ns == pytest.approx(first.end_ns)
    later = other.submit(lambda: None, device_time_ns=7.0, not_before_ns=1e6)
    assert (later.start_ns, later.end_ns) == pytest.approx((1e6, 1e6 + 7.0))
    ev = other.record_event()
    assert ev.sim_time_ns == pytest.approx(1e6 + 7.0)
    dev.synchronize()
    assert dev.sim_time_ns == pytest.approx(1e6 + 7.0)


def test_ranks_of_a_collective_start_at_the_latest_arrival(runtime, h):
    # Two devices stand for two ranks: each learns the others' arrival and starts there.
    queues = [runtime.device(i).default_queue for i in (0, 1)]
    queues[0].submit(lambda: None, device_time_ns=300.0)
    queues[1].submit(lambda: None, device_time_ns=900.0)
    arrivals = [q.sim_time_ns for q in queues]
    starts = [q.submit(lambda: None, device_time_ns=50.0, kind="collective", not_before_ns=max(arrivals)).start_ns
              for q in queues]
    assert starts == [900.0, 900.0]
    runtime.synchronize()


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), "10", True])
def test_bad_start_times_are_refused(runtime, h, bad):
    q = runtime.device(0).default_queue
    with pytest.raises(ValueError, match="not_before_ns must be a finite simulated time >= 0"):
        q.submit(lambda: None, not_before_ns=bad)
    with pytest.raises(ValueError, match="not_before_ns"):
        q.launch(h.copy_program(), h.copy_buffers(), not_before_ns=bad)
    assert q.submitted == 0
