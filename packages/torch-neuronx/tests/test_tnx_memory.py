"""Memory stats track allocations: torch.neuron.memory_* and torch.accelerator.memory_* agree with
each other and with the simulated HBM's accounting."""

from __future__ import annotations

import gc

import pytest
import torch
import torch_neuronx
from tnx_helpers import run_python, torch_neuronx_runtime


@pytest.fixture(autouse=True)
def _quiescent_heap():
    """Garbage of earlier tests (tensors held by failed calls' tracebacks) must not be collected
    in the middle of a test's before/after comparison."""
    gc.collect()


def test_allocated_follows_tensors():
    base = torch.neuron.memory_allocated()
    a = torch.empty(1000, dtype=torch.float32, device="neuron")
    assert torch.neuron.memory_allocated() == base + 4000
    b = torch.empty(10, 10, dtype=torch.bfloat16, device="neuron")
    assert torch_neuronx.memory_allocated() == base + 4200
    view = a[10:20]  # views share storage: nothing allocated
    assert torch.neuron.memory_allocated(0) == base + 4200
    del a, view
    assert torch.neuron.memory_allocated("neuron:0") == base + 200
    del b
    assert torch.neuron.memory_allocated() == base


def test_peak_and_reset():
    base = torch.neuron.memory_allocated()
    torch.neuron.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base
    big = torch.empty(1 << 20, dtype=torch.uint8, device="neuron")
    del big
    assert torch.neuron.max_memory_allocated() == base + (1 << 20)
    assert torch_neuronx.max_memory_allocated() == base + (1 << 20)
    assert torch.neuron.max_memory_reserved() >= base + (1 << 20)
    torch_neuronx.reset_peak_memory_stats()
    assert torch.neuron.max_memory_allocated() == base


def test_reserved_and_empty_cache():
    hbm = torch_neuronx_runtime().device(0).hbm
    torch.neuron.empty_cache()
    a = torch.empty(4096, device="neuron")
    address = a.data_ptr()
    reserved, in_hbm = torch.neuron.memory_reserved(), hbm.allocated
    assert reserved >= torch.neuron.memory_allocated()
    del a
    # The caching allocator keeps the freed block reserved and hands it to the next request.
    assert torch.neuron.memory_reserved() == reserved
    b = torch.empty(4096, device="neuron")
    assert b.data_ptr() == address and torch.neuron.memory_reserved() == reserved
    del b
    torch_neuronx.empty_cache()  # the block goes back to the HBM: every segment left holds a live tensor
    stats = torch.neuron.memory_stats()
    assert stats["segment.all.current"] == stats["allocation.all.current"]
    assert torch.neuron.memory_reserved() <= reserved - 4096 * 4 and hbm.allocated <= in_hbm - 4096 * 4


def test_an_allocation_that_fits_only_without_the_cache_releases_it():
    # A 64 MiB HBM (the runtime's test knob), so filling it costs little host memory.
    proc = run_python(
        """
        import dataclasses
        from neuron_sim.runtime import Runtime, RuntimeConfig, runtime
        runtime._set(Runtime(dataclasses.replace(RuntimeConfig.from_env(), hbm_capacity=64 << 20)))
        import torch, torch_neuronx
        big = torch.empty(40 << 20, dtype=torch.uint8, device="neuron")
        del big  # cached: the HBM still holds it
        assert torch.neuron.memory_reserved() == 40 << 20 and torch.neuron.memory_allocated() == 0
        other = torch.empty(48 << 20, dtype=torch.uint8, device="neuron")  # fits only once the cache is released
        stats = torch.neuron.memory_stats()
        print(stats["num_alloc_retries"], stats["num_ooms"], torch.neuron.memory_reserved() == 48 << 20)
        """,
        env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"},
    )
    assert proc.stdout.split() == ["1", "0", "True"]


def test_caching_can_be_turned_off():
    proc = run_python(
        """
        import torch, torch_neuronx
        a = torch.empty(4096, device="neuron")
        del a
        print(torch.neuron.memory_reserved() == torch.neuron.memory_allocated() == 0)
        """,
        env={"TORCH_NEURONX_NO_MEMORY_CACHING": "1"},
    )
    assert proc.stdout.strip() == "True"


def test_memory_stats_dict():
    base = torch.neuron.memory_stats()
    x = torch.empty(256, dtype=torch.int64, device="neuron")
    stats = torch_neuronx.memory_stats()
    assert stats["allocated_bytes.all.current"] == base["allocated_bytes.all.current"] + 2048
    assert stats["allocation.all.current"] == base["allocation.all.current"] + 1
    assert stats["allocated_bytes.all.allocated"] == base["allocated_bytes.all.allocated"] + 2048
    del x
    after = torch.neuron.memory_stats()
    assert after["allocated_bytes.all.freed"] == base["allocated_bytes.all.freed"] + 2048
    assert after["allocated_bytes.all.current"] == base["allocated_bytes.all.current"]
    assert "num_ooms" in after
    torch.neuron.reset_accumulated_memory_stats()
    assert torch.neuron.memory_stats()["allocated_bytes.all.allocated"] == 0
    assert "simulated HBM" in torch.neuron.memory_summary()


def test_stats_match_simulated_hbm():
    hbm = torch_neuronx_runtime().device(0).hbm
    torch.neuron.empty_cache()  # no cached block may serve these requests
    before_live, before_bytes = len(hbm.live_allocations()), torch.neuron.memory_allocated()
    tensors = [torch.empty(n, dtype=torch.uint8, device="neuron") for n in (64, 128, 4096)]
    assert len(hbm.live_allocations()) == before_live + 3
    assert torch.neuron.memory_allocated() - before_bytes == 64 + 128 + 4096
    free, total = torch.neuron.mem_get_info()
    assert total == hbm.capacity and free == total - torch.neuron.memory_reserved()
    del tensors
    assert torch.neuron.memory_allocated() == before_bytes
    torch.neuron.empty_cache()
    assert len(hbm.live_allocations()) == before_live


def test_zero_byte_tensors_allocate_nothing():
    base = torch.neuron.memory_allocated()
    z = torch.empty(0, 5, device="neuron")
    assert z.data_ptr() == 0
    assert torch.neuron.memory_allocated() == base
    assert (z + 1).shape == (0, 5)
    assert z.sum().item() == 0


def test_training_step_returns_to_baseline():
    gc.collect()
    base = torch.neuron.memory_allocated()
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("neuron")
    params = sum(p.nbytes for p in model.parameters())
    assert torch.neuron.memory_allocated() == base + params
    opt = torch.optim.Adam(model.parameters())
    loss = model(torch.randn(32, 64, device="neuron")).square().mean()
    loss.backward()
    opt.step()
    torch.neuron.synchronize()
    # weights + grads + two Adam moments (+ step counters on CPU)
    assert torch.neuron.memory_allocated() >= base + 4 * params
    del model, opt, loss
    gc.collect()
    assert torch.neuron.memory_allocated() == base


def test_invalid_device_in_memory_api():
    n = torch.neuron.device_count()
    with pytest.raises(ValueError, match="invalid neuron device index"):
        torch.neuron.memory_allocated(n)
