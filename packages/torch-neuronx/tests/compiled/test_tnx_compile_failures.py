"""A compile that fails inside an eager op - the compiler refusing the graph, or an unexpected
exception in a lowering - breaks nothing after it: the call falls back to CPU or raises at the
call, and later ops (the same op included) compile and run as before."""

from __future__ import annotations

import pytest
import torch
from neuronxcc.compiler import CompileError
from tnx_helpers import assert_close_to_cpu, assert_equal
from torch_neuronx.compiled import dispatch


def _failing_once(monkeypatch, error):
    real = dispatch.compile_neff
    calls = []

    def compile_neff(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise error
        return real(*args, **kwargs)

    monkeypatch.setattr(dispatch, "compile_neff", compile_neff)
    return calls


def _ordinary_ops_run():
    a = torch.arange(12.0).reshape(3, 4)
    x = a.to("neuron")
    assert_close_to_cpu((x * 2 + 1).exp().sum(1), (a * 2 + 1).exp().sum(1))
    assert_equal(x @ x.t(), a @ a.t())


def test_an_unexpected_error_in_a_compile_raises_at_the_call_and_later_ops_run(monkeypatch):
    a = torch.rand(5, 11)  # a shape no other test compiles: atan2 builds its NEFF
    x, y = a.to("neuron"), (a + 1).to("neuron")
    torch.neuron.synchronize()
    calls = _failing_once(monkeypatch, ValueError("a lowering bug"))
    with pytest.raises(ValueError, match="a lowering bug"):
        torch.atan2(x, y)
    assert calls == [1]
    _ordinary_ops_run()
    # The failed build is not remembered: the same call compiles now and gives CPU's values.
    assert_close_to_cpu(torch.atan2(x, y), torch.atan2(a, a + 1))
    torch.neuron.synchronize()


def test_a_compile_the_compiler_refuses_falls_back_to_cpu_and_later_ops_run(monkeypatch):
    a = torch.rand(7, 3)
    x, y = a.to("neuron"), (a + 1).to("neuron")
    torch.neuron.synchronize()
    _failing_once(monkeypatch, CompileError("compile.test_refusal", "refused for the test", op="atan2"))
    with pytest.warns(dispatch.CompileFailedWarning, match="refused for the test"):
        z = torch.atan2(x, y)
    assert_close_to_cpu(z, torch.atan2(a, a + 1))
    _ordinary_ops_run()
    torch.neuron.synchronize()
