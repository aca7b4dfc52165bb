"""nki.compiler (ncc): direct allocation places each logical tile where its allocation says (tiles
that share a physical tile share its bytes), force_auto_alloc, and the pass decorators."""

import neuronxcc.nki as nki
import neuronxcc.nki.compiler as ncc
import neuronxcc.nki.language as nl
import numpy as np
import pytest
from nki_helpers import check_error, rand


def _doubled_in_blocks(x, allocation):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    n = x.shape[0] // 128
    t = nl.ndarray((n, nl.par_dim(128), x.shape[1]), dtype=x.dtype, buffer=allocation)
    for i in nl.affine_range(n):
        t[i] = nl.load(x[i * 128:(i + 1) * 128, :])
        nl.store(out[i * 128:(i + 1) * 128, :], nl.multiply(t[i], 2.0))
    return out


@nki.jit
def double_buffered(x):
    return _doubled_in_blocks(x, ncc.sbuf.mod_alloc(base_addr=512, num_free_tiles=(2,)))


def test_mod_alloc_places_logical_blocks_modulo_the_physical_tiles():
    x = rand((5 * 128, 24), seed=1)
    np.testing.assert_array_equal(double_buffered(x), 2 * x)
    compiled = double_buffered.compile((x,), {})
    loads = [i.dst for i in compiled.programs[0].instructions if i.opcode == "TENSOR_COPY"]  # t[i] = ...
    assert [ap.offset for ap in loads] == [512, 512 + 96, 512, 512 + 96, 512]  # block i at 512 + (i % 2) * 24 * 4


def _two_blocks_in_one_tile(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((2, nl.par_dim(128), x.shape[1]), dtype=x.dtype,
                   buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(1,)))
    t[0] = nl.load(x[0:128, :])
    t[1] = nl.load(x[128:256, :])  # the same physical tile as block 0
    nl.store(out[0:128, :], t[0])
    nl.store(out[128:256, :], t[1])
    return out


@nki.jit
def two_blocks_one_tile(x):
    return _two_blocks_in_one_tile(x)


def test_logical_blocks_of_one_physical_tile_share_its_bytes():
    x = rand((256, 16), seed=2)
    out = two_blocks_one_tile(x)
    np.testing.assert_array_equal(out[:128], x[128:])  # block 0 was overwritten through block 1, as on the chip
    np.testing.assert_array_equal(out[128:], x[128:])


def test_force_auto_alloc_gives_every_logical_block_its_own_tile():
    @nki.jit
    @ncc.force_auto_alloc
    def auto(x):
        return _two_blocks_in_one_tile(x)

    x = rand((256, 16), seed=3)
    np.testing.assert_array_equal(auto(x), x)


def test_alloc_calls_the_function_with_block_index_partitions_and_bytes():
    calls = []

    def place(idx, pdim_size, fdim_size):
        calls.append((idx, pdim_size, fdim_size))
        return (0, 4096 * (2 - idx[0]))  # blocks in reverse order

    @nki.jit
    def placed(x):
        return _doubled_in_blocks(x, ncc.sbuf.alloc(place))

    x = rand((3 * 128, 10), seed=4)
    np.testing.assert_array_equal(placed(x), 2 * x)
    assert sorted(set(calls)) == [((0,), 128, 40), ((1,), 128, 40), ((2,), 128, 40)]


def test_a_tile_without_block_dims_sits_at_its_address():
    @nki.jit
    def at_address(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((nl.par_dim(128), x.shape[1]), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=2048))
        t[...] = nl.load(x)
        nl.store(out, nl.exp(t))
        return out

    x = rand((128, 8), seed=5)
    np.testing.assert_allclose(at_address(x), np.exp(x), rtol=1e-6)
    loads = [i.dst for i in at_address.compile((x,), {}).programs[0].instructions if i.opcode == "TENSOR_COPY"]
    assert [ap.offset for ap in loads] == [2048]


