"""A graph that cannot be lowered raises an error naming the op and the user's source line, or runs
eagerly under the eager fallback (option or TORCH_NEURONX_COMPILE_FALLBACK)."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from torch_neuronx.dynamo import NeuronCompileError, NeuronCompileFallbackWarning


def _uses_unsupported(x):
    y = x * 2
    return torch.special.i0(y) + 1  # this line is the one the error must name


def _line_of(fn, text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def test_unsupported_op_names_op_and_source_line():
    torch._dynamo.reset()
    with pytest.raises(Exception) as info:
        torch.compile(_uses_unsupported, backend="neuron")(torch.randn(4, 4).to("neuron"))
    err = info.value
    while err is not None and not isinstance(err, NeuronCompileError):
        err = err.__cause__ or err.__context__
    assert isinstance(err, NeuronCompileError), info.value
    message = str(err)
    assert "i0" in err.op or "i0" in message
    assert f"test_tnx_compile_errors.py:{_line_of(_uses_unsupported, 'special.i0')}" in message
    assert "TORCH_NEURONX_COMPILE_FALLBACK=eager" in message


def test_eager_fallback_option_runs_the_graph(monkeypatch):
    x = torch.randn(4, 4)
    for how in ("option", "env"):
        torch._dynamo.reset()
        torch_neuronx.reset_compile_metrics()
        if how == "env":
            monkeypatch.setenv("TORCH_NEURONX_COMPILE_FALLBACK", "eager")
            compiled = torch.compile(_uses_unsupported, backend="neuron")
        else:
            compiled = torch.compile(_uses_unsupported, backend="neuron", options={"fallback": "eager"})
        with pytest.warns(NeuronCompileFallbackWarning, match="i0"):
            got = compiled(x.to("neuron"))
        torch.testing.assert_close(got.cpu(), _uses_unsupported(x), rtol=1e-5, atol=1e-5)
        assert torch_neuronx.compile_metrics()["eager_fallbacks"] == 1


def test_bad_options_are_refused():
    torch._dynamo.reset()
    with pytest.raises(Exception, match="fallback"):
        torch.compile(lambda a: a + 1, backend="neuron", options={"fallback": "maybe"})(torch.ones(2).to("neuron"))
    torch._dynamo.reset()
    with pytest.raises(Exception, match="unknown options"):
        torch.compile(lambda a: a + 1, backend="neuron", options={"fusion": 3})(torch.ones(2).to("neuron"))
