"""Kernels called with numpy arrays launch on a runtime device: HBM accounted, launch records
published, failures reported by the runtime, always on the exact executor."""

from __future__ import annotations

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from neuron_sim.errors import AccessPatternError, ExecutionError, OutOfMemoryError
from neuron_sim.runtime import get_runtime
from nki_helpers import line_of, rand

HERE = __file__


@nki.jit
def exp_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(out, nl.exp(nl.load(x)))
    return out


def _allocated() -> int:
    return get_runtime().device(0).memory_stats()["allocated_bytes"]


def test_a_numpy_call_is_a_runtime_launch_with_a_published_record(records):
    x = rand((128, 256), seed=1)
    np.testing.assert_allclose(exp_kernel(x), np.exp(x), rtol=1e-6)
    (rec,) = [r for r in records if r.name == "exp_kernel"]
    assert rec.kind == "neff" and rec.queue == "nki" and rec.executor == "exact" and rec.error is None
    assert rec.duration_ns == exp_kernel.last_device_time_ns == pytest.approx(exp_kernel.last_timing[0].total_ns)
    assert "exp_kernel([128, 256])" in rec.context
    # the record's instructions point at the kernel's lines
    assert {i.nki_source_location.rpartition(":")[0] for i in rec.instructions()} == {HERE}


def test_hbm_is_held_for_the_call_and_released_after_it():
    x = rand((128, 512), seed=2)
    before = _allocated()
    peak_before = get_runtime().device(0).memory_stats()["peak_allocated_bytes"]
    exp_kernel(x)
    stats = get_runtime().device(0).memory_stats()
    assert stats["allocated_bytes"] == before
    assert stats["peak_allocated_bytes"] >= min(peak_before, before) + 2 * x.nbytes  # input and output were on the device


def test_a_kernel_too_large_for_hbm_raises_out_of_memory_at_the_call():
    @nki.jit
    def huge_output(x):
        capacity = get_runtime().device(0).memory_stats()["capacity_bytes"]
        rows = capacity // (x.shape[1] * 4) + 128  # more than the device's HBM holds
        out = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:128, :], nl.load(x))
        return out

    before = _allocated()
    with pytest.raises(OutOfMemoryError, match="out of memory on HBM of neuron:0"):
        huge_output(rand((128, 1024), seed=3))
    assert _allocated() == before  # what was allocated before the failure is freed


@nki.jit
def pick_row(table, index, out):
    i_sb = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=i_sb, src=index)
    r = nisa.register_alloc()
    nisa.register_load(r, i_sb)
    row = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=table.ap([[table.shape[1], 1], [1, table.shape[1]]], scalar_offset=r))  # bad-row
    nisa.dma_copy(dst=out, src=row)


def test_a_failed_launch_is_the_runtime_error_naming_the_kernel_and_its_line():
    table = rand((4, 8), seed=4)
    before = _allocated()
    with pytest.raises(ExecutionError) as info:
        pick_row(table, np.array([[9]], np.int32), np.zeros((1, 8), np.float32))
    err = info.value
    assert err.launch_name == "pick_row" and err.queue == "nki" and "NKI kernel pick_row" in err.context
    assert isinstance(err.original, AccessPatternError) and err.original.rule == "ap.tensor_bounds"
    assert err.original.location == f"{HERE}:{line_of('bad-row', HERE)}"
    assert _allocated() == before
    # the queue works again after the failure was reported
    out = np.zeros((1, 8), np.float32)
    pick_row(table, np.array([[2]], np.int32), out)
    np.testing.assert_array_equal(out[0], table[2])


def test_unwritten_returned_rows_read_as_nan():
    @nki.jit
    def half(x):
        out = nl.ndarray((256, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out[0:128, :], nl.load(x))
        return out

    x = rand((128, 16), seed=5)
    out = half(x)
    np.testing.assert_array_equal(out[:128], x)
    assert np.isnan(out[128:]).all()
