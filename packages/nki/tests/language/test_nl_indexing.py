"""Index expressions: slices, integers, nl.ds, nl.arange / nl.mgrid (affine forms), masks."""

import nki
import nki.language as nl
import numpy as np
import pytest
from nki.indexing import AffineExpr, AffinePredicate, Mask
from nki_helpers import rand


def _gather(index_fn, out_shape):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(out_shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(index_fn(x)))
        return out

    return kernel


X = rand((256, 96), seed=1)


@pytest.mark.parametrize("index_fn,expected", [
    (lambda x: x[0:128, 10:42], X[0:128, 10:42]),
    (lambda x: x[128:, -32:], X[128:, -32:]),
    (lambda x: x[0:256:2, 0:96:3], X[0:256:2, 0:96:3]),
    (lambda x: x[nl.ds(64, 128), nl.ds(5, 7)], X[64:192, 5:12]),
    (lambda x: x[nl.arange(128)[:, None] + 64, nl.arange(96)[None, :]], X[64:192, :]),
    (lambda x: x[2 * nl.arange(128)[:, None] + 1, nl.arange(0, 96, 4)[None, :]], X[1:256:2, 0:96:4]),
    (lambda x: x[nl.mgrid[0:128, 0:8][0] * 2, nl.mgrid[0:128, 0:8][1] + 88], X[0:256:2, 88:96]),
    (lambda x: x[..., 0:16][0:128], X[0:128, 0:16]),
], ids=["slices", "negative", "steps", "ds", "arange", "affine", "mgrid", "ellipsis"])
def test_index_forms(index_fn, expected):
    np.testing.assert_array_equal(_gather(index_fn, expected.shape)(X), expected)


def test_integer_index_drops_an_hbm_dim_but_keeps_the_partition_dim_on_chip():
    @nki.jit
    def pick(x):
        out = nl.ndarray((2, 96), dtype=x.dtype, buffer=nl.shared_hbm)
        row = x[5]  # HBM: the indexed dim is dropped
        assert row.shape == (96,)
        t = nl.load(x[0:128, :])
        first = t[3]  # on chip: partition dim kept with size 1
        assert first.shape == (1, 96)
        nl.store(out[0], nl.load(row))
        nl.store(out[1], first)
        return out

    got = pick(X)
    np.testing.assert_array_equal(got, X[[5, 3]])


def test_affine_expressions_and_predicates():
    i_p, i_f = nl.mgrid[0:128, 0:64]
    expr = AffineExpr.of(i_p) * 3 - i_f + 7
    assert expr.shape() == (128, 64)
    assert expr.pattern() == (3, ((-1, 64),)) and expr.const == 7
    pred = i_p >= i_f
    assert isinstance(pred, AffinePredicate) and pred.op == "greater_equal"
    assert isinstance(i_p < 100, Mask) and isinstance((i_p < 100) & (i_f >= 3), Mask)
    assert ((i_p < 100) & (i_p >= 20)).restrict(0, 128) == range(20, 100)


def test_mask_on_several_axes():
    @nki.jit
    def window(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, 0.0)
        i_p, i_f = nl.mgrid[0:128, 0:96]
        m = (i_p >= 16) & (i_p < 80) & (i_f < 50)
        nl.store(out[i_p, i_f], value=nl.exp(nl.load(x[i_p, i_f], mask=m), mask=m), mask=m)
        return out

    x = rand((128, 96), seed=2)
    expected = np.zeros_like(x)
    expected[16:80, :50] = np.exp(x[16:80, :50])
    np.testing.assert_allclose(window(x), expected, rtol=1e-6)


def test_mask_that_keeps_nothing():
    @nki.jit
    def empty(x):
        i_p = nl.arange(128)[:, None]
        nl.load(x[0:128, :], mask=(i_p < 0))

    with pytest.raises(nki.NkiValidationError, match=r"\[mask.empty\]"):
        empty(X)


def test_index_type_errors():
    @nki.jit
    def float_index(x):
        x[1.5, 0]

    @nki.jit
    def too_many(x):
        x[0, 0, 0]

    with pytest.raises(nki.NkiValidationError, match=r"\[index.type\].*float"):
        float_index(X)
    with pytest.raises(nki.NkiValidationError, match=r"\[index.rank\].*3 indices"):
        too_many(X)


def test_constant_bool_masks_fold_at_trace_time():
    # A mask over loop indices only is a Python bool when the kernel is traced: True keeps every
    # element, False keeps none (the instruction is dropped), also combined with an affine mask.
    @nki.jit
    def halves(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, 0.0)
        i_p, i_f = nl.mgrid[0:128, 0:96]
        for i in nl.affine_range(2):
            t = nl.load(x[i * 128 + i_p, i_f], mask=(i * 128 < 128))
            t2 = nl.exp(t, mask=(i == 0))
            nl.store(out[i * 128 + i_p, i_f], value=t2, mask=(i_f < 50) & (i == 0))
        return out

    expected = np.zeros_like(X)
    expected[0:128, :50] = np.exp(X[0:128, :50])
    np.testing.assert_allclose(halves(X), expected, rtol=1e-6)


def test_constant_false_mask_drops_the_instruction():
    import nki.isa as nisa

    @nki.jit
    def skipped(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.dma_copy(dst=out, src=t, mask=False)  # never runs
        nl.store(out, value=nisa.tensor_scalar(t, np.multiply, 2.0, mask=True))
        nl.store(out, value=t, mask=False)  # nor this
        return out

    x = X[0:128]
    np.testing.assert_allclose(skipped(x), 2 * x, rtol=1e-6)


def test_sum_of_aranges_past_the_end_under_a_mask():
    # x[i_h + i_k, i_w] over a last, partial tile of rows runs past the end of x; the mask on i_h
    # keeps every index in bounds, and a looser mask on the loaded tile reads only what was loaded.
    @nki.jit
    def pool(x):
        k, (h, w) = 3, x.shape
        out = nl.ndarray((h - k + 1, w - k + 1), dtype=x.dtype, buffer=nl.shared_hbm)
        for t in nl.affine_range((h + 127) // 128):
            i_h, i_k, i_w = nl.mgrid[0:128, 0:k, 0:w]
            rows = nl.load(x[t * 128 + i_h + i_k, i_w], mask=(t * 128 + i_h < h - k + 1))
            i_h, i_k, i_w, i_j = nl.mgrid[0:128, 0:k, 0:w - k + 1, 0:k]
            best = nl.max(rows[i_h, i_k, i_w + i_j], axis=[1, 3], mask=(t * 128 + i_h < h))
            i_o, i_f = nl.mgrid[0:128, 0:w - k + 1]
            nl.store(out[t * 128 + i_o, i_f], value=best, mask=(t * 128 + i_o < h - k + 1))
        return out

    x = rand((200, 16), seed=7)
    expected = np.max([x[i:i + 198, j:j + 14] for i in range(3) for j in range(3)], axis=0)
    np.testing.assert_allclose(pool(x), expected, rtol=1e-6)


def test_sum_of_aranges_past_the_end_without_a_mask_is_refused():
    @nki.jit
    def unmasked(x):
        i_h, i_k, i_w = nl.mgrid[0:128, 0:3, 0:16]
        nl.load(x[72 + i_h + i_k, i_w])

    with pytest.raises(nki.NkiValidationError, match=r"\[index.out_of_bounds\].*spans \[72, 201\]"):
        unmasked(rand((200, 16), seed=7))
