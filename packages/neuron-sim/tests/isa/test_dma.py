"""DMA instructions: copies (with casts), transposes, indirect gather/scatter, and their rules."""

import numpy as np
import pytest
from helpers import BF16, FP8_E4M3FN, FP8_E5M2, TRN2, assert_bits_equal, execute, hb, ps, sb
from neuron_sim import AccessPatternError, ValidationError
from neuron_sim.isa import DmaCopy, DmaIndirect, DmaTranspose
from neuron_sim.memory.access_pattern import AccessPattern

RNG = np.random.default_rng(0)


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


# --- copies ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "int8", "uint16", "int32"])
def test_hbm_to_sbuf_to_hbm_is_bit_exact(dtype):
    from neuron_sim import dtypes

    np_dtype = dtypes.to_numpy(dtype)
    x = RNG.integers(0, 256, size=(16, 24 * np_dtype.itemsize), dtype=np.uint8).view(np_dtype)
    tile = sb(dtype, 16, 24)
    run = execute(
        [DmaCopy(dst=tile, src=hb("x", dtype, (16, 24))), DmaCopy(dst=hb("y", dtype, (16, 24)), src=tile)],
        hbm_inputs={"x": x},
        hbm_outputs={"y": ((16, 24), dtype)},
    )
    assert_bits_equal(run.hbm["y"], x)


def test_cast_float32_to_bf16_rounds_to_nearest_even():
    x = (RNG.standard_normal((8, 32)) * 100).astype(np.float32)
    x[0, :3] = [1 + 2**-8, 1 + 3 * 2**-8, -(1 + 2**-8)]  # ties
    run = execute(
        [DmaCopy(dst=sb("bfloat16", 8, 32), src=hb("x", "float32", (8, 32)))],
        hbm_inputs={"x": x},
        fetch=[sb("bfloat16", 8, 32)],
    )
    assert_bits_equal(run[0], x.astype(BF16))
    assert run[0][0, :3].astype(np.float32).tolist() == [1.0, 1 + 2**-6, -1.0]


def test_cast_to_fp8_saturates():
    x = np.array([[1.0, 500.0, -1e6, np.inf, 0.3, 70000.0]], dtype=np.float32)
    run = execute(
        [
            DmaCopy(dst=sb("float8_e4m3fn", 1, 6), src=hb("x", "float32", (1, 6))),
            DmaCopy(dst=sb("float8_e5m2", 1, 6, offset=64), src=hb("x", "float32", (1, 6))),
        ],
        hbm_inputs={"x": x},
        fetch=[sb("float8_e4m3fn", 1, 6), sb("float8_e5m2", 1, 6, offset=64)],
    )
    np.testing.assert_array_equal(run[0].astype(np.float32), [[1.0, 448.0, -448.0, 448.0, float(np.float32(0.3).astype(FP8_E4M3FN)), 448.0]])
    np.testing.assert_array_equal(run[1].astype(np.float32), [[1.0, 512.0, -57344.0, 57344.0, float(np.float32(0.3).astype(FP8_E5M2)), 57344.0]])


def test_cast_float_to_int_rounds_half_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -2.5, 1e10, -1e10, np.nan, 7.49]], dtype=np.float32)
    run = execute(
        [DmaCopy(dst=sb("int32", 1, 8), src=hb("x", "float32", (1, 8)))],
        hbm_inputs={"x": x},
        fetch=[sb("int32", 1, 8)],
    )
    assert run[0].tolist() == [[0, 2, 2, -2, 2**31 - 1, -(2**31), 0, 7]]


def test_same_dtype_copy_moves_bytes_and_int_casts_go_through_fp32():
    x = np.array([[2**24 + 1, -5, 70000, -70000]], dtype=np.int32)
    run = execute(
        [
            DmaCopy(dst=sb("int32", 1, 4), src=hb("x", "int32", (1, 4))),
            DmaCopy(dst=sb("int16", 1, 4, offset=64), src=hb("x", "int32", (1, 4))),
            DmaCopy(dst=sb("uint32", 1, 4, offset=128), src=hb("x", "int32", (1, 4))),
        ],
        hbm_inputs={"x": x},
        fetch=[sb("int32", 1, 4), sb("int16", 1, 4, offset=64), sb("uint32", 1, 4, offset=128)],
    )
    assert run[0].tolist() == [[2**24 + 1, -5, 70000, -70000]]
    assert run[1].tolist() == [[32767, -5, 32767, -32768]]
    # int32 -> uint32: through fp32 (2**24 + 1 rounds), then saturating (negatives become 0)
    assert run[2].tolist() == [[2**24, 0, 70000, 0]]


