"""Subscribers receive one record per task, placed on the device timeline, with Explorer rows."""

from __future__ import annotations

import pytest
from neuron_sim import ExecutionError
from neuron_sim.timing import estimate
from neuron_sim.trace import LaunchRecord, device_events


def test_records_have_kinds_names_and_simulated_times(runtime, sink, matmul, matmul_buffers):
    records: list[LaunchRecord] = []
    sink.subscribe(records.append)
    dev = runtime.device(1)
    q = dev.new_queue("compute")
    t = estimate(matmul).total_ns
    q.submit(lambda: None, device_time_ns=100.0, kind="copy", name="h2d", context="x.to('neuron')")
    q.launch(matmul, matmul_buffers(), context="aten::mm")
    q.submit(lambda: None, name="aten::nonzero", context="aten::nonzero(Tensor[3])")
    q.synchronize()

    assert [(r.kind, r.name) for r in records] == [("copy", "h2d"), ("neff", matmul.name), ("host", "aten::nonzero")]
    copy, launch, host = records
    assert (copy.start_ns, copy.end_ns) == (0.0, 100.0)
    assert launch.start_ns == 100.0 and launch.end_ns == pytest.approx(100.0 + t)
    assert launch.duration_ns == pytest.approx(t)
    assert (host.start_ns, host.end_ns) == (launch.end_ns, launch.end_ns)
    assert all(r.device == 1 and r.queue == "compute" and r.error is None for r in records)
    assert launch.context == "aten::mm" and launch.executor == "exact" and launch.program is matmul
    assert launch.timing.total_ns == pytest.approx(t) and copy.timing is None
    assert launch.launch_id < host.launch_id
    assert all(r.host_end_ns >= r.host_start_ns for r in records)


def test_a_launch_carries_the_call_site_it_was_given(runtime, sink, matmul, matmul_buffers):
    records: list[LaunchRecord] = []
    sink.subscribe(records.append)
    q = runtime.device(0).default_queue
    q.launch(matmul, matmul_buffers(), call_site="/home/me/train.py:42")
    q.launch(matmul, matmul_buffers(1))
    q.synchronize()
    assert [r.call_site for r in records] == ["/home/me/train.py:42", None]
    # the program (shared by both launches) keeps its own locations
    assert records[0].program is records[1].program and "train.py" not in str(matmul.instructions[0].location)


def test_device_rows_are_shifted_to_absolute_time(runtime, sink, matmul, matmul_buffers):
    records = []
    sink.subscribe(records.append)
    q = runtime.device(0).default_queue
    q.launch(matmul, matmul_buffers())
    q.launch(matmul, matmul_buffers(1))
    q.synchronize()
    first, second = records
    base = second.start_ns
    assert first.start_ns == 0.0 and base == pytest.approx(first.end_ns) == pytest.approx(estimate(matmul).total_ns)
    relative = estimate(matmul)

    shifted = list(second.instructions())
    assert len(shifted) == len(relative.instructions)
    for rec, rel in zip(shifted, relative.instructions, strict=True):
        assert rec.opcode == rel.opcode
        assert rec.start_ts == pytest.approx(rel.start_ts + base)
        assert rec.end_ts == pytest.approx(rel.end_ts + base)
    assert all(first.start_ns <= r.start_ts <= r.end_ts <= first.end_ns for r in first.instructions())

    dma = list(second.dma_packets())
    assert len(dma) == len(relative.dma) > 0
    assert dma[0].start_ts == pytest.approx(relative.dma[0].start_ts + base)
    sems = list(second.semaphore_updates())
    assert len(sems) == len(relative.semaphores) > 0
    assert sems[-1].timestamp == pytest.approx(relative.semaphores[-1].timestamp + base)

    # the shared, cached timing result is left untouched
    assert second.timing.instructions[0].start_ts == pytest.approx(relative.instructions[0].start_ts)

    tables = {}
    for table, _row in device_events(second):
        tables[table] = tables.get(table, 0) + 1
    assert tables == {"Instruction": len(shifted), "DmaPacket": len(dma), "SemaphoreUpdate": len(sems)}


def test_host_records_have_no_device_rows(runtime, sink):
    records = []
    sink.subscribe(records.append)
    runtime.device(0).submit(lambda: None)
    runtime.synchronize()
    assert list(device_events(records[0])) == []


def test_failed_task_is_recorded_with_its_error_and_skipped_ones_are_not(runtime, sink):
    records = []
    sink.subscribe(records.append)
    q = runtime.device(0).default_queue

    def boom():
        raise RuntimeError("kaput")

    q.submit(boom, name="bad")
    q.submit(lambda: None, name="skipped")
    with pytest.raises(ExecutionError):
        q.synchronize()
    assert [r.name for r in records] == ["bad"]
    assert records[0].error == "RuntimeError: kaput"


def test_unsubscribe_stops_delivery(runtime, sink):
    records = []
    handle = sink.subscribe(records.append)
    assert sink.enabled
    q = runtime.device(0).default_queue
    q.submit(lambda: None, name="one")
    q.synchronize()
    sink.unsubscribe(handle)
    assert not sink.enabled
    q.submit(lambda: None, name="two")
    q.synchronize()
    assert [r.name for r in records] == ["one"]
    with pytest.raises(KeyError):
        sink.unsubscribe(handle)


def test_blocking_mode_publishes_too(sink, matmul, matmul_buffers):
    from neuron_sim.runtime import Runtime, RuntimeConfig

    rt = Runtime(RuntimeConfig.from_env({}), blocking=True, trace=sink)
    records = []
    sink.subscribe(records.append)
    rt.device(0).launch(matmul, matmul_buffers())
    assert [r.kind for r in records] == ["neff"]  # published before launch() returned


def test_runtime_publishes_to_the_global_sink_by_default(matmul, matmul_buffers):
    from neuron_sim.runtime import Runtime, RuntimeConfig
    from neuron_sim.trace import global_sink

    rt = Runtime(RuntimeConfig.from_env({}))
    assert rt.trace is global_sink() and rt.device(0).trace is global_sink()
