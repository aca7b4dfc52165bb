"""Traces of several processes (the ranks of a distributed job) merge on the wall clock: each
record names its process and carries its runtime's clock anchor, so host times and simulated
times of different processes land on one timeline in the order things happened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from neuron_sim.trace import ClockAnchor, TraceSession

# Another process: its own runtime (its own anchor and simulated clock), one host task, its
# record's fields as JSON (what a trace file of that rank would hold).
CHILD = textwrap.dedent("""
    import json
    from neuron_sim.runtime import Runtime, RuntimeConfig
    from neuron_sim.trace import TraceSession, TraceSink

    sink = TraceSink()
    runtime = Runtime(RuntimeConfig.from_env({}), trace=sink)
    with TraceSession(sink=sink) as session:
        q = runtime.device(0).default_queue
        q.submit(lambda: None, device_time_ns=2000.0, kind="collective", name="rank1_allreduce")
        q.synchronize()
    (r,) = session.records
    print(json.dumps({"pid": r.pid, "name": r.name, "anchor": [r.anchor.perf_counter_ns, r.anchor.time_ns],
                      "host": [r.host_start_ns, r.host_end_ns], "sim": [r.start_ns, r.end_ns]}))
""")


def _as_wall(pid, name, anchor: ClockAnchor, host, sim) -> dict:
    return {"pid": pid, "name": name, "host_wall": anchor.wall_ns(host[0]), "sim_wall": anchor.sim_wall_ns(sim[0])}


def test_records_of_two_processes_merge_in_the_order_they_happened(runtime, sink):
    q = runtime.device(0).default_queue
    with TraceSession(sink=sink) as session:
        q.submit(lambda: None, device_time_ns=1000.0, kind="collective", name="rank0_before")
        q.synchronize()
        child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=120,
                               env={**os.environ, "PYTHONHASHSEED": "0"})
        assert child.returncode == 0, child.stderr
        q.submit(lambda: None, device_time_ns=1000.0, kind="collective", name="rank0_after")
        q.synchronize()
    other = json.loads(child.stdout)
    mine = [_as_wall(r.pid, r.name, r.anchor, (r.host_start_ns, r.host_end_ns), (r.start_ns, r.end_ns))
            for r in session.records]
    theirs = _as_wall(other["pid"], other["name"], ClockAnchor(*other["anchor"]), other["host"], other["sim"])
    assert theirs["pid"] != os.getpid() and {m["pid"] for m in mine} == {os.getpid()}
    merged = sorted(mine + [theirs], key=lambda e: e["host_wall"])
    assert [e["name"] for e in merged] == ["rank0_before", "rank1_allreduce", "rank0_after"]
    # Simulated time 0 of each runtime is its creation: the child's runtime started after ours,
    # so on the wall clock its device work starts after our first task's, and our own simulated
    # clock kept counting (rank0_after at 1000 ns on ours).
    assert mine[0]["sim_wall"] < theirs["sim_wall"]
    assert [r.start_ns for r in session.records] == [0.0, 1000.0] and other["sim"] == [0.0, 2000.0]
