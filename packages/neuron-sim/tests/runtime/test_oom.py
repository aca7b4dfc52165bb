"""Internal tensors come from device HBM per launch; running out is a clean launch error."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ExecutionError, OutOfMemoryError, get_architecture
from neuron_sim.runtime import Device
from neuron_sim.trace import TraceSink

ARCH = get_architecture("trn2")


def small_device(capacity):
    return Device(0, ARCH, capacity, trace=TraceSink())


def test_internal_tensor_is_allocated_for_the_launch_only(h):
    dev = small_device(1 << 20)
    bufs = h.copy_buffers()
    dev.launch(h.copy_program(), bufs)
    dev.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x"])
    stats = dev.memory_stats()
    assert stats["allocated_bytes"] == 0
    assert stats["peak_allocated_bytes"] == 128 * 64 * 4
    assert stats["num_allocs"] == stats["num_frees"] == 1


def test_oom_for_internal_tensor_is_a_launch_error_and_the_device_keeps_working(h):
    dev = small_device(128 * 64 * 4 + 4096)
    hog = dev.allocate(8192, "hog")
    dev.launch(h.copy_program(), h.copy_buffers(), context="aten::clone")
    with pytest.raises(ExecutionError) as info:
        dev.synchronize()
    assert isinstance(info.value.__cause__, OutOfMemoryError)
    msg = str(info.value)
    assert "out of memory" in msg and "HBM of neuron:0" in msg and "aten::clone" in msg
    assert dev.memory_stats()["allocated_bytes"] == 8192  # nothing leaked
    dev.free(hog)
    bufs = h.copy_buffers(seed=3)
    dev.launch(h.copy_program(), bufs)
    dev.synchronize()
    np.testing.assert_array_equal(bufs["y"], bufs["x"])


def test_oom_in_blocking_mode_raises_at_launch(h):
    dev = Device(0, ARCH, 1024, blocking=True, trace=TraceSink())
    with pytest.raises(ExecutionError) as info:
        dev.launch(h.copy_program(), h.copy_buffers())
    assert isinstance(info.value.__cause__, OutOfMemoryError)
    assert dev.memory_stats()["allocated_bytes"] == 0


def test_failed_launch_frees_its_internal_tensors(h):
    """Scratch is returned even when the program fails after allocating it."""
    from neuron_sim import ProgramBuilder
    from neuron_sim.isa import DmaCopy

    b = ProgramBuilder("internal_then_fail", ARCH)
    x = b.input("x", (128, 64), "float32")
    b.internal("scratch", (128, 64), "float32")
    y = b.output("y", (128, 64), "float32")
    t = b.sbuf((128, 64), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    program = b.build()
    failing = h.failing_program()
    program.instructions[0] = failing.instructions[0]
    dev = small_device(1 << 20)
    dev.launch(program, h.copy_buffers())
    with pytest.raises(ExecutionError, match="r_unset"):
        dev.synchronize()
    assert dev.memory_stats()["allocated_bytes"] == 0
    assert dev.memory_stats()["num_frees"] == 1
