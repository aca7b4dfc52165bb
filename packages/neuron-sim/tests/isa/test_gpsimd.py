"""GpSimd: iota, affine_select, partition reduce, local gather."""

import numpy as np
import pytest
from helpers import BF16, TRN2, assert_bits_equal, execute, ps, rounded, sb
from neuron_sim import AccessPatternError, ValidationError
from neuron_sim.isa import AffineSelect, Iota, LocalGather, PartitionReduce

RNG = np.random.default_rng(4)


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


def affine_reference(partitions, pattern, offset, channel_multiplier):
    counts = [c for _, c in pattern]
    out = np.zeros((partitions,) + tuple(counts), dtype=np.int64)
    for p in range(partitions):
        for idx in np.ndindex(*counts):
            out[(p,) + idx] = offset + p * channel_multiplier + sum(s * i for (s, _), i in zip(pattern, idx))
    return out.reshape(partitions, -1)


@pytest.mark.parametrize(
    "pattern, offset, mult",
    [(((1, 16),), 0, 0), (((1, 8),), 5, 16), (((-1, 4), (10, 3)), 100, -7), (((2, 2), (3, 2), (5, 2), (7, 2)), -3, 1)],
)
def test_iota_matches_formula(pattern, offset, mult):
    n = int(np.prod([c for _, c in pattern]))
    dst = sb("int32", 32, n)
    run = execute([Iota(dst=dst, pattern=pattern, offset=offset, channel_multiplier=mult)], fetch=[dst])
    np.testing.assert_array_equal(run[0], affine_reference(32, pattern, offset, mult))


def test_iota_casts_to_dst_dtype():
    pattern = ((1, 300),)
    for dtype in ("float32", "bfloat16", "uint8", "int8"):
        dst = sb(dtype, 4, 300)
        run = execute([Iota(dst=dst, pattern=pattern, offset=-10, channel_multiplier=100)], fetch=[dst])
        expected = rounded(affine_reference(4, pattern, -10, 100).astype(np.float32), dtype)
        assert_bits_equal(run[0], expected)


def test_iota_uses_int32_math_and_saturates_large_values():
    dst = sb("int32", 2, 2)
    run = execute([Iota(dst=dst, pattern=((2**30, 2),), offset=2**30, channel_multiplier=0)], fetch=[dst])
    assert run[0].tolist() == [[2**30, 2**31 - 1]] * 2


@pytest.mark.parametrize("cmp_op", ["greater_equal", "greater", "equal", "not_equal", "less", "less_equal"])
def test_affine_select_builds_masks(cmp_op):
    x = RNG.standard_normal((32, 32)).astype(np.float32)
    src, dst = sb("float32", 32, 32), sb("bfloat16", 32, 32, offset=256)
    # causal mask: keep where p - j cmp 0
    inst = AffineSelect(dst=dst, src=src, pattern=((-1, 32),), on_false_value=-1e30, channel_multiplier=1, cmp_op=cmp_op)
    run = execute([inst], preload=[(src, x)], fetch=[dst])
    aff = affine_reference(32, ((-1, 32),), 0, 1)
    keep = {"greater_equal": aff >= 0, "greater": aff > 0, "equal": aff == 0, "not_equal": aff != 0, "less": aff < 0, "less_equal": aff <= 0}[cmp_op]
    assert_bits_equal(run[0], rounded(np.where(keep, x, np.float32(-1e30)), "bfloat16"))


@pytest.mark.parametrize(
    "op, fn",
    [
        ("add", lambda v: v.sum(0)),
        ("maximum", lambda v: v.max(0)),
        ("minimum", lambda v: v.min(0)),
        ("multiply", lambda v: v.prod(0)),
        ("subtract", lambda v: v[0] - v[1:].sum(0)),
    ],
)
def test_partition_reduce(op, fn):
    x = RNG.uniform(0.5, 1.5, size=(64, 12)).astype(np.float32)
    src, dst = sb("float32", 64, 12), sb("float32", 1, 12, offset=256)
    run = execute([PartitionReduce(dst=dst, src=src, op=op)], preload=[(src, x)], fetch=[dst])
    np.testing.assert_allclose(run[0][0], fn(x.astype(np.float64)), rtol=1e-5)


def test_partition_reduce_bitvec_on_ints():
    x = RNG.integers(0, 1 << 30, size=(16, 5)).astype(np.int32)
    src, dst = sb("int32", 16, 5), sb("int32", 1, 5, offset=256)
    run = execute([PartitionReduce(dst=dst, src=src, op="bitwise_xor")], preload=[(src, x)], fetch=[dst])
    assert run[0][0].tolist() == np.bitwise_xor.reduce(x, axis=0).tolist()


