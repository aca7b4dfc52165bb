"""AccessPattern: construction rules, shapes and spans, bounds checks, numpy views, serialization."""

import numpy as np
import pytest
from neuron_sim import AccessPatternError, dtypes
from neuron_sim.memory.access_pattern import HBM, PSUM, SBUF, AccessPattern, hbm, onchip


def gather_reference(buffer: np.ndarray, ap: AccessPattern, row_bytes: int) -> np.ndarray:
    """The addressed elements by explicit index arithmetic (no numpy strides)."""
    size = ap.itemsize
    flat = buffer.view(np.uint8)
    out = []
    for p in range(ap.partition_count):
        base = ap.offset + (p * ap.partition_stride * size if ap.memory == HBM else (ap.partition_start + p) * row_bytes)
        idx = [0] * len(ap.free)
        for _ in range(ap.free_size):
            addr = base + sum(i * s * size for i, (s, _) in zip(idx, ap.free))
            out.append(flat[addr : addr + size].copy())
            for d in reversed(range(len(ap.free))):
                idx[d] += 1
                if idx[d] < ap.free[d][1]:
                    break
                idx[d] = 0
    return np.concatenate(out).view(dtypes.to_numpy(ap.dtype)).reshape(ap.shape)


# --- construction rules ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, rule, value",
    [
        (dict(memory="dram"), "ap.memory", "dram"),
        (dict(partition_count=0), "ap.empty", "0"),
        (dict(free=((1, 0),)), "ap.empty", "[(1, 0)]"),
        (dict(partition_start=-1), "ap.bounds", "-1"),
        (dict(offset=-4), "ap.bounds", "-4"),
        (dict(free=((1, 2),) * 5), "ap.too_many_dims", "5"),
        (dict(tensor="x"), "ap.onchip_tensor", "sbuf"),
        (dict(partition_stride=8), "ap.onchip_tensor", "sbuf"),
        (dict(memory=HBM), "ap.hbm_tensor", "tensor"),
        (dict(memory=HBM, tensor="x", partition_start=3), "ap.hbm_partition_start", "3"),
        (dict(dtype="complex64"), "dtype.unsupported", "complex64"),
    ],
)
def test_construction_rules(kwargs, rule, value):
    base = dict(memory=SBUF, dtype="float32", partition_start=0, partition_count=4, free=((1, 8),))
    base.update(kwargs)
    with pytest.raises(Exception) as info:
        AccessPattern(**base)
    err = info.value
    assert getattr(err, "rule", None) == rule, err
    assert value in str(err)


def test_shape_sizes_and_canonical_fields():
    ap = AccessPattern(SBUF, np.float32, 32, 16, [[8, 4], [1, 8]], offset=64)
    assert ap.dtype == "float32" and ap.free == ((8, 4), (1, 8))
    assert ap.shape == (16, 4, 8) and ap.free_size == 32 and ap.num_elements == 512 and ap.nbytes == 2048
    assert ap.itemsize == 4 and ap.on_chip
    assert not hbm("t", "bfloat16", (4, 4)).on_chip


def test_free_byte_span_with_negative_strides():
    ap = AccessPattern(SBUF, "float32", 0, 1, ((-1, 4),), offset=12)  # bytes 0..15 walked backwards
    assert ap.free_byte_span() == (0, 16)
    ap = AccessPattern(SBUF, "bfloat16", 0, 1, ((16, 3), (-1, 2)), offset=10)
    assert ap.free_byte_span() == (10 - 2, 10 + 2 * 16 * 2 + 2)


def test_hbm_byte_span_includes_rows():
    ap = hbm("t", "float32", (4, 8))
    assert ap.partition_stride == 8 and ap.byte_span() == (0, 128)
    ap = hbm("t", "float32", (2, 3), offset_elements=5, row_stride=10)
    assert ap.byte_span() == (20, 20 + 10 * 4 + 3 * 4)


def test_contiguity():
    assert onchip(SBUF, "float32", 0, 4, (4, 8)).is_contiguous()
    assert onchip(SBUF, "float32", 0, 4, (4, 8)).contiguous_run_bytes() == 128
    ap = AccessPattern(SBUF, "float32", 0, 4, ((16, 4), (1, 8)))  # rows of 8 with gaps
    assert not ap.is_contiguous() and ap.contiguous_run_bytes() == 32
    ap = AccessPattern(SBUF, "float32", 0, 4, ((2, 8),))
    assert not ap.is_contiguous() and ap.contiguous_run_bytes() == 4
    assert AccessPattern(SBUF, "float32", 0, 1, ((99, 1), (1, 4))).is_contiguous()


# --- bounds checks --------------------------------------------------------------------------------


def test_partition_bounds_error_names_the_partitions():
    ap = onchip(SBUF, "float32", 100, 32, (4,))
    with pytest.raises(AccessPatternError) as info:
        ap.check_bounds(128, 1024, "dst")
    assert info.value.rule == "ap.partition_bounds"
    assert "[100, 132)" in str(info.value) and "128" in str(info.value) and "dst" in str(info.value)


