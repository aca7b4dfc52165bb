"""Op tracking: get_executed_ops / get_fallback_ops / clear_op_tracking, and the once-per-op warning."""

from __future__ import annotations

import torch
import torch_neuronx
from tnx_helpers import run_python


def test_compiled_ops_are_executed_not_fallback():
    x = torch.ones(3, device="neuron")
    (x * 2).sum()
    torch.neuron.synchronize()
    assert {"aten::mul", "aten::sum", "aten::fill_"} <= set(torch_neuronx.get_executed_ops())
    assert torch_neuronx.get_fallback_ops() == []


def test_executed_and_fallback_ops(fallback_only):
    x = torch.ones(3, device="neuron")
    (x * 2).sum()
    torch.neuron.synchronize()
    executed = torch_neuronx.get_executed_ops()
    fallback = torch_neuronx.get_fallback_ops()
    assert {"aten::mul", "aten::sum", "aten::fill_"} <= set(fallback)
    assert set(fallback) <= set(executed)
    assert "aten::copy_" not in fallback  # copies are native transfers
    torch.ones(2).to("neuron")
    assert "aten::copy_" in torch_neuronx.get_executed_ops()


def test_clear_op_tracking(fallback_only):
    torch.ones(2, device="neuron").neg()
    assert "aten::neg" in torch_neuronx.get_fallback_ops()
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == [] and torch_neuronx.get_executed_ops() == []


def test_cpu_only_work_is_not_tracked():
    torch.ones(3).neg().sum()
    assert torch_neuronx.get_executed_ops() == []


def test_warning_once_per_op():
    # A fresh process: the warning is once per op and process, whatever other tests ran before.
    proc = run_python(
        """
        import warnings
        import torch, torch_neuronx
        from torch_neuronx.ops.tracking import NeuronFallbackWarning, get_op_counts
        x = torch.ones(3, device="neuron")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NeuronFallbackWarning)
            torch.atan2(x, x)
            torch.atan2(x, x)
            torch.atan2(x + 1, x)
        messages = [str(w.message) for w in caught if issubclass(w.category, NeuronFallbackWarning)]
        print(messages.count("Operator 'aten::atan2' executed via CPU fallback"), get_op_counts()["fallback"]["aten::atan2"])
        """,
        env={"TORCH_NEURONX_EAGER_BACKEND": "fallback"},
    )
    assert proc.stdout.split() == ["1", "3"], proc.stdout


MODEL_FILE = """
import torch


class Router(torch.nn.Module):
    def forward(self, x):
        ids = torch.nonzero(x > 0)  # FALLBACK LINE
        return ids
"""


def test_the_warning_names_the_model_files_line(tmp_path):
    """The warning points at the first frame outside torch and torch_neuronx - the model file's
    line that issued the op (reached through nn.Module's __call__), not our dispatcher's."""
    (tmp_path / "tiny_router.py").write_text(MODEL_FILE)
    line = MODEL_FILE.splitlines().index(next(s for s in MODEL_FILE.splitlines() if "FALLBACK LINE" in s)) + 1
    proc = run_python(
        f"""
        import sys, warnings
        sys.path.insert(0, {str(tmp_path)!r})
        import torch, torch_neuronx
        from torch_neuronx.ops.tracking import NeuronFallbackWarning
        from tiny_router import Router
        x = torch.tensor([1.0, -2.0, 3.0], device="neuron")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", NeuronFallbackWarning)
            Router()(x)
        found = [w for w in caught if issubclass(w.category, NeuronFallbackWarning)]
        print(len(found), found[0].filename, found[0].lineno)
        """
    )
    count, filename, lineno = proc.stdout.split()
    assert count == "1" and filename == str(tmp_path / "tiny_router.py") and int(lineno) == line, proc.stdout
