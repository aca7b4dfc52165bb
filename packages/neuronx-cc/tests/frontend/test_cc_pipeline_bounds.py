"""torch-mlir's pipeline runs in a bounded worker: a graph it runs away, aborts or segfaults on
(fed raw, past the FX rewrites that would fix it) is a ``LoweringStopped`` error naming the graph
and the bound, and the next graph lowers. The cases run in one interpreter of their own under an
address space limit, so a regression fails these tests instead of killing the suite or eating the
machine."""

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.frontend import pipeline  # noqa: E402

# Raw Torch-dialect modules (imported as the frontend imports them, minus its rewrites), lowered
# one after another; each result printed as "tag result".
SCRIPT = """
import os, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # the worker inherits it too
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from neuronxcc.frontend import LoweringStopped, pipeline
from neuronxcc.frontend.fx import torch_dialect_module

def raw(fn, *inputs):  # imported as is: none of fx_rewrites' rewrites
    return torch_dialect_module(make_fx(fn, tracing_mode="fake")(*inputs))

def stopped(tag, module, graph, **env):
    os.environ.update(env)
    try:
        pipeline.lower(module, graph)
    except LoweringStopped as err:
        assert err.graph == graph and err.op == "torch-mlir", err
        print(tag, "STOPPED", err.reason.replace(chr(10), " "))
    else:
        print(tag, "LOWERED")

RUNAWAY = raw(lambda x, g: torch.ops.aten.slice_scatter(x, g, 1, 8, 2**63 - 1), torch.randn(2, 16), torch.randn(2, 8))
NORMAL = raw(lambda x: (x.relu() * 2).sum(0), torch.randn(3, 5))

# The backward of q[..., 8:] (slice_scatter to 2**63 - 1) grew to 22 GB unbounded.
stopped("memory", RUNAWAY, "graph0_backward", NEURONX_CC_LOWERING_MEMORY_MB="1024")
stopped("after_memory", NORMAL, "graph1_forward")
stopped("time", RUNAWAY, "graph2_backward", NEURONX_CC_LOWERING_MEMORY_MB="0", NEURONX_CC_LOWERING_TIMEOUT="1")
os.environ.pop("NEURONX_CC_LOWERING_MEMORY_MB"), os.environ.pop("NEURONX_CC_LOWERING_TIMEOUT")
stopped("after_time", NORMAL, "graph3_forward")
# stablehlo.clamp over a self its bounds broadcast: LLVM ERROR, abort
stopped("abort", raw(lambda x, m: torch.clamp_min(x, m), torch.randn(1), torch.randn(2)), "clamp_graph")
# index_put with no indices: segfault
stopped("segv", raw(lambda x, v: torch.ops.aten.index_put(x, [], v, True), torch.rand([]), torch.tensor([1.0])), "index_graph")
stopped("after_crash", NORMAL, "normal_graph")
pid = os.fork()
if pid == 0:
    try:
        pipeline.lower(NORMAL, "child")
        os._exit(0)
    except BaseException:
        os._exit(1)
_, status = os.waitpid(pid, 0)
print("fork child exit", os.waitstatus_to_exitcode(status))
stopped("after_fork", NORMAL, "parent_after")
isolated = pipeline.lower(NORMAL, "g")
os.environ["NEURONX_CC_LOWERING_ISOLATION"] = "0"
print("in_process same", pipeline.lower(NORMAL, "g") == isolated)
"""


@pytest.fixture(scope="module")
def results() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NEURONX_CC_LOWERING_")}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"rc {proc.returncode}\n{proc.stdout}\n{proc.stderr[-3000:]}"
    return dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)


def test_a_runaway_stops_at_the_memory_bound_with_its_stage(results):
    assert results["memory"].startswith("STOPPED"), results
    assert "memory bound of 1024 MB (NEURONX_CC_LOWERING_MEMORY_MB" in results["memory"]
    assert "converting Torch ops to StableHLO" in results["memory"]  # the stage it was in
    assert results["after_memory"] == "LOWERED"  # a fresh worker


def test_a_runaway_stops_at_the_time_bound(results):
    assert results["time"].startswith("STOPPED") and "time bound of 1 s (NEURONX_CC_LOWERING_TIMEOUT" in results["time"]
    assert results["after_time"] == "LOWERED"


def test_crashes_of_torch_mlir_are_errors_and_the_next_graph_lowers(results):
    assert results["abort"].startswith("STOPPED torch-mlir's lowering was stopped: torch-mlir crashed (SIGABRT)")
    assert "Failed to infer result type(s)" in results["abort"]  # torch-mlir's own last words
    assert results["segv"].startswith("STOPPED torch-mlir's lowering was stopped: torch-mlir crashed (SIGSEGV)")
    assert results["after_crash"] == "LOWERED"


def test_a_forked_child_lowers_with_its_own_worker(results):
    assert results["fork"] == "child exit 0"
    assert results["after_fork"] == "LOWERED"


def test_lowering_in_process_gives_the_same_module(results):
    assert results["in_process"] == "same True"


@pytest.mark.parametrize("name, value", [(pipeline.MEMORY_ENV, "lots"), (pipeline.TIMEOUT_ENV, "-1")])
def test_bad_bounds_are_refused(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=f"{name}={value!r}"):
        pipeline.bounds()


def test_default_bounds(monkeypatch):
    for name in (pipeline.MEMORY_ENV, pipeline.TIMEOUT_ENV, pipeline.ISOLATION_ENV):
        monkeypatch.delenv(name, raising=False)
    assert pipeline.bounds() == pipeline.Bounds(4096, 300.0, True)
