"""A thread blocked until a queue catches up (synchronize(), an event) counts as waiting for the
device while the queue's work runs: its core is free, so the executor may use it for a second
thread. The count drops back when the wait ends."""

import threading
import time

import pytest
from neuron_sim.executor.waiting import waiting_threads


def _waiters_seen_by_a_task(queue, wait):
    seen = []

    def task():  # runs while the caller is inside wait(), in its thread or the worker's
        deadline = time.monotonic() + 5
        while not waiting_threads() and time.monotonic() < deadline:
            time.sleep(0.001)
        seen.append(waiting_threads())

    queue.submit(task, device_time_ns=1.0)
    wait(queue)
    return seen


@pytest.mark.parametrize("wait", [lambda q: q.synchronize(), lambda q: q.record_event().synchronize()],
                         ids=["queue.synchronize", "event.synchronize"])
def test_a_synchronizing_thread_counts_as_waiting(runtime, wait):
    assert _waiters_seen_by_a_task(runtime.device(0).default_queue, wait) == [1]
    assert waiting_threads() == 0


def test_a_synchronizing_caller_runs_the_rest_of_the_queue_itself(runtime):
    # The worker is inside a task when the caller synchronizes: it finishes that task and leaves
    # the rest to the caller (taking turns task by task, each hand-over woke a thread).
    queue = runtime.device(0).default_queue
    started, go = threading.Event(), threading.Event()
    ran_on = []

    def first():
        started.set()
        go.wait(5)
        ran_on.append(threading.current_thread().name)

    queue.submit(first)
    assert started.wait(5)
    for _ in range(10):
        queue.submit(lambda: ran_on.append(threading.current_thread().name))

    def release_first_once_the_caller_drains():
        deadline = time.monotonic() + 5
        while not waiting_threads() and time.monotonic() < deadline:
            time.sleep(0.001)
        time.sleep(0.05)  # the waiting caller takes over the queue right after it starts to wait
        go.set()

    threading.Thread(target=release_first_once_the_caller_drains).start()
    queue.synchronize()
    me = threading.current_thread().name
    assert ran_on[0] != me and ran_on[1:] == [me] * 10