def test_psum_mod_alloc_puts_blocks_in_banks():
    @nki.jit
    def products(x, y):
        out = nl.ndarray((2, 128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((2, nl.par_dim(128), 512), dtype=nl.float32, buffer=ncc.psum.mod_alloc(base_bank=3, num_bank_tiles=(2,)))
        xt, yt = nl.load(x), nl.load(y)
        for i in nl.affine_range(2):
            acc[i] += nl.matmul(nl.multiply(xt, float(i + 1)), yt, transpose_x=True)
        for i in nl.affine_range(2):
            nl.store(out[i], nl.copy(acc[i]))
        return out

    x, y = rand((128, 128), seed=6), rand((128, 512), seed=7)
    out = products(x, y)
    for i in range(2):
        np.testing.assert_allclose(out[i], (i + 1) * (x.T @ y), rtol=2e-4, atol=2e-4)
    compiled = products.compile((x, y), {})
    banks = {i.dst.offset // 2048 for i in compiled.programs[0].instructions if i.dst.memory == "psum"}
    assert {3, 4} <= banks


def test_a_directly_allocated_block_tensor_is_indexed_one_block_at_a_time():
    @nki.jit
    def whole(x):
        t = nl.ndarray((2, nl.par_dim(128), 4), dtype=x.dtype, buffer=ncc.sbuf.mod_alloc(base_addr=0, num_free_tiles=(2,)))
        t[0:2] = nl.load(x)  # whole-blocks
        return x

    with pytest.raises(nki.NkiValidationError) as err:
        whole(rand((2, 128, 4)))
    check_error(err.value, "alloc.block_index", "one block at a time", marker="whole-blocks")


def test_a_start_partition_off_the_quadrants_is_refused():
    @nki.jit
    def off(x):
        t = nl.ndarray((2, nl.par_dim(32), 4), dtype=x.dtype, buffer=ncc.sbuf.alloc(lambda idx, p, f: (16 * idx[0], 0)))
        t[1] = nl.load(x)  # off-quadrant
        return x

    with pytest.raises(nki.NkiValidationError) as err:
        off(rand((32, 4)))
    check_error(err.value, "alloc.start_partition", "16", marker="off-quadrant")


@pytest.mark.parametrize("decorator", [ncc.skip_middle_end_transformations, ncc.skip_middle_end_transformations(),
                                       ncc.enable_stack_allocator, ncc.enable_stack_allocator(log_level=10)],
                         ids=["skip", "skip()", "stack", "stack(log_level)"])
def test_compiler_pass_decorators_leave_the_kernel_as_written(decorator):
    @nki.jit
    @decorator
    def plus_one(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(x), 1.0))
        return out

    x = rand((128, 8), seed=8)
    np.testing.assert_array_equal(plus_one(x), x + 1.0)


@nki.jit
def placed_bias_then_temporaries(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    bias = nl.ndarray((nl.par_dim(128), 1), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=0))
    bias[...] = 1.0
    acc = nl.ndarray((nl.par_dim(128), x.shape[1]), dtype=nl.float32, buffer=ncc.sbuf.mod_alloc(base_addr=4))
    acc[...] = nl.load(x)  # the load's own tile (copied into acc) must not land on bias or acc
    acc[...] = nl.add(acc, bias)
    nl.store(out, acc)
    return out


def test_tiles_the_tracer_allocates_avoid_directly_placed_ones():
    x = rand((128, 64), seed=5)
    np.testing.assert_allclose(placed_bias_then_temporaries(x), x + 1.0, rtol=1e-6)
    compiled = placed_bias_then_temporaries.compile((x,), {})
    end = 4 + 64 * 4
    for inst in compiled.programs[0].instructions:
        for ap in inst.writes():
            if ap.tensor is None and ap.offset not in (0, 4):  # an automatically allocated SBUF tile
                assert ap.offset >= end, (inst.opcode, ap.offset)