def test_int64_table_casts_through_fp32_and_accumulates_in_fp32():
    i64 = np.array([[2**24 + 1, 3]], dtype=np.int64)
    run = execute(
        [DmaCopy(dst=sb("int32", 1, 2), src=hb("i", "int64", (1, 2)))],
        hbm_inputs={"i": i64},
        fetch=[sb("int32", 1, 2)],
    )
    assert run[0].tolist() == [[2**24, 3]]
    table = np.array([[2**24], [5]], dtype=np.int32)
    src, idx = np.array([[1], [1]], dtype=np.int32), np.array([[0], [1]], dtype=np.int32)
    run = execute(
        [DmaIndirect(direction="scatter", accumulate=True, onchip=sb("int32", 2, 1), table=hb("t", "int32", (2, 1)),
                     index=sb("int32", 2, 1, offset=64))],
        preload=[(sb("int32", 2, 1), src), (sb("int32", 2, 1, offset=64), idx)],
        hbm_inputs={"t": table},
        validate=False,
    )
    assert run.hbm["t"].tolist() == [[2**24], [6]]  # 2**24 + 1 is not an fp32 value


def test_hbm_only_types_cast_on_the_way_in():
    x64 = np.array([[1.0 + 2**-30, 3e39]], dtype=np.float64)
    i64 = np.array([[2**40, -3]], dtype=np.int64)
    run = execute(
        [
            DmaCopy(dst=sb("float32", 1, 2), src=hb("x", "float64", (1, 2))),
            DmaCopy(dst=sb("int32", 1, 2, offset=64), src=hb("i", "int64", (1, 2))),
        ],
        hbm_inputs={"x": x64, "i": i64},
        fetch=[sb("float32", 1, 2), sb("int32", 1, 2, offset=64)],
    )
    assert run[0].tolist() == [[1.0, np.inf]]
    assert run[1].tolist() == [[2**31 - 1, -3]]


def test_strided_source_walks_in_row_major_order():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)
    # every other column of rows 2..5 -> a [4, 4] tile; then reshape into [2, 8] via HBM->HBM
    src = AccessPattern("hbm", "float32", 0, 4, ((2, 4),), offset=(2 * 8 + 1) * 4, tensor="x", partition_stride=8)
    run = execute(
        [
            DmaCopy(dst=sb("float32", 4, 4), src=src),
            DmaCopy(dst=hb("y", "float32", (2, 8)), src=src),
        ],
        hbm_inputs={"x": x},
        hbm_outputs={"y": ((2, 8), "float32")},
        fetch=[sb("float32", 4, 4)],
    )
    np.testing.assert_array_equal(run[0], x[2:6, 1::2])
    np.testing.assert_array_equal(run.hbm["y"], x[2:6, 1::2].reshape(2, 8))


def test_sbuf_to_sbuf_copy_between_partitions_and_overlapping_shift():
    x = np.arange(8, dtype=np.float32)[None].repeat(4, 0)
    base = sb("float32", 4, 8)
    shifted_dst = AccessPattern("sbuf", "float32", 0, 4, ((1, 7),), offset=4)
    shifted_src = AccessPattern("sbuf", "float32", 0, 4, ((1, 7),), offset=0)
    run = execute(
        [DmaCopy(dst=shifted_dst, src=shifted_src), DmaCopy(dst=sb("float32", 2, 8, start=64), src=sb("float32", 2, 8, start=2))],
        preload=[(base, x)],
        fetch=[base, sb("float32", 2, 8, start=64)],
    )
    np.testing.assert_array_equal(run[0], np.concatenate([x[:, :1], x[:, :7]], axis=1))  # memmove semantics
    np.testing.assert_array_equal(run[1], run[0][2:4])


