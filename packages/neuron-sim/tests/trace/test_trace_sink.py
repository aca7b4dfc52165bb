"""The sink: a raising subscriber never breaks a queue; no subscribers means no records built."""

from __future__ import annotations

import logging

import pytest
from neuron_sim.trace import TraceSink
from neuron_sim.trace import records as trace_records


def test_subscriber_exception_does_not_break_the_queue(runtime, sink, caplog):
    good = []

    def broken(record):
        raise ValueError("profiler bug")

    sink.subscribe(broken)
    sink.subscribe(good.append)
    q = runtime.device(0).default_queue
    ran = []
    with caplog.at_level(logging.WARNING, logger="neuron_sim.trace"):
        for i in range(3):
            q.submit(lambda i=i: ran.append(i), name=f"t{i}")
        q.synchronize()  # no error is kept for the tasks
    assert ran == [0, 1, 2]
    assert [r.name for r in good] == ["t0", "t1", "t2"]  # later subscribers still get every record
    warnings = [r for r in caplog.records if r.name == "neuron_sim.trace"]
    assert len(warnings) == 1  # logged once, not per record
    assert "profiler bug" in caplog.text


def test_no_records_are_built_without_subscribers(runtime, sink, monkeypatch):
    built = []
    real = trace_records.LaunchRecord

    def spy(*args, **kwargs):
        built.append(1)
        return real(*args, **kwargs)

    import neuron_sim.runtime.queue as queue_module

    monkeypatch.setattr(queue_module, "LaunchRecord", spy)
    q = runtime.device(0).default_queue
    q.submit(lambda: None)
    q.synchronize()
    assert built == []
    sink.subscribe(lambda r: None)
    q.submit(lambda: None)
    q.synchronize()
    assert built == [1]


def test_subscribe_requires_a_callable():
    with pytest.raises(TypeError):
        TraceSink().subscribe("not callable")


def test_handles_are_distinct_and_counted():
    s = TraceSink()
    a, b = s.subscribe(print), s.subscribe(print)
    assert a != b and s.subscriber_count == 2
    s.unsubscribe(a)
    assert s.subscriber_count == 1 and s.enabled
