"""Every launch and host task of the device publishes one ``neuron_sim.trace.OpRecord`` on the
thread that issued it: the op or graph, the framework path, the torch stream, the launch it made
(joined with the runtime's LaunchRecord on the launch id), host and simulated times."""

from __future__ import annotations

import threading

import nki
import nki.language as nl
import torch
import torch_neuronx
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


def _joined(ops, launches):
    """Each op record that launched agrees with its LaunchRecord (name, kind, simulated interval)."""
    for r in ops:
        launch = launches[r.launch_id]
        assert (launch.name, launch.kind, launch.start_ns, launch.end_ns) == (r.name, r.task_kind, r.start_ns, r.end_ns)
        assert r.queue == launch.queue and launch.context == r.context


def test_adaptive_eager_runs_publish_one_record_per_launch_naming_the_fused_ops():
    x, w = torch.randn(16, 40), torch.randn(40)
    xd, wd = x.to("neuron"), w.to("neuron")

    def chain():
        h = torch.tanh(xd * 1.5 + 0.25)
        return (h - h.sum(dim=-1, keepdim=True)) * wd

    torch_neuronx.set_adaptive_eager(True)
    try:
        chain().cpu()  # compiled outside the session
        s = torch.neuron.Stream()

        def work():
            with torch.neuron.stream(s):
                y = chain()
            s.synchronize()
            return y

        ops, launches, _ = _session(work)
    finally:
        torch_neuronx.set_adaptive_eager(None)
    fused = [r for r in ops if r.framework == "adaptive_eager"]
    assert fused and all(r.launch_id in launches and r.task_kind == "neff" for r in fused), [(r.name, r.framework) for r in ops]
    assert {r.stream_id for r in fused} == {s.stream_id}
    # The six ops of the chain, one fused launch that names them in issue order.
    assert [(r.name, r.context) for r in fused] == [
        ("adaptive_eager_run", "6 fused ops on neuron:0: mul_Scalar, add_Scalar, tanh, sum_dim_IntList, sub_Tensor, mul_Tensor")]
    _joined(fused, launches)


@nki.jit
def _doubled(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.multiply(nl.load(x), 2.0))
    return out


def test_nki_kernel_calls_on_neuron_tensors_publish_a_record_of_their_launch():
    x = torch.randn(128, 64)
    xd = x.to("neuron")
    _doubled(xd)  # traced outside the session
    ops, launches, threads = _session(lambda: _doubled(xd))
    kernel = [r for r in ops if r.framework == "nki"]
    assert [(r.name, r.task_kind, r.stream_id) for r in kernel] == [("_doubled", "neff", 0)], [(r.name, r.framework) for r in ops]
    assert kernel[0].context == "NKI kernel _doubled([128, 64]) on neuron:0"
    assert kernel[0].end_ns - kernel[0].start_ns == _doubled.last_device_time_ns
    assert set(threads) == {threading.get_ident()}
    _joined(kernel, launches)