def test_default_queue_follows_the_trigger_engine():
    assert DmaCopy(dst=sb("float32", 1, 1), src=hb("x", "float32", (1, 1))).queue == "qSyncIO0"
    assert DmaCopy(dst=sb("float32", 1, 1), src=hb("x", "float32", (1, 1)), engine="scalar").queue == "qScalarIO0"
    assert DmaIndirect(direction="gather", onchip=sb("float32", 1, 1), table=hb("x", "float32", (1, 1)), index=sb("int32", 1, 1)).queue == "qGpsimdIO0"


# --- transpose ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", ["bfloat16", "float32", "int16"])
def test_dma_transpose_is_bit_exact(dtype):
    from neuron_sim import dtypes

    np_dtype = dtypes.to_numpy(dtype)
    x = RNG.integers(0, 256, size=(12, 20 * np_dtype.itemsize), dtype=np.uint8).view(np_dtype)
    run = execute(
        [
            DmaTranspose(dst=sb(dtype, 20, 12), src=hb("x", dtype, (12, 20))),
            DmaTranspose(dst=sb(dtype, 12, 20, offset=256), src=sb(dtype, 20, 12)),
        ],
        hbm_inputs={"x": x},
        fetch=[sb(dtype, 20, 12), sb(dtype, 12, 20, offset=256)],
    )
    assert_bits_equal(run[0], np.ascontiguousarray(x.T))
    assert_bits_equal(run[1], x)


# --- indirect -------------------------------------------------------------------------------------


def test_gather_rows_by_index():
    table = RNG.standard_normal((10, 6)).astype(np.float32)
    idx = np.array([[3], [0], [9], [3]], dtype=np.int32)
    run = execute(
        [DmaIndirect(direction="gather", onchip=sb("bfloat16", 4, 6), table=hb("t", "float32", (10, 6)), index=sb("int32", 4, 1, offset=512))],
        preload=[(sb("int32", 4, 1, offset=512), idx)],
        hbm_inputs={"t": table},
        fetch=[sb("bfloat16", 4, 6)],
    )
    assert_bits_equal(run[0], table[idx[:, 0]].astype(BF16))


def test_gather_out_of_bounds_errors_or_skips():
    table = np.arange(12, dtype=np.int32).reshape(4, 3)
    idx = np.array([[1], [4], [-1], [2]], dtype=np.int32)
    common = dict(onchip=sb("int32", 4, 3), table=hb("t", "int32", (4, 3)), index=sb("int32", 4, 1, offset=64))
    with pytest.raises(AccessPatternError) as info:
        execute([DmaIndirect(direction="gather", **common)], preload=[(common["index"], idx)], hbm_inputs={"t": table})
    assert info.value.rule == "dma.index_out_of_bounds" and "index 4" in str(info.value) and "2 bad" in str(info.value)
    old = np.full((4, 3), 77, dtype=np.int32)
    run = execute(
        [DmaIndirect(direction="gather", oob_mode="skip", **common)],
        preload=[(common["index"], idx), (common["onchip"], old)],
        hbm_inputs={"t": table},
        fetch=[common["onchip"]],
    )
    assert run[0].tolist() == [[3, 4, 5], [77, 77, 77], [77, 77, 77], [6, 7, 8]]


