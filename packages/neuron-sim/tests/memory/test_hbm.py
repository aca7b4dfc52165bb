"""Hbm: real host memory accounted against a capacity; address resolution, OOM, stats."""

import ctypes

import numpy as np
import pytest
from neuron_sim import AccessPatternError, Hbm, NeuronSimError, OutOfMemoryError
from neuron_sim.memory.hbm import ALIGNMENT, POISON_BYTE

KiB = 1024


def test_allocation_is_real_aligned_host_memory():
    hbm = Hbm(1 << 20)
    block = hbm.allocate(1000, tag="x")
    assert block.address % ALIGNMENT == 0
    assert block.address == block.array.ctypes.data and block.nbytes == 1000 and block.array.nbytes == 1000
    block.view(np.float32)[:4] = [1.0, 2.0, 3.0, 4.0]
    # Read the bytes through the raw pointer, as a C extension holding the address would.
    raw = ctypes.string_at(block.address, 16)
    assert np.frombuffer(raw, dtype=np.float32).tolist() == [1.0, 2.0, 3.0, 4.0]
    assert block.tag == "x"


def test_fresh_memory_is_poisoned_unless_asked_not_to():
    hbm = Hbm(1 << 20)
    block = hbm.allocate(256)
    assert (block.array == POISON_BYTE).all()
    assert np.isnan(block.view(np.float32)).all()
    assert hbm.allocate(256, poison=False).nbytes == 256


def test_view_with_shape_and_offset():
    hbm = Hbm(1 << 20)
    block = hbm.allocate(64)
    block.array[:] = np.arange(64, dtype=np.uint8)
    v = block.view(np.uint16, (2, 3), offset=4)
    assert v.shape == (2, 3) and v[0, 0] == 4 | (5 << 8)
    assert block.view(np.uint32, offset=8).shape == (14,)


def test_resolve_finds_the_block_and_offset():
    hbm = Hbm(1 << 20)
    a, b = hbm.allocate(100), hbm.allocate(300)
    assert hbm.resolve(a.address) == (a, 0)
    blk, off = hbm.resolve(b.address + 299, 1)
    assert blk is b and off == 299
    blk, off = hbm.resolve(a.address + 10, 90)
    assert blk is a and off == 10


def test_resolve_outside_live_memory_is_an_error():
    hbm = Hbm(1 << 20)
    a = hbm.allocate(100)
    for address, nbytes in ((a.address + 90, 20), (a.address - 1, 1), (a.address + 100, 1)):
        with pytest.raises(AccessPatternError) as info:
            hbm.resolve(address, nbytes)
        assert info.value.rule == "hbm.unmapped" and f"{address:#x}" in str(info.value)
    hbm.free(a)
    with pytest.raises(AccessPatternError):
        hbm.resolve(a.address)


def test_oom_is_catchable_and_names_requested_and_free_bytes():
    hbm = Hbm(64 * KiB, name="HBM[nc0]")
    keep = hbm.allocate(40 * KiB)
    with pytest.raises(OutOfMemoryError) as info:
        hbm.allocate(30 * KiB)
    err = info.value
    assert isinstance(err, MemoryError) and isinstance(err, NeuronSimError)
    assert err.requested == 30 * KiB and err.free == 24 * KiB and err.capacity == 64 * KiB
    text = str(err)
    assert "30.00 KiB" in text and "24.00 KiB" in text and "64.00 KiB" in text and "HBM[nc0]" in text
    assert hbm.stats.num_ooms == 1
    # the device keeps working: nothing leaked, smaller allocations still succeed
    assert hbm.allocated == 40 * KiB
    small = hbm.allocate(24 * KiB)
    hbm.free(keep)
    hbm.free(small)
    assert hbm.allocate(64 * KiB).nbytes == 64 * KiB


def test_oom_message_for_small_sizes_is_in_bytes():
    hbm = Hbm(128)
    hbm.allocate(100)
    with pytest.raises(OutOfMemoryError) as info:
        hbm.allocate(10)
    assert "10 B" in str(info.value) and "0 B free" in str(info.value)


def test_stats_charge_aligned_sizes_and_track_peak():
    hbm = Hbm(1 << 20)
    a = hbm.allocate(1)
    b = hbm.allocate(65)
    c = hbm.allocate(0)
    assert hbm.allocated == 64 + 128 + 64
    assert hbm.free_bytes == (1 << 20) - 256
    hbm.free(b)
    assert hbm.allocated == 128 and hbm.stats.peak_allocated_bytes == 256
    hbm.reset_peak()
    assert hbm.stats.peak_allocated_bytes == 128
    d = hbm.allocate(1000)
    assert hbm.stats.peak_allocated_bytes == 128 + 1024
    stats = hbm.stats.as_dict()
    assert stats == {"allocated_bytes": 1152, "peak_allocated_bytes": 1152, "num_allocs": 4, "num_frees": 1, "num_ooms": 0}
    assert [x.address for x in hbm.live_allocations()] == sorted(x.address for x in (a, c, d))


def test_double_free_is_refused():
    hbm = Hbm(1 << 20)
    a = hbm.allocate(10)
    hbm.free(a)
    with pytest.raises(ValueError, match="double free"):
        hbm.free(a)
    assert hbm.allocated == 0 and hbm.stats.num_frees == 1


def test_negative_size_is_refused():
    with pytest.raises(ValueError):
        Hbm(1024).allocate(-1)


def test_host_memory_exhaustion_is_reported_as_oom_and_undone(monkeypatch):
    hbm = Hbm(1 << 40)
    hbm.allocate(64)

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(np, "empty", no_memory)
    with pytest.raises(OutOfMemoryError, match="host memory exhausted"):
        hbm.allocate(1 << 30)
    monkeypatch.undo()
    assert hbm.allocated == 64 and hbm.stats.num_allocs == 1 and hbm.stats.num_ooms == 1
    assert hbm.stats.peak_allocated_bytes == 64
