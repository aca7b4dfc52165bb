"""nki.language tensor creation and data movement: ndarray/zeros/ones/full, load/store/copy,
in-place assignment, load_transpose2d, shared_identity_matrix, buffers and tile sizes."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import BF16, check_error, f32, rand


def test_creation_helpers_fill_on_chip_and_in_hbm():
    @nki.jit
    def fills(x):
        out = nl.ndarray((5, 128, 16), dtype=nl.float32, buffer=nl.shared_hbm)
        hbm = nl.full((128, 16), 9.0, dtype=nl.float32, buffer=nl.hbm)  # an HBM scratch tensor, filled by DMA
        for i, t in enumerate([nl.zeros((128, 16), nl.float32), nl.ones((128, 16), nl.float32),
                               nl.full((128, 16), -2.5, nl.float32), nl.zeros_like(nl.load(x), dtype=nl.float32)]):
            nl.store(out[i], t)
        nl.store(out[4], nl.load(hbm))
        return out

    got = fills(rand((128, 16)))
    for value, g in zip([0, 1, -2.5, 0, 9], got):
        np.testing.assert_array_equal(g, np.full((128, 16), value, np.float32))


def test_load_store_copy_with_casts():
    @nki.jit
    def casts(x):
        out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
        t = nl.load(x, dtype=nl.bfloat16)  # the DMA casts
        c = nl.copy(t, dtype=nl.float32)  # VectorE copies (and casts)
        assert (t.dtype, c.dtype, t.buffer, c.buffer) == ("bfloat16", "float32", "sbuf", "sbuf")
        nl.store(out, c)  # stored back as bf16
        return out

    x = rand((128, 64), seed=1)
    np.testing.assert_array_equal(casts(x), x.astype(BF16))


def test_store_of_a_psum_tile_goes_through_sbuf():
    @nki.jit
    def from_psum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        p = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=p, src=nl.load(x))
        nl.store(out, p)
        return out

    x = rand((128, 32), seed=2)
    np.testing.assert_array_equal(from_psum(x), x)


def test_item_assignment_and_in_place_update():
    @nki.jit
    def assign(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        t[:, 0:8] = 0.0  # a number fills the view
        t[:, 8:16] = nl.exp(t[:, 8:16])  # a tile is copied into the view
        t[0:32, 16:24] += 1.0  # elementwise accumulate
        nl.store(out, t)
        return out

    x = rand((128, 32), seed=3)
    expected = x.copy()
    expected[:, 0:8] = 0
    expected[:, 8:16] = np.exp(x[:, 8:16])
    expected[0:32, 16:24] += 1
    np.testing.assert_allclose(assign(x), expected, rtol=1e-6)


def test_hbm_to_hbm_copy_and_store_of_numbers():
    @nki.jit
    def hbm_copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=x)
        out2 = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out2, 4.0)
        return out, out2

    x = rand((256, 16), seed=4)
    a, b = hbm_copy(x)
    np.testing.assert_array_equal(a, x)
    np.testing.assert_array_equal(b, 4.0)


@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=["fp32", "bf16"])
def test_load_transpose2d(dtype):
    @nki.jit
    def lt(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load_transpose2d(x))
        return out

    x = rand((96, 128), dtype, seed=5)
    np.testing.assert_array_equal(f32(lt(x)), f32(x).T)


def test_shared_identity_matrix():
    @nki.jit
    def eye(x):
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        ident = nl.shared_identity_matrix(128, dtype=nl.float32)
        # identity.T @ x = x (nl.matmul's documented example)
        nl.store(out, nl.matmul(ident, nl.load(x), transpose_x=True))
        return out

    x = rand((128, 128), seed=6)
    np.testing.assert_array_equal(eye(x), x)


def test_buffer_predicates_and_tile_sizes(monkeypatch):
    assert nl.is_hbm(nl.shared_hbm) and nl.is_hbm(nl.private_hbm) and not nl.is_hbm(nl.sbuf)
    assert nl.is_on_chip(nl.psum) and nl.is_psum(nl.psum) and nl.is_sbuf(nl.sbuf)
    ts = nl.tile_size
    assert (ts.pmax, ts.gemm_stationary_fmax, ts.gemm_moving_fmax, ts.psum_fmax, ts.psum_num_banks) == (128, 128, 512, 512, 8)
    assert ts.psum_bank_fmax_bytes == 2048 and ts.bn_stats_fmax == 512
    assert ts.sbuf_fmax_bytes == 212984
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    assert nl.tile_size.sbuf_fmax_bytes == 245752


def test_unknown_buffer_and_bad_shapes():
    @nki.jit
    def bad_buffer(x):
        nl.ndarray((128, 4), nl.float32, buffer="l2cache")

    @nki.jit
    def bad_shape(x):
        nl.ndarray((128, 0), nl.float32)

    with pytest.raises(nki.NkiValidationError, match=r"\[tensor.buffer\].*l2cache"):
        bad_buffer(rand((4, 4)))
    with pytest.raises(nki.NkiValidationError, match=r"\[tensor.shape\].*\[128, 0\]"):
        bad_shape(rand((4, 4)))


def test_load_and_store_reject_the_wrong_side():
    @nki.jit
    def load_sbuf(x):
        nl.load(nl.zeros((128, 4), nl.float32))

    @nki.jit
    def store_sbuf(x):
        nl.store(nl.zeros((128, 4), nl.float32), nl.load(x))

    with pytest.raises(nki.NkiValidationError, match=r"\[load.source\]"):
        load_sbuf(rand((128, 4)))
    with pytest.raises(nki.NkiValidationError, match=r"\[store.destination\]"):
        store_sbuf(rand((128, 4)))


@pytest.mark.parametrize("op, ref", [(np.add, np.add), (nl.maximum, np.maximum)], ids=["np.add", "nl.maximum"])
def test_loop_reduce_reduces_into_the_tile_it_is_assigned_to(op, ref):
    """t[...] = nl.loop_reduce(x, op, [k]) is t[...] = op(t[...], x), as NKI documents it."""

    @nki.jit
    def over_blocks(x):
        out = nl.ndarray((128, x.shape[2]), dtype=nl.float32, buffer=nl.shared_hbm)
        acc = nl.zeros((128, x.shape[2]), dtype=nl.float32, buffer=nl.sbuf)
        for k in nl.affine_range(x.shape[0]):
            part = nl.load(x[k])
            acc[...] = nl.loop_reduce(part, op=op, loop_indices=[k], dtype=nl.float32)
        nl.store(out, acc)
        return out

    x = rand((3, 128, 20), seed=11)
    np.testing.assert_allclose(over_blocks(x), ref.reduce(np.concatenate([np.zeros((1, 128, 20), np.float32), x]), axis=0),
                               rtol=1e-6, atol=1e-6)


def test_loop_reduce_used_as_a_tile_is_refused():
    @nki.jit
    def unassigned(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        b = nl.loop_reduce(nl.load(x), op=np.add, loop_indices=[0])
        nl.store(out, b)  # loop-reduce
        return out

    with pytest.raises(nki.NkiValidationError) as err:
        unassigned(rand((128, 4)))
    check_error(err.value, "loop_reduce.target", "assigned to", marker="loop-reduce")


def test_shared_constant_is_an_hbm_tensor_holding_the_values_at_every_launch():
    """nl.shared_constant(array, dtype): the legacy form of a constant built into the kernel."""

    @nki.jit
    def add_constant(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        table = nl.shared_constant(np.arange(x.shape[0] * x.shape[1], dtype=np.int32).reshape(x.shape), dtype=nl.float32)
        nl.store(out, nl.add(nl.load(x), nl.load(table)))
        return out

    x = rand((128, 6), seed=12)
    ref = f32(x) + np.arange(128 * 6, dtype=np.float32).reshape(128, 6)
    np.testing.assert_allclose(add_constant(x), ref, rtol=1e-6)
    np.testing.assert_allclose(add_constant(x + 1), ref + 1, rtol=1e-6)  # the second launch binds it again


def test_lazily_initialized_tiles_hold_their_fill_value():
    """nl.full/zeros(..., lazy_initialization=True) (legacy kernels): same values as an eager fill."""

    @nki.jit
    def plus_filled(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.zeros(x.shape, dtype=nl.float32, buffer=nl.sbuf, lazy_initialization=True)
        threes = nl.full(x.shape, 3.0, dtype=nl.float32, buffer=nl.sbuf, lazy_initialization=False)
        nl.store(out, nl.add(nl.add(acc, threes), nl.load(x)))
        return out

    x = rand((128, 5), seed=14)
    np.testing.assert_allclose(plus_filled(x), x + 3.0, rtol=1e-6)
