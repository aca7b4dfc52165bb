"""Tasks on one queue run in submission order; queues are ordered against each other only by events."""

from __future__ import annotations

import threading

TIMEOUT = 30  # generous: only a hang should ever reach it


def test_tasks_on_one_queue_run_in_order(runtime):
    q = runtime.device(0).new_queue()
    seen = []
    for i in range(200):
        q.submit(lambda i=i: seen.append(i))
    q.synchronize()
    assert seen == list(range(200))


def test_launches_and_host_tasks_interleave_in_order(runtime, h):
    q = runtime.device(0).default_queue
    bufs = h.copy_buffers()
    seen = []
    q.submit(lambda: seen.append(("before", float(bufs["y"].sum()))))
    q.launch(h.copy_program(), bufs)
    q.submit(lambda: seen.append(("after", float(bufs["y"].sum()))))
    q.synchronize()
    assert seen == [("before", 0.0), ("after", float(bufs["x"].sum()))]


def test_launch_returns_before_the_work_runs(runtime):
    q = runtime.device(0).new_queue()
    gate = threading.Event()
    q.submit(lambda: gate.wait(TIMEOUT))
    assert not q.query()  # the call returned while its task is still blocked
    gate.set()
    q.synchronize()
    assert q.query()


def test_queues_do_not_wait_for_each_other_without_events(runtime):
    dev = runtime.device(0)
    blocked, free = dev.new_queue(), dev.new_queue()
    gate = threading.Event()
    ran = threading.Event()
    blocked.submit(lambda: gate.wait(TIMEOUT))
    free.submit(ran.set)
    assert ran.wait(TIMEOUT)  # the other queue proceeds while the first one is blocked
    free.synchronize()
    assert not blocked.query()
    gate.set()
    blocked.synchronize()


def test_wait_event_orders_queues(runtime):
    dev = runtime.device(0)
    producer, consumer = dev.new_queue(), dev.new_queue()
    gate = threading.Event()
    order = []
    producer.submit(lambda: gate.wait(TIMEOUT))
    producer.submit(lambda: order.append("produce"))
    done = producer.record_event()
    consumer.wait_event(done)
    consumer.submit(lambda: order.append("consume"))
    unrelated = dev.new_queue()
    unrelated.submit(lambda: order.append("unrelated"))
    unrelated.synchronize()
    assert order == ["unrelated"]  # the consumer is held back by the event
    assert not done.query()
    gate.set()
    consumer.synchronize()
    assert order == ["unrelated", "produce", "consume"]
    assert done.query()


def test_wait_queue_and_event_wait(runtime):
    dev = runtime.device(0)
    a, b = dev.new_queue(), dev.new_queue()
    gate = threading.Event()
    order = []
    a.submit(lambda: gate.wait(TIMEOUT))
    a.submit(lambda: order.append("a"))
    b.wait_queue(a)
    b.submit(lambda: order.append("b"))
    gate.set()
    b.synchronize()
    assert order == ["a", "b"]


def test_waiting_on_an_unrecorded_event_is_a_no_op(runtime):
    from neuron_sim.runtime import Event

    q = runtime.device(0).default_queue
    ev = Event()
    assert ev.query()
    ev.synchronize()
    q.wait_event(ev)
    q.submit(lambda: None)
    q.synchronize()


def test_event_synchronize_waits_for_the_record_point_only(runtime):
    q = runtime.device(0).new_queue()
    first_done, gate = [], threading.Event()
    q.submit(lambda: first_done.append(True))
    ev = q.record_event()
    q.submit(lambda: gate.wait(TIMEOUT))
    ev.synchronize()  # returns although a later task is still blocked
    assert first_done == [True]
    assert not q.query()
    gate.set()
    q.synchronize()


def test_device_and_runtime_synchronize_wait_for_all_queues(runtime):
    seen = []
    for d in runtime.devices[:3]:
        for q in (d.default_queue, d.new_queue()):
            q.submit(lambda d=d, q=q: seen.append((d.index, q.name)))
    runtime.device(0).synchronize()
    assert {(0, "default"), (0, "queue1")} <= set(seen)
    runtime.synchronize()
    assert len(seen) == 6
    assert runtime.query()


def test_synchronize_from_inside_a_task_is_refused(runtime):
    from neuron_sim.runtime import RuntimeUsageError

    q = runtime.device(0).new_queue()
    q.submit(q.synchronize)
    try:
        q.synchronize()
    except Exception as err:
        assert isinstance(err.__cause__, RuntimeUsageError)
    else:
        raise AssertionError("synchronizing a queue from its own task must fail, not deadlock")


def test_submission_from_many_threads_keeps_each_threads_order(runtime):
    q = runtime.device(0).new_queue()
    seen = []

    def producer(tag):
        for i in range(50):
            q.submit(lambda i=i: seen.append((tag, i)))

    threads = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    q.synchronize()
    assert len(seen) == 200
    for tag in range(4):
        assert [i for t, i in seen if t == tag] == list(range(50))