def test_scatter_and_scatter_accumulate_with_duplicates():
    src = RNG.standard_normal((5, 4)).astype(np.float32)
    idx = np.array([[2], [0], [2], [5], [1]], dtype=np.int32)
    base = RNG.standard_normal((6, 4)).astype(np.float32)
    common = dict(onchip=sb("float32", 5, 4), index=sb("int32", 5, 1, offset=64))
    preload = [(common["onchip"], src), (common["index"], idx)]
    # plain scatter: the last write to a row wins
    run = execute(
        [DmaIndirect(direction="scatter", table=hb("t", "float32", (6, 4)), **common)],
        preload=preload,
        hbm_outputs={"t": ((6, 4), "float32")},
    )
    expected = np.full((6, 4), np.nan, dtype=np.float32)
    for p in range(5):
        expected[idx[p, 0]] = src[p]
    np.testing.assert_array_equal(run.hbm["t"], expected)
    # accumulate: duplicates add up; untouched rows keep their bits
    run = execute(
        [DmaIndirect(direction="scatter", accumulate=True, table=hb("t", "float32", (6, 4)), **common)],
        preload=preload,
        hbm_inputs={"t": base},
        validate=False,  # the table is declared 'input' here; the rule is tested in test_exact
    )
    expected = base.astype(np.float64).copy()
    for p in range(5):
        expected[idx[p, 0]] += src[p]
    np.testing.assert_allclose(run.hbm["t"], expected.astype(np.float32), rtol=1e-6)
    assert_bits_equal(run.hbm["t"][[3, 4]], base[[3, 4]])


@pytest.mark.parametrize("dtype,step", [("bfloat16", 2**-7), ("float8_e4m3fn", 0.125), ("float8_e5m2", 0.25)])
def test_scatter_accumulate_into_narrow_floats_adds_in_fp32_and_rounds(dtype, step):
    from neuron_sim import dtypes

    np_dtype = dtypes.to_numpy(dtype)
    base = np.full((3, 2), 1.0, dtype=np.float32).astype(np_dtype)
    src = np.array([[step * 0.75, 0.5], [step * 0.75, 0.5]], dtype=np.float32).astype(np_dtype)
    idx = np.array([[1], [1]], dtype=np.int32)
    run = execute(
        [DmaIndirect(direction="scatter", accumulate=True, onchip=sb(dtype, 2, 2), table=hb("t", dtype, (3, 2)), index=sb("int32", 2, 1, offset=64))],
        preload=[(sb(dtype, 2, 2), src), (sb("int32", 2, 1, offset=64), idx)],
        hbm_inputs={"t": base},
        validate=False,
    )
    exact = 1.0 + 2 * src.astype(np.float64)[0]
    expected = exact.astype(np.float32).astype(np_dtype)
    assert_bits_equal(run.hbm["t"][1], expected)
    assert_bits_equal(run.hbm["t"][[0, 2]], base[[0, 2]])


def test_scatter_into_rows_that_are_not_contiguous():
    # table rows are the first 2 columns of each [2, 4] slab of a (4, 2, 4) tensor
    table = AccessPattern("hbm", "float32", 0, 4, ((4, 2), (1, 2)), tensor="t", partition_stride=8)
    src = np.arange(1, 9, dtype=np.float32).reshape(2, 4)
    run = execute(
        [DmaIndirect(direction="scatter", onchip=sb("float32", 2, 4), table=table, index=sb("int32", 2, 1, offset=64))],
        preload=[(sb("float32", 2, 4), src), (sb("int32", 2, 1, offset=64), np.array([[1], [3]], np.int32))],
        hbm_outputs={"t": ((4, 2, 4), "float32")},
    )
    out = run.hbm["t"]
    np.testing.assert_array_equal(out[1, :, :2], [[1, 2], [3, 4]])
    np.testing.assert_array_equal(out[3, :, :2], [[5, 6], [7, 8]])
    assert np.isnan(out[[0, 2]]).all() and np.isnan(out[:, :, 2:]).all()


# --- validation rules -----------------------------------------------------------------------------


def test_dma_cannot_touch_psum():
    err = rule_of(DmaCopy(dst=ps("float32", 4, 4), src=hb("x", "float32", (4, 4))))
    assert err.rule == "dma.psum" and "float32@PSUM" in str(err)


def test_dma_element_counts_must_match():
    err = rule_of(DmaCopy(dst=sb("float32", 4, 5), src=hb("x", "float32", (4, 4))))
    assert err.rule == "dma.shape_mismatch" and "16" in str(err) and "20" in str(err)


