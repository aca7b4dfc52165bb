"""OnChipMemory: poison fill (NaN in every float type) and the written-bytes shadow mask."""

import numpy as np
import pytest
from neuron_sim import UninitializedReadError, ValidationError
from neuron_sim.memory import OnChipMemory
from neuron_sim.memory.access_pattern import SBUF, AccessPattern, onchip


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e4m3fn", "float8_e5m2"])
def test_fresh_memory_reads_nan_in_every_float_type(dtype):
    mem = OnChipMemory("SBUF", 8, 64)
    values = mem.view(onchip(SBUF, dtype, 0, 8, (4,))).astype(np.float32)
    assert np.isnan(values).all()


def test_fresh_memory_reads_all_ones_in_integer_types():
    mem = OnChipMemory("SBUF", 4, 64)
    assert (mem.view(onchip(SBUF, "int32", 0, 4, (2,))) == -1).all()
    assert (mem.view(onchip(SBUF, "uint8", 0, 4, (2,))) == 255).all()


def test_view_is_zero_copy_and_reset_repoisons():
    mem = OnChipMemory("PSUM", 4, 64, track_writes=True)
    ap = onchip("psum", "float32", 1, 2, (3,), offset=8)
    mem.view(ap)[...] = 1.5
    assert (mem.data[1:3, 8:20].view(np.float32) == 1.5).all()
    mem.mark_written(ap)
    assert mem.written[1:3, 8:20].all() and mem.written.sum() == 2 * 12
    mem.reset()
    assert (mem.data == 0xFF).all() and not mem.written.any()


def test_check_initialized_passes_only_for_written_bytes():
    mem = OnChipMemory("SBUF", 8, 64, track_writes=True)
    full = onchip(SBUF, "float32", 0, 4, (8,))
    mem.mark_written(onchip(SBUF, "float32", 0, 4, (4,)))  # first half of each row
    mem.check_initialized(onchip(SBUF, "float32", 0, 4, (4,)))
    with pytest.raises(UninitializedReadError) as info:
        mem.check_initialized(full, what="src")
    err = info.value
    assert isinstance(err, ValidationError) and err.rule == "memory.uninitialized_read"
    text = str(err)
    assert "src" in text and "64 byte(s)" in text and "SBUF" in text and "partition 0" in text and "[4]" in text
    assert full.describe() in text


def test_uninitialized_report_names_first_unwritten_partition():
    mem = OnChipMemory("SBUF", 8, 64, track_writes=True)
    mem.mark_written(onchip(SBUF, "bfloat16", 0, 3, (32,)))
    with pytest.raises(UninitializedReadError, match="partition 3"):
        mem.check_initialized(onchip(SBUF, "bfloat16", 0, 8, (32,)))


def test_partial_element_write_still_counts_as_uninitialized():
    mem = OnChipMemory("SBUF", 1, 16, track_writes=True)
    mem.mark_written(onchip(SBUF, "uint8", 0, 1, (2,)))  # 2 bytes of a 4-byte element
    with pytest.raises(UninitializedReadError, match="2 byte"):
        mem.check_initialized(onchip(SBUF, "float32", 0, 1, (1,)))


def test_strided_and_negative_patterns_use_the_right_mask_bytes():
    mem = OnChipMemory("SBUF", 2, 64, track_writes=True)
    backwards = AccessPattern(SBUF, "float32", 0, 2, ((-2, 4),), offset=28)  # elements 7, 5, 3, 1
    mem.mark_written(backwards)
    mem.check_initialized(AccessPattern(SBUF, "float32", 0, 2, ((2, 4),), offset=4))
    with pytest.raises(UninitializedReadError):
        mem.check_initialized(onchip(SBUF, "float32", 0, 2, (1,)))


def test_without_tracking_checks_are_no_ops():
    mem = OnChipMemory("SBUF", 2, 64)
    assert mem.written is None
    mem.mark_written(onchip(SBUF, "float32", 0, 2, (4,)))
    mem.check_initialized(onchip(SBUF, "float32", 0, 2, (16,)))
