"""Trace capture as sessions: each collects what is published while it is active, filtered by
device and kind; several at once; records stream out to a callback or are drained in batches.
Every record names its process and carries the runtime's clock anchor, and frameworks publish
op records beside the launches they made."""

from __future__ import annotations

import os
import threading
import time

import pytest
from neuron_sim.trace import ClockAnchor, LaunchRecord, OpRecord, RecordKind, TraceSession


def _work(runtime, matmul, matmul_buffers, devices=(0, 1)):
    for d in devices:
        q = runtime.device(d).default_queue
        q.launch(matmul, matmul_buffers(), name=f"mm{d}")
        q.submit(lambda: None, device_time_ns=10.0, kind="copy", name=f"copy{d}")
        q.synchronize()  # one device after the other: records arrive in this order


def test_a_session_collects_only_while_active(runtime, sink, matmul, matmul_buffers):
    session = TraceSession(sink=sink)
    _work(runtime, matmul, matmul_buffers)  # before: not seen
    with session:
        assert session.active
        _work(runtime, matmul, matmul_buffers)
    assert not session.active and sink.subscriber_count == 0
    _work(runtime, matmul, matmul_buffers)  # after: not seen
    assert [(r.name, r.kind) for r in session.records] == [("mm0", "neff"), ("copy0", "copy"), ("mm1", "neff"), ("copy1", "copy")]
    session.stop()  # stopping twice is harmless
    with pytest.raises(RuntimeError, match="already active"):
        session.start().start()
    session.stop()


def test_sessions_at_once_each_with_its_filter(runtime, sink, matmul, matmul_buffers):
    everything = TraceSession(sink=sink).start()
    device1 = TraceSession(sink=sink, devices=[runtime.device(1)]).start()
    copies = TraceSession(sink=sink, kinds=[RecordKind.COPY]).start()
    launches_on_0 = TraceSession(sink=sink, devices=[0], kinds=["neff"]).start()
    _work(runtime, matmul, matmul_buffers)
    late = TraceSession(sink=sink, devices=[0]).start()  # starts after the first batch
    _work(runtime, matmul, matmul_buffers, devices=(0,))
    for s in (everything, device1, copies, launches_on_0, late):
        s.stop()
    assert len(everything.records) == 6
    assert [r.name for r in device1.records] == ["mm1", "copy1"]
    assert [r.name for r in copies.records] == ["copy0", "copy1", "copy0"]
    assert [r.name for r in launches_on_0.records] == ["mm0", "mm0"]
    assert [r.name for r in late.records] == ["mm0", "copy0"]
    with pytest.raises(ValueError, match="unknown record kind 'kernel'"):
        TraceSession(sink=sink, kinds=["kernel"])
    with pytest.raises(TypeError, match="device indices"):
        TraceSession(sink=sink, devices=["neuron:0"])


def test_records_stream_to_a_callback_and_nothing_is_kept(runtime, sink, matmul, matmul_buffers):
    streamed = []
    with TraceSession(sink=sink, on_record=streamed.append) as session:
        _work(runtime, matmul, matmul_buffers)
    assert [r.name for r in streamed] == ["mm0", "copy0", "mm1", "copy1"]
    assert session.records == []


def test_drain_hands_out_batches(runtime, sink, matmul, matmul_buffers):
    with TraceSession(sink=sink) as session:
        _work(runtime, matmul, matmul_buffers, devices=(0,))
        first = session.drain()
        _work(runtime, matmul, matmul_buffers, devices=(1,))
        second = session.drain()
    assert [r.name for r in first] == ["mm0", "copy0"] and [r.name for r in second] == ["mm1", "copy1"]
    assert session.drain() == []


def test_records_from_many_queues_at_once_are_all_kept(runtime, sink):
    queues = [runtime.device(d).new_queue() for d in range(4)]
    with TraceSession(sink=sink) as session:
        threads = [threading.Thread(target=lambda q=q: [q.submit(lambda: None) for _ in range(200)]) for q in queues]
        for t in threads:
            t.start()
        drained = []
        for t in threads:
            t.join()
            drained += session.drain()
        runtime.synchronize()
    assert len(drained + session.records) == 800
    assert len({r.launch_id for r in drained + session.records}) == 800


