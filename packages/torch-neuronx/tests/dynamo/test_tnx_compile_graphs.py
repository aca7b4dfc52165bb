"""Graph breaks, guards and recompiles behave as PyTorch documents; metrics count the graphs; NEFFs
are cached by graph hash (memory, then disk; a corrupt disk entry is rebuilt with a warning)."""

from __future__ import annotations

import os
import warnings

import pytest
import torch
import torch_neuronx
from torch_neuronx.dynamo.graph_cache import CACHE


def _fn(x, y):
    z = torch.relu(x @ y) * 2.0
    print("graph break")  # noqa: T201 - dynamo splits the graph here
    return (z + 1).sum(dim=-1)


def test_graph_break_runs_both_graphs(capsys):
    torch._dynamo.reset()
    torch_neuronx.reset_compile_metrics()
    x, y = torch.randn(4, 8), torch.randn(8, 16)
    got = torch.compile(_fn, backend="neuron")(x.to("neuron"), y.to("neuron"))
    expected = _fn(x, y)
    torch.testing.assert_close(got.cpu(), expected, rtol=1e-5, atol=1e-5)
    assert torch_neuronx.compile_metrics()["graphs_compiled"] + torch_neuronx.compile_metrics()["cache_hits"] == 2


def test_new_shape_recompiles_static_and_guards_hit():
    torch._dynamo.reset()
    torch_neuronx.reset_compile_metrics()

    def f(a):
        return torch.softmax(a * 3.0, dim=-1)

    cf = torch.compile(f, backend="neuron", dynamic=False)
    for n in (4, 4, 6, 4):
        a = torch.randn(n, 32)
        torch.testing.assert_close(cf(a.to("neuron")).cpu(), f(a), rtol=1e-5, atol=1e-6)
    graphs = torch_neuronx.compile_metrics()["graphs"]
    assert len(graphs) == 2  # one per shape; the repeated shapes reuse their graph through dynamo's guards


def test_dynamic_shapes_refused_with_advice():
    torch._dynamo.reset()

    def f(a):
        return a.exp() + 1

    with pytest.raises(Exception, match=r"dynamic=False.*pad_to_bucket"):
        torch.compile(f, backend="neuron", dynamic=True)(torch.randn(5, 3).to("neuron"))


def test_cache_memory_then_disk_then_corrupt_rebuilt():
    def f(a, b):
        return (a * b + a).tanh()

    a, b = torch.randn(8, 24), torch.randn(8, 24)
    expected = f(a, b)

    def compile_fresh():
        torch._dynamo.reset()
        got = torch.compile(f, backend="neuron")(a.to("neuron"), b.to("neuron"))
        torch.testing.assert_close(got.cpu(), expected, rtol=1e-6, atol=1e-6)
        return torch_neuronx.compile_metrics()["graphs"][-1]["source"]

    torch_neuronx.reset_compile_metrics()
    CACHE.clear()
    first = compile_fresh()
    assert first in ("compiled", "disk")  # another test of this session may have compiled it
    assert compile_fresh() == "memory"
    CACHE.clear()
    assert compile_fresh() == "disk"
    # Corrupt every entry of this session's cache: the next compile warns, rebuilds and still runs.
    directory = os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"]
    for root, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "r+b") as fh:
                fh.seek(0)
                fh.write(b"garbage!")
    CACHE.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert compile_fresh() == "compiled"
    assert any("corrupt" in str(w.message).lower() or "cache" in str(w.message).lower() for w in caught)
