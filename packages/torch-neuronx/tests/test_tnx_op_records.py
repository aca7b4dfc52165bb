"""Every launch and host task of the device publishes one ``neuron_sim.trace.OpRecord`` on the
thread that issued it: the op or graph, the framework path, the torch stream, the launch it made
(joined with the runtime's LaunchRecord on the launch id), host and simulated times."""

from __future__ import annotations

import threading

import torch
from neuron_sim.trace import RecordKind, TraceSession


def _session(fn):
    torch.neuron.synchronize()
    threads = []
    with TraceSession(kinds=[RecordKind.OP, RecordKind.NEFF, RecordKind.COPY, RecordKind.CPU_FALLBACK]) as session:
        with TraceSession(kinds=[RecordKind.OP], on_record=lambda r: threads.append(threading.get_ident())):
            fn()
            torch.neuron.synchronize()
    ops = [r for r in session.records if r.kind == RecordKind.OP]
    launches = {r.launch_id: r for r in session.records if r.kind != RecordKind.OP}
    return ops, launches, threads


def test_eager_ops_copies_and_fallbacks_publish_op_records_joined_with_their_launches():
    x = torch.randn(4, 8)
    (x.to("neuron") * 2).cpu()  # compiled outside the session

    def work():
        d = x.to("neuron")
        y = d * 2
        torch.linalg.svd(y)  # no lowering: CPU fallback
        y.cpu()

    ops, launches, threads = _session(work)
    frameworks = [(r.name, r.framework, r.task_kind) for r in ops]
    assert ("aten::mul", "eager", "neff") in frameworks, frameworks
    assert ("copy_h2d", "copy", "copy") in frameworks and ("copy_d2h", "copy", "copy") in frameworks, frameworks
    assert any(f == "cpu_fallback" and k == "cpu_fallback" for _, f, k in frameworks), frameworks
    assert set(threads) == {threading.get_ident()}  # published by the thread that issued the op
    for r in ops:
        launch = launches[r.launch_id]
        assert (launch.name, launch.kind, launch.start_ns, launch.end_ns) == (r.name, r.task_kind, r.start_ns, r.end_ns)
        assert r.stream_id == 0 and r.queue == launch.queue and r.host_end_ns >= r.host_start_ns


def test_records_name_the_side_stream_and_compiled_graphs():
    x = torch.randn(16, device="neuron")
    f = torch.compile(lambda t: (t.sin() + 1).sum(), backend="neuron")
    f(x)  # compiled outside the session
    s = torch.neuron.Stream()

    def work():
        with torch.neuron.stream(s):
            f(x)
            x + 1

    torch.neuron.synchronize()
    ops, launches, _ = _session(work)
    assert {r.stream_id for r in ops} == {s.stream_id}
    graph = [r for r in ops if r.framework == "torch.compile"]
    assert len(graph) == 1 and graph[0].task_kind == "neff" and graph[0].launch_id in launches
    assert [r.name for r in ops if r.framework == "eager"] == ["aten::add"]
