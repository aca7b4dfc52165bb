"""nisa GpSimd instructions: iota, affine_select, tensor_partition_reduce, local_gather, memset."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import rand


@pytest.mark.parametrize("dtype", [nl.int32, nl.float32, nl.bfloat16])
def test_iota_patterns(dtype):
    @nki.jit
    def iota(x):
        out = nl.ndarray((128, 4, 8), dtype=dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 4, 8), dtype=dtype, buffer=nl.sbuf)
        nisa.iota(dst=t, pattern=[[100, 4], [1, 8]], offset=-5, channel_multiplier=2)
        nl.store(out, t)
        return out

    p, w, f = np.meshgrid(np.arange(128), np.arange(4), np.arange(8), indexing="ij")
    expected = -5 + 2 * p + 100 * w + f
    # int32 math, then one conversion to the tile's dtype (bf16 rounds values past 256)
    np.testing.assert_array_equal(iota(rand((4, 4))).astype(np.float32),
                                  expected.astype(np.float32).astype(np.dtype(dtype)).astype(np.float32))


@pytest.mark.parametrize("cmp_op,keep", [(nl.greater_equal, lambda p, j: p - j >= 0), (nl.equal, lambda p, j: p == j),
                                         (nl.less, lambda p, j: p - j < 0)], ids=["ge", "eq", "lt"])
def test_affine_select(cmp_op, keep):
    @nki.jit
    def select(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.affine_select(dst=dst, pattern=[[-1, x.shape[1]]], channel_multiplier=1, on_true_tile=nl.load(x),
                           on_false_value=-9.0, cmp_op=cmp_op)
        nl.store(out, dst)
        return out

    x = rand((128, 128), seed=1)
    p, j = np.meshgrid(np.arange(128), np.arange(128), indexing="ij")
    np.testing.assert_array_equal(select(x), np.where(keep(p, j), x, -9.0))


def test_tensor_partition_reduce():
    @nki.jit
    def colsum(x):
        out = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray((1, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_partition_reduce(dst=dst, op=nl.add, data=nl.load(x))
        nl.store(out, dst)
        return out

    x = rand((128, 32), seed=2)
    np.testing.assert_allclose(colsum(x), x.sum(0, keepdims=True), rtol=1e-5)


def test_local_gather_within_16_partition_groups():
    """Each group of 16 partitions gathers with its own indices, read partition-first; every
    partition takes the elements at those positions of its own row (the SDK's numpy semantics)."""
    @nki.jit
    def gather(x, idx):
        out = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray((128, 4), dtype=x.dtype, buffer=nl.sbuf)
        nisa.local_gather(dst=dst, src_buffer=nl.load(x), index=nl.load(idx), num_valid_indices=4)
        nl.store(out, dst)
        return out

    x = rand((128, 64), seed=3)
    idx = ((np.arange(128) * 7) % 64).astype(np.uint16).reshape(128, 1)
    got = gather(x, idx)
    for g in range(8):
        first = idx[16 * g:16 * g + 4, 0]  # the group's first four indices
        np.testing.assert_array_equal(got[16 * g:16 * (g + 1)], x[16 * g:16 * (g + 1)][:, first])


def test_memset_on_gpsimd_and_integer_values():
    @nki.jit
    def fills(x):
        out = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-7, engine=nisa.gpsimd_engine)
        nl.store(out, t)
        return out

    np.testing.assert_array_equal(fills(rand((4, 4))), np.full((128, 8), -7, np.int32))


def test_gpsimd_cannot_write_psum():
    @nki.jit
    def bad(x):
        p = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.iota(dst=p, pattern=[[1, 8]])

    with pytest.raises(nki.NkiValidationError, match=r"\[engine.memory_access\].*gpsimd"):
        bad(rand((4, 4)))