def test_dma_descriptor_modes():
    err = rule_of(DmaCopy(dst=sb("float32", 4, 4), src=hb("x", "float32", (4, 4)), dge="magic"))
    assert err.rule == "dma.dge_mode" and "'magic'" in str(err)
    err = rule_of(DmaCopy(dst=sb("float32", 4, 4), src=hb("x", "float32", (4, 4)), dge="hwdge", engine="gpsimd"))
    assert err.rule == "dma.hwdge_trigger" and "gpsimd" in str(err)
    err = rule_of(DmaCopy(dst=sb("bfloat16", 4, 4), src=hb("x", "float32", (4, 4)), dge="hwdge"))
    assert err.rule == "dma.cast_hwdge" and "float32" in str(err) and "bfloat16" in str(err)
    DmaCopy(dst=sb("float32", 4, 4), src=hb("x", "float32", (4, 4)), dge="hwdge", engine="scalar").validate(TRN2)


def test_hbm_only_dtypes_cannot_live_on_chip():
    err = rule_of(DmaCopy(dst=sb("int64", 4, 4), src=hb("x", "int64", (4, 4))))
    assert err.rule == "dtype.unsupported_on_chip" and "int64" in str(err)


def test_sbuf_operand_bounds_are_checked():
    err = rule_of(DmaCopy(dst=sb("float32", 4, 4, start=126), src=hb("x", "float32", (4, 4))))
    assert err.rule == "ap.partition_bounds" and "[126, 130)" in str(err)


def test_dma_trigger_engine():
    err = rule_of(DmaIndirect(direction="gather", onchip=sb("float32", 4, 4), table=hb("x", "float32", (8, 4)), index=sb("int32", 4, 1, offset=64), engine="vector"))
    assert err.rule == "engine.unsupported" and "vector" in str(err)


def _indirect(**kw):
    base = dict(direction="gather", onchip=sb("float32", 4, 4), table=hb("x", "float32", (8, 4)), index=sb("int32", 4, 1, offset=64))
    base.update(kw)
    return DmaIndirect(**base)


@pytest.mark.parametrize(
    "kw, rule, value",
    [
        (dict(direction="sideways"), "dma.indirect_direction", "'sideways'"),
        (dict(oob_mode="wrap"), "dma.oob_mode", "'wrap'"),
        (dict(accumulate=True), "dma.indirect_accumulate", "'gather'"),
        (dict(dge="hwdge"), "dma.indirect_hwdge", "swdge"),
        (dict(dge="nonsense"), "dma.dge_mode", "'nonsense'"),
        (dict(table=sb("float32", 8, 4, offset=256)), "dma.indirect_table", "float32@SBUF"),
        (dict(onchip=hb("y", "float32", (4, 4))), "dma.indirect_onchip", "float32@y"),
        (dict(onchip=ps("float32", 4, 4)), "dma.psum", "PSUM"),
        (dict(index=sb("float32", 4, 1, offset=64)), "dma.indirect_index", "float32@SBUF"),
        (dict(index=sb("int32", 4, 2, offset=64)), "dma.indirect_index", "[[1, 2]]"),
        (dict(index=sb("int32", 2, 1, offset=64)), "dma.indirect_rows", "2 rows"),
        (dict(onchip=sb("float32", 4, 5)), "dma.shape_mismatch", "5"),
    ],
)
def test_indirect_rules(kw, rule, value):
    err = rule_of(_indirect(**kw))
    assert err.rule == rule
    assert value in str(err)


@pytest.mark.parametrize(
    "kw, rule, value",
    [
        (dict(dst=hb("y", "float32", (8, 4))), "dma.transpose_dst", "float32@y"),
        (dict(src=hb("x", "float8_e4m3", (4, 8)), dst=sb("float8_e4m3", 8, 4)), "dma.transpose_dtype", "float8_e4m3"),
        (dict(dst=sb("bfloat16", 8, 4)), "dma.transpose_dtype", "bfloat16"),
        (dict(dst=sb("float32", 4, 8)), "dma.transpose_shape", "[8, 4]"),
        (dict(dst=ps("float32", 8, 4)), "dma.psum", "PSUM"),
    ],
)
def test_transpose_rules(kw, rule, value):
    base = dict(dst=sb("float32", 8, 4), src=hb("x", "float32", (4, 8)))
    base.update(kw)
    err = rule_of(DmaTranspose(**base))
    assert err.rule == rule and value in str(err)