def test_records_carry_the_process_and_the_clock_anchor(runtime, sink, matmul, matmul_buffers):
    before = ClockAnchor.now()
    with TraceSession(sink=sink) as session:
        _work(runtime, matmul, matmul_buffers, devices=(0,))
    after = ClockAnchor.now()
    anchor = runtime.anchor
    # the anchor was read when the runtime was created, both clocks together
    assert anchor.perf_counter_ns <= before.perf_counter_ns and anchor.time_ns <= before.time_ns
    assert abs((before.time_ns - anchor.time_ns) - (before.perf_counter_ns - anchor.perf_counter_ns)) < 50_000_000
    for record in session.records:
        assert record.pid == os.getpid() and record.anchor is anchor
        wall = anchor.wall_ns(record.host_start_ns)
        assert before.time_ns - 50_000_000 <= wall <= after.time_ns + 50_000_000
    launch = session.records[0]
    assert anchor.sim_wall_ns(launch.start_ns) == anchor.time_ns + launch.start_ns


def test_a_framework_publishes_op_records_tied_to_its_launches(runtime, sink, matmul, matmul_buffers):
    q = runtime.device(2).new_queue("stream7")
    assert not q.tracing
    sub = q.launch(matmul, matmul_buffers(), name="aten::mm")
    assert q.publish_op("aten::mm", sub, host_start_ns=time.perf_counter_ns()) is None  # no session: nothing built
    with TraceSession(sink=sink, devices=[2]) as session:
        assert q.tracing
        start = time.perf_counter_ns()
        sub = q.launch(matmul, matmul_buffers(), name="aten::mm")
        op = q.publish_op("aten::mm", sub, host_start_ns=start, context="aten::mm [256, 256] x [256, 512]", stream_id=7)
        copy = q.submit(lambda: None, device_time_ns=300.0, kind="copy", name="copy_d2h")
        read = q.publish_op("aten::_to_copy", copy, host_start_ns=time.perf_counter_ns(), framework="copy", stream_id=7)
        view = q.publish_op("aten::view", None, host_start_ns=time.perf_counter_ns(), framework="jax")
        q.synchronize()
    ops = [r for r in session.records if isinstance(r, OpRecord)]
    launches = {r.launch_id: r for r in session.records if isinstance(r, LaunchRecord)}
    assert ops == [op, read, view]  # published on this thread, when the work was submitted
    assert (op.kind, op.device, op.queue, op.pid, op.anchor) == (RecordKind.OP, 2, "stream7", os.getpid(), runtime.anchor)
    assert (op.framework, op.stream_id, read.framework, view.framework, view.stream_id) == ("torch", 7, "copy", "jax", None)
    assert op.host_end_ns >= op.host_start_ns == start
    for record, task_kind in ((op, RecordKind.NEFF), (read, RecordKind.COPY)):
        launch = launches[record.launch_id]  # what a profiler joins on
        assert (record.task_kind, record.start_ns, record.end_ns) == (task_kind, launch.start_ns, launch.end_ns)
    assert read.end_ns - read.start_ns == 300.0 and read.start_ns == op.end_ns
    assert (view.launch_id, view.task_kind, view.start_ns) == (None, None, None)


def test_submit_refuses_unknown_kinds(runtime):
    with pytest.raises(ValueError, match="unknown record kind 'kernal'.*'collective'"):
        runtime.device(0).default_queue.submit(lambda: None, kind="kernal")
    assert runtime.device(0).default_queue.submitted == 0


def test_lnc2_records_hold_each_cores_timing(runtime, sink, matmul, matmul_buffers):
    from neuron_sim.timing import estimate

    small = matmul
    with TraceSession(sink=sink) as session:
        runtime.device(0).launch([matmul, small], matmul_buffers())
        runtime.synchronize()
    (record,) = session.records
    assert len(record.timings) == 2 and record.programs == (matmul, small) and record.timing is record.timings[0]
    per_core = len(estimate(matmul).instructions)
    assert len(list(record.instructions())) == 2 * per_core
    assert len(list(record.instructions(core=1))) == per_core
    with pytest.raises(IndexError, match="no physical core 2"):
        list(record.instructions(core=2))
