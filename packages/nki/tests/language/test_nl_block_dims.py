"""Legacy block dims: ``nl.par_dim`` after dim 0 marks the partition dim; ``t[i]`` selects one
[P, F] tile of a block tile; PSUM tiles of several banks take one block per bank."""

import neuronxcc.nki as nki
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from nki_helpers import check_error, rand


@nki.jit
def exp_blocks(a):
    """a [B, 128, F] in HBM through one SBUF tile of B blocks."""
    B, N, M = a.shape
    tiles = nl.ndarray((B, nl.par_dim(N), M), dtype=a.dtype, buffer=nl.sbuf)
    out = nl.ndarray((B, N, M), dtype=a.dtype, buffer=nl.shared_hbm)
    for b in nl.affine_range(B):
        tiles[b] = nl.load(a[b])
    for b in nl.affine_range(B):
        nl.store(out[b], value=nl.exp(tiles[b]))
    return out


def test_block_tile_holds_one_tile_per_block():
    a = rand((3, 128, 96), seed=1)
    np.testing.assert_allclose(exp_blocks(a), np.exp(a), rtol=1e-6)


def test_a_block_tile_takes_the_bytes_of_its_blocks_per_partition():
    # 64 blocks of [128, 512] fp32 are 128 KiB per partition: it fits (a [64, 65536] tile would not).
    a = rand((64, 128, 512), seed=2)
    compiled = exp_blocks.compile((a,), {})
    writes = [i.dst for i in compiled.programs[0].instructions if i.opcode == "TENSOR_COPY"]  # tiles[b] = ...
    assert len(writes) == 64 and {w.partition_count for w in writes} == {128}
    assert [w.offset - writes[0].offset for w in writes[:3]] == [0, 512 * 4, 2 * 512 * 4]  # block b: b * F * 4 bytes in


def test_psum_blocks_are_banks_of_separate_accumulations():
    @nki.jit
    def four_products(x, y):
        out = nl.ndarray((4, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((4, nl.par_dim(128), 512), dtype=nl.float32, buffer=nl.psum)
        xt, yt = nl.load(x), nl.load(y)
        for i in nl.affine_range(4):
            acc[i] += nl.matmul(xt, yt, transpose_x=True)
            acc[i] += nl.matmul(nl.multiply(xt, float(i)), yt, transpose_x=True)
        for i in nl.affine_range(4):
            nl.store(out[i], nl.copy(acc[i]))
        return out

    x, y = rand((128, 128), seed=3), rand((128, 512), seed=4)
    out = four_products(x, y)
    for i in range(4):
        np.testing.assert_allclose(out[i], (1 + i) * (x.T @ y), rtol=2e-4, atol=2e-4)


def test_reshaping_a_block_tile_before_indexing_a_block_is_refused():
    @nki.jit
    def reshape_blocks(a):
        t = nl.ndarray((2, nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)
        t.reshape((128, 128))  # reshape-blocks
        return a

    with pytest.raises(nki.NkiValidationError) as err:
        reshape_blocks(rand((128, 64)))
    check_error(err.value, "view.partition_dim", "block dims", marker="reshape-blocks")


def test_two_partition_dims_are_refused():
    @nki.jit
    def two_marks(a):
        nl.ndarray((nl.par_dim(2), nl.par_dim(128), 64), dtype=a.dtype, buffer=nl.sbuf)  # two-marks
        return a

    with pytest.raises(nki.NkiValidationError) as err:
        two_marks(rand((128, 64)))
    check_error(err.value, "tensor.par_dim", marker="two-marks")
