"""A thread blocked until a queue catches up (synchronize(), an event) counts as waiting for the
device while the queue's work runs: its core is free, so the executor may use it for a second
thread. The count drops back when the wait ends."""

import time

import pytest
from neuron_sim import spare_core


def _waiters_seen_by_a_task(queue, wait):
    seen = []

    def task():  # runs while the caller is inside wait(), in its thread or the worker's
        deadline = time.monotonic() + 5
        while not spare_core._waiting and time.monotonic() < deadline:
            time.sleep(0.001)
        seen.append(spare_core._waiting)

    queue.submit(task, device_time_ns=1.0)
    wait(queue)
    return seen


@pytest.mark.parametrize("wait", [lambda q: q.synchronize(), lambda q: q.record_event().synchronize()],
                         ids=["queue.synchronize", "event.synchronize"])
def test_a_synchronizing_thread_counts_as_waiting(runtime, wait):
    assert _waiters_seen_by_a_task(runtime.device(0).default_queue, wait) == [1]
    assert spare_core._waiting == 0