def test_free_bounds_error_names_bytes_and_capacity():
    ap = onchip(SBUF, "float32", 0, 4, (8,), offset=1000)
    with pytest.raises(AccessPatternError) as info:
        ap.check_bounds(128, 1024, "src")
    assert info.value.rule == "ap.free_bounds"
    assert "[1000, 1032)" in str(info.value) and "1024" in str(info.value)
    onchip(SBUF, "float32", 0, 4, (6,), offset=1000).check_bounds(128, 1024, "ok")  # exactly fits


def test_negative_reach_is_a_free_bounds_error():
    ap = AccessPattern(SBUF, "float32", 0, 1, ((-1, 4),), offset=8)  # reaches byte -4
    with pytest.raises(AccessPatternError) as info:
        ap.check_bounds(128, 1024, "src")
    assert info.value.rule == "ap.free_bounds" and "-4" in str(info.value)


def test_tensor_bounds_error():
    ap = hbm("x", "float32", (4, 8), offset_elements=1)
    ap.check_tensor_bounds(132, "load")
    with pytest.raises(AccessPatternError) as info:
        ap.check_tensor_bounds(128, "load")
    assert info.value.rule == "ap.tensor_bounds"
    assert "'x'" in str(info.value) and "[4, 132)" in str(info.value) and "128" in str(info.value)


# --- views ----------------------------------------------------------------------------------------


def test_onchip_view_matches_index_arithmetic():
    rows, row_bytes = 8, 256
    buffer = np.arange(rows * row_bytes, dtype=np.int64).astype(np.uint8)
    ap = AccessPattern(SBUF, "int16", 2, 3, ((12, 3), (-1, 4)), offset=10)
    got = ap.view(buffer, row_bytes)
    np.testing.assert_array_equal(got, gather_reference(buffer, ap, row_bytes))
    got[...] = 7  # zero-copy: writes land in the buffer
    assert (gather_reference(buffer, ap, row_bytes) == 7).all()


def test_hbm_view_uses_row_stride_and_ignores_row_bytes():
    buffer = np.arange(64, dtype=np.float32).view(np.uint8)
    ap = hbm("t", "float32", (3, 4), offset_elements=2, row_stride=10)
    np.testing.assert_array_equal(ap.view(buffer, 0), [[2, 3, 4, 5], [12, 13, 14, 15], [22, 23, 24, 25]])


def test_view_outside_buffer_is_an_error():
    buffer = np.zeros(64, dtype=np.uint8)
    ap = hbm("t", "float32", (4, 8))
    with pytest.raises(AccessPatternError) as info:
        ap.view(buffer, 0)
    assert info.value.rule == "ap.buffer_bounds" and "64-byte" in str(info.value)


def test_onchip_view_never_spills_into_the_next_partition():
    buffer = np.zeros(4 * 64, dtype=np.uint8)
    ap = onchip(SBUF, "float32", 0, 2, (4,), offset=48)  # last 16 bytes of each 64-byte partition
    ap.view(buffer, 64)
    with pytest.raises(AccessPatternError) as info:
        ap.view(buffer, 64, offset_bytes=4)  # a run-time offset pushes it past the partition end
    assert info.value.rule == "ap.free_bounds" and "[52, 68)" in str(info.value)


# --- helpers and serialization --------------------------------------------------------------------


def test_dense_helpers():
    ap = onchip(PSUM, "float32", 32, 32, (2, 3, 4), offset=8)
    assert ap.free == ((12, 2), (4, 3), (1, 4)) and ap.offset == 8 and ap.memory == PSUM
    ap = hbm("w", "bfloat16", (5,))
    assert ap.shape == (5, 1) and ap.partition_stride == 1
    ap = hbm("w", "bfloat16", (2, 3, 4), offset_elements=3)
    assert ap.free == ((4, 3), (1, 4)) and ap.partition_stride == 12 and ap.offset == 6


@pytest.mark.parametrize(
    "ap",
    [
        onchip(SBUF, "bfloat16", 64, 32, (4, 8), offset=128),
        AccessPattern(PSUM, "float32", 0, 128, ((-1, 4),), offset=16),
        hbm("table", "int32", (7, 3), offset_elements=2, row_stride=9),
        AccessPattern(SBUF, "float32", 0, 2, ((1, 4),), dynamic=(("r0", 4), ("r1", -1))),
    ],
)
def test_round_trip(ap):
    import json

    assert AccessPattern.from_dict(json.loads(json.dumps(ap.to_dict()))) == ap


def test_describe():
    ap = onchip(SBUF, "bfloat16", 32, 32, (4, 8), offset=64)
    assert ap.describe() == "bfloat16@SBUF+64[32:64][[8, 4], [1, 8]]"
    assert hbm("x", "float32", (2, 2)).describe().startswith("float32@x+0[0:2]")
