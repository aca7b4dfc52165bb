"""DataLoader(pin_memory=True) on a neuron machine, and pinned host memory."""

from __future__ import annotations

import torch
from tnx_helpers import assert_equal, run_python
from torch.utils.data import DataLoader, TensorDataset


def test_pin_memory():
    t = torch.arange(100.0)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned() and p.data_ptr() != t.data_ptr()
    assert_equal(p, t)
    assert torch.empty(10, pin_memory=True).is_pinned()
    assert torch.ones(0).pin_memory().is_pinned() in (True, False)  # empty: no crash


def test_dataloader_pin_memory_feeds_the_device():
    data = TensorDataset(torch.arange(64.0).reshape(32, 2), torch.arange(32))
    loader = DataLoader(data, batch_size=8, pin_memory=True)  # pins for the current accelerator: neuron
    seen = []
    for x, y in loader:
        assert x.is_pinned() and y.is_pinned()
        xd = x.to("neuron", non_blocking=True)
        seen.append((xd * 2).sum(dim=1).cpu())
        assert y.shape == (8,)
    assert_equal(torch.cat(seen), torch.arange(64.0).reshape(32, 2).sum(dim=1) * 2)


def test_dataloader_default_pin_device_and_workers():
    data = TensorDataset(torch.randn(16, 3))
    loader = DataLoader(data, batch_size=4, pin_memory=True, num_workers=1)
    batches = [b[0] for b in loader]
    assert all(b.is_pinned() for b in batches)
    assert torch.cat(batches).to("neuron").shape == (16, 3)


def test_the_host_allocator_is_registered_for_the_device_type():
    """torch asks for the PrivateUse1 host allocator by device type: empty_host_cache crashed the
    process (vLLM calls it at shutdown) while none was registered."""
    proc = run_python("""
        import torch, torch_neuronx
        assert float(torch.ones(3, device="neuron").sum()) == 3.0  # the device in use: the crash needed it
        pinned = torch.ones(4096).pin_memory()
        torch.accelerator.empty_host_cache()  # caches nothing: the pinned tensor stays valid
        print(pinned.is_pinned(), float(pinned.sum()))
    """)
    assert proc.stdout.split() == ["True", "4096.0"]
