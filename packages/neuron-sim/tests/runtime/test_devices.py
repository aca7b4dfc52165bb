"""Several devices: separate HBM accounting, index errors, buffers bound to the right device."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import OutOfMemoryError, ValidationError


def test_devices_account_hbm_separately(runtime):
    d0, d1 = runtime.device(0), runtime.device(1)
    a = d0.allocate(1 << 20, "a")
    b = d1.allocate(3 << 20, "b")
    assert d0.memory_stats()["allocated_bytes"] == 1 << 20
    assert d1.memory_stats()["allocated_bytes"] == 3 << 20
    assert runtime.device(2).memory_stats()["allocated_bytes"] == 0
    d0.free(a)
    assert d0.memory_stats()["allocated_bytes"] == 0
    assert d1.memory_stats()["allocated_bytes"] == 3 << 20
    d1.free(b)


def test_one_devices_oom_leaves_the_other_untouched(h):
    import dataclasses

    from neuron_sim.runtime import Runtime
    from neuron_sim.trace import TraceSink

    config = h.make_runtime(NEURON_RT_VISIBLE_CORES="0-1").config
    rt = Runtime(dataclasses.replace(config, hbm_capacity=1 << 20), trace=TraceSink())
    d0, d1 = rt.devices
    assert d0.hbm.capacity == d1.hbm.capacity == 1 << 20
    with pytest.raises(OutOfMemoryError, match="neuron:0"):
        d0.allocate(d0.hbm.capacity + 1)
    block = d1.allocate(d1.hbm.capacity // 2)  # address space is per device
    d1.free(block)


def test_bad_device_index_names_the_valid_range(runtime):
    with pytest.raises(IndexError) as info:
        runtime.device(8)
    assert "0-7" in str(info.value) and "8" in str(info.value)
    with pytest.raises(IndexError):
        runtime.device(-1)
    with pytest.raises(TypeError):
        runtime.device("0")


def test_launch_with_device_buffers(runtime, h):
    dev = runtime.device(1)
    program = h.copy_program()
    x = dev.allocate(128 * 64 * 4, "x")
    y = dev.allocate(128 * 64 * 4, "y")
    x.view(np.float32)[:] = np.arange(128 * 64)
    dev.launch(program, {"x": x, "y": y})
    dev.synchronize()
    np.testing.assert_array_equal(y.view(np.float32), np.arange(128 * 64, dtype=np.float32))


def test_buffer_from_another_device_is_refused_at_launch(runtime, h):
    d0, d1 = runtime.device(0), runtime.device(1)
    x = d1.allocate(128 * 64 * 4)
    y = d0.allocate(128 * 64 * 4)
    with pytest.raises(ValidationError, match="launch.wrong_device") as info:
        d0.launch(h.copy_program(), {"x": x, "y": y})
    assert "neuron:0" in str(info.value) and "'x'" in str(info.value)


def test_freed_device_buffer_is_refused_at_launch(runtime, h):
    dev = runtime.device(0)
    x, y = dev.allocate(128 * 64 * 4), dev.allocate(128 * 64 * 4)
    dev.free(x)
    with pytest.raises(ValidationError, match="launch.wrong_device"):
        dev.launch(h.copy_program(), {"x": x, "y": y})


def test_queues_are_per_device_and_named(runtime):
    dev = runtime.device(0)
    q1, q2 = dev.new_queue(), dev.new_queue("comm")
    assert dev.queues == (dev.default_queue, q1, q2)
    assert q1.name != q2.name and q2.name == "comm"
    assert q1.device is dev
    with pytest.raises(ValueError, match="comm"):
        dev.new_queue("comm")
    assert runtime.device(1).queues == (runtime.device(1).default_queue,)
