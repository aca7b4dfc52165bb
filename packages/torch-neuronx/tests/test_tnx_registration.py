"""Registration: PrivateUse1 renamed to ``neuron``, plain torch.Tensor objects, autoload."""

from __future__ import annotations

import torch
import torch_neuronx
from tnx_helpers import run_python


def test_privateuse1_is_renamed_to_neuron():
    assert torch._C._get_privateuse1_backend_name() == "neuron"
    assert torch.device("neuron").type == "neuron"
    assert torch.neuron is torch_neuronx.neuron
    assert torch.get_device_module("neuron") is torch_neuronx.neuron


def test_tensors_are_plain_torch_tensors():
    t = torch.ones(2, 3, device="neuron")
    assert type(t) is torch.Tensor
    assert t.device == torch.device("neuron", 0)
    assert t.device.type == "neuron"
    assert t.is_neuron
    assert not torch.ones(1).is_neuron
    assert t.untyped_storage().device.type == "neuron"


def test_generated_methods():
    t = torch.arange(4).neuron()
    assert t.device.type == "neuron"
    m = torch.nn.Linear(2, 2).neuron()
    assert m.weight.device.type == "neuron"
    s = torch.UntypedStorage(8).neuron()
    assert s.device.type == "neuron" and s.is_neuron


def test_autoload_without_import():
    # The torch.backends entry point imports torch_neuronx at `import torch`.
    proc = run_python(
        """
        import sys, torch
        t = torch.ones(2, device='neuron')
        assert 'torch_neuronx' in sys.modules
        print(t.cpu().tolist(), t.device)
        """
    )
    assert "[1.0, 1.0] neuron:0" in proc.stdout


def test_autoload_can_be_disabled():
    proc = run_python(
        """
        import sys, torch
        assert 'torch_neuronx' not in sys.modules
        import torch_neuronx
        print(torch.ones(2, device='neuron').sum().item())
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.stdout.strip() == "2.0"


def test_version_and_public_api():
    assert torch_neuronx.__version__.startswith("2.13")
    for name in ["device_count", "current_device", "set_device", "synchronize", "get_device_properties", "is_available",
                 "manual_seed", "memory_allocated", "memory_reserved", "max_memory_allocated", "reset_peak_memory_stats",
                 "empty_cache", "memory_stats", "Stream", "Event", "get_fallback_ops", "get_executed_ops",
                 "clear_op_tracking", "nki_op"]:
        assert callable(getattr(torch_neuronx, name)), name
    for name in ["device_count", "current_device", "set_device", "synchronize", "get_device_properties", "is_available",
                 "manual_seed", "memory_allocated", "memory_reserved", "max_memory_allocated", "reset_peak_memory_stats",
                 "empty_cache", "memory_stats", "Stream", "Event"]:
        assert callable(getattr(torch.neuron, name)), name
