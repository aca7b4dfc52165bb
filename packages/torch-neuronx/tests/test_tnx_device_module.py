"""torch.neuron / torch_neuronx device functions and torch.accelerator on neuron."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx


def test_device_count_and_availability():
    assert torch.neuron.is_available()
    assert torch_neuronx.is_available()
    n = torch.neuron.device_count()
    assert n == torch_neuronx.device_count() == torch.accelerator.device_count() >= 1
    from tnx_helpers import torch_neuronx_runtime

    assert n == torch_neuronx_runtime().device_count


def test_current_and_set_device():
    assert torch.neuron.current_device() == 0
    if torch.neuron.device_count() < 2:
        pytest.skip("needs two devices")
    torch.neuron.set_device(1)
    assert torch.neuron.current_device() == torch_neuronx.current_device() == 1
    assert torch.accelerator.current_device_index() == 1
    t = torch.ones(2, device="neuron")
    assert t.device == torch.device("neuron", 1)
    torch.neuron.set_device("neuron:0")
    assert torch.neuron.current_device() == 0
    with torch.neuron.device(1):
        assert torch.neuron.current_device() == 1
    assert torch.neuron.current_device() == 0
    torch.accelerator.set_device_index(1)
    assert torch.neuron.current_device() == 1


def test_set_device_rejects_bad_index():
    n = torch.neuron.device_count()
    with pytest.raises(ValueError, match=f"invalid neuron device index {n}"):
        torch.neuron.set_device(n)
    with pytest.raises(ValueError, match="expected a neuron device"):
        torch.neuron.set_device("cpu")
    assert torch.neuron.current_device() == 0


def test_synchronize_waits_for_queued_work():
    x = torch.randn(64, 64, device="neuron")
    for _ in range(5):
        x = x @ x / 8
    torch.neuron.synchronize()
    from tnx_helpers import torch_neuronx_runtime

    assert torch_neuronx_runtime().device(0).query()
    torch_neuronx.synchronize(0)
    torch.neuron.synchronize("neuron:0")
    torch.accelerator.synchronize()


def test_get_device_properties():
    props = torch.neuron.get_device_properties(0)
    assert props is torch_neuronx.get_device_properties("neuron:0") or props == torch_neuronx.get_device_properties("neuron:0")
    assert "NeuronCore" in props.name
    assert props.total_memory == 12 * 1024**3  # trn2: 96 GiB over 8 physical cores, LNC=1
    assert props.total_memory == torch.neuron.mem_get_info(0)[1]
    assert torch.neuron.get_device_name(0) == props.name
    with pytest.raises(ValueError, match="invalid neuron device index"):
        torch.neuron.get_device_properties(torch.neuron.device_count())


def test_accelerator_api():
    assert torch.accelerator.current_accelerator() == torch.device("neuron")
    assert torch.accelerator.is_available()
    assert torch.accelerator.device_count() == torch.neuron.device_count()
    before = torch.accelerator.memory_allocated(0)
    t = torch.empty(1024, device="neuron")
    assert torch.accelerator.memory_allocated(0) == before + t.nbytes
    assert torch.accelerator.memory_stats(0)["allocated_bytes.all.current"] == before + t.nbytes
    assert torch.accelerator.max_memory_allocated(0) >= before + t.nbytes
    assert torch.accelerator.memory_reserved(0) == torch.neuron.memory_reserved(0)
    torch.accelerator.reset_peak_memory_stats(0)
    torch.accelerator.empty_cache()
    assert torch.accelerator.get_memory_info(0)[1] == torch.neuron.get_device_properties(0).total_memory
    del t
    stream = torch.accelerator.current_stream()
    assert stream.device.type == "neuron"
    torch.accelerator.synchronize()


def test_amp_helpers():
    assert torch.neuron.get_amp_supported_dtype() == [torch.bfloat16, torch.float16]
    assert torch.neuron.is_bf16_supported()
    assert torch.amp.is_autocast_available("neuron")
