"""Bad input on the compiled eager path: dtypes the NeuronCore lacks fall back (documented policy),
a compile failure is a clear error or a warned fallback, and the NEFF disk cache survives corrupt
entries and an unwritable directory."""

from __future__ import annotations

import glob
import os

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal, run_python


def test_float64_runs_through_cpu_fallback_exactly(neuron):
    x = torch.randn(5, 7, dtype=torch.float64)
    torch_neuronx.clear_op_tracking()
    assert_equal((x.to(neuron) * 3 + 1).exp(), (x * 3 + 1).exp())
    assert "aten::exp" in torch_neuronx.get_fallback_ops()
    assert "float64" in torch_neuronx.get_fallback_reasons()["aten::exp"]


@pytest.fixture
def failing_compiler(monkeypatch):
    """neuronx-cc failing on every graph the eager path compiles (not for lack of an op lowering)."""
    from neuronxcc.compiler import CompileError
    from torch_neuronx.compiled import dispatch

    def compile_neff(graph, arch):
        raise CompileError("tile.sbuf_overflow", "does not fit in SBUF", op="reduce", shapes=["4x1023xfloat32"])

    monkeypatch.setattr(dispatch, "compile_neff", compile_neff)


def test_compile_failure_warns_and_falls_back(neuron, failing_compiler):
    from torch_neuronx.compiled.dispatch import CompileFailedWarning

    x = torch.randn(4, 1023)
    with pytest.warns(CompileFailedWarning, match=r"cumsum\(\[4, 1023\]:float32\).*does not fit in SBUF"):
        got = x.to(neuron).cumsum(1)
    torch.testing.assert_close(got.cpu(), x.cumsum(1))


def test_compile_failure_raises_when_fallback_is_only_for_unimplemented_ops(neuron, failing_compiler, monkeypatch):
    from torch_neuronx.compiled.dispatch import STRICT_ENV

    monkeypatch.setenv(STRICT_ENV, "1")
    with pytest.raises(RuntimeError, match=r"cumsum\(\[3, 1021\]:float32\) failed to compile.*does not fit in SBUF"):
        torch.randn(3, 1021).to(neuron).cumsum(1)  # the input drawn on the host: the failing compiler fails every op


CACHED_OP = """
import warnings, torch, torch_neuronx
x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    y = (x.to("neuron") * 2.5).cpu()
assert torch.equal(y, x * 2.5), y
print("WARNINGS:", " | ".join(str(w.message) for w in caught if "fallback" not in str(w.message)))
"""


def test_corrupt_disk_entry_is_rebuilt_with_a_warning(tmp_path):
    env = {"TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path)}
    run_python(CACHED_OP, env)
    entries = glob.glob(str(tmp_path / "**" / "*.neff"), recursive=True)
    assert entries
    for path in entries:
        with open(path, "r+b") as f:
            f.seek(os.path.getsize(path) // 2)
            f.write(b"\xde\xad\xbe\xef" * 8)
    out = run_python(CACHED_OP, env).stdout
    assert "discarding unusable NEFF cache entry" in out
    out = run_python(CACHED_OP, env).stdout  # rebuilt and rewritten: clean again
    assert "discarding" not in out


def test_unwritable_cache_directory_keeps_working_from_memory(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache directory should be")
    out = run_python(CACHED_OP, {"TORCH_NEURONX_NEFF_CACHE_DIR": str(blocker)}).stdout
    assert out.startswith("WARNINGS:")