def test_local_gather_takes_each_groups_indices_partition_first():
    """The SDK's numpy semantics: a 16-partition group's indices, read column by column, pick
    element runs of every partition's own row."""
    x = RNG.standard_normal((32, 8)).astype(np.float32)
    idx = (2 * RNG.integers(0, 4, size=(32, 3))).astype(np.int16)  # element offsets, runs of 2
    src, index, dst = sb("float32", 32, 8), sb("int16", 32, 3, offset=64), sb("float32", 32, 20, offset=128)
    run = execute([LocalGather(dst=dst, src=src, index=index, num_elem_per_idx=2, num_valid_indices=10)],
                  preload=[(src, x), (index, idx)], fetch=[dst])
    expected = np.zeros((32, 20), dtype=np.float32)
    for g in (0, 16):
        flat = idx[g:g + 16].reshape(-1, order="F")[:10]
        for p in range(g, g + 16):
            expected[p] = np.concatenate([x[p, i:i + 2] for i in flat])
    assert_bits_equal(run[0], expected)


def test_local_gather_out_of_range_index():
    src, index, dst = sb("bfloat16", 16, 4), sb("int32", 16, 1, offset=64), sb("bfloat16", 16, 16, offset=128)
    idx = np.zeros((16, 1), dtype=np.int32)
    idx[5] = 4  # each partition has 4 elements: 0..3
    with pytest.raises(AccessPatternError) as info:
        execute([LocalGather(dst=dst, src=src, index=index)], preload=[(src, np.zeros((16, 4), BF16)), (index, idx)])
    assert info.value.rule == "local_gather.index_out_of_bounds" and "index 4" in str(info.value) and "4 elements" in str(info.value)
    idx[5] = -1
    with pytest.raises(AccessPatternError, match="index -1"):
        execute([LocalGather(dst=dst, src=src, index=index)], preload=[(src, np.zeros((16, 4), BF16)), (index, idx)])


D = sb("float32", 32, 8)
S = sb("float32", 32, 8, offset=256)


@pytest.mark.parametrize(
    "inst, rule, value",
    [
        (Iota(dst=D, pattern=()), "iota.pattern", "[]"),
        (Iota(dst=D, pattern=((1, 2),) * 5), "iota.pattern", "1 to 4"),
        (Iota(dst=D, pattern=((1, 4),)), "iota.pattern", "4 values"),
        (Iota(dst=ps("float32", 32, 8), pattern=((1, 8),)), "engine.memory_access", "PSUM"),
        (Iota(dst=D, pattern=((1, 8),), engine="vector"), "engine.unsupported", "vector"),
        (AffineSelect(dst=D, src=S, pattern=((1, 7),), on_false_value=0.0), "affine_select.pattern", "7 values"),
        (AffineSelect(dst=D, src=S, pattern=((1, 8),), on_false_value=0.0, cmp_op="add"), "affine_select.cmp_op", "'add'"),
        (AffineSelect(dst=D, src=sb("float32", 32, 4, offset=256), pattern=((1, 8),), on_false_value=0.0), "shape.free_mismatch", "4"),
        (AffineSelect(dst=D, src=ps("float32", 32, 8), pattern=((1, 8),), on_false_value=0.0), "engine.memory_access", "PSUM"),
        (PartitionReduce(dst=sb("float32", 2, 8), src=S, op="add"), "partition_reduce.dst", "2"),
        (PartitionReduce(dst=sb("float32", 1, 8), src=S, op="bitwise_or"), "alu.bitvec_dtype", "float32"),
        (PartitionReduce(dst=sb("float32", 1, 8), src=S, op="power"), "op.unknown", "'power'"),
        (PartitionReduce(dst=sb("float32", 1, 4), src=S, op="add"), "shape.free_mismatch", "4"),
        (LocalGather(dst=D, src=S, index=sb("float32", 32, 8, offset=512)), "local_gather.index", "float32"),
        (LocalGather(dst=D, src=S, index=sb("int32", 32, 3, offset=512)), "local_gather.shape", "48 indices"),
        (LocalGather(dst=D, src=S, index=sb("int32", 32, 4, offset=512), num_elem_per_idx=3), "local_gather.num_elem_per_idx", "3"),
        (LocalGather(dst=D, src=S, index=sb("int32", 32, 4, offset=512), num_valid_indices=65), "local_gather.num_valid_indices", "65"),
        (LocalGather(dst=sb("float32", 8, 8), src=sb("float32", 8, 8, offset=256), index=sb("int32", 8, 8, offset=512),
                     num_valid_indices=8), "local_gather.partitions", "16-partition"),
        (LocalGather(dst=D, src=sb("float32", 16, 8, offset=256), index=sb("int32", 32, 8, offset=512)), "shape.partition_mismatch", "16"),
    ],
    ids=lambda v: v if isinstance(v, str) and "." in v else None,
)
def test_rules(inst, rule, value):
    err = rule_of(inst)
    assert err.rule == rule, err
    assert value in str(err), str(err)
