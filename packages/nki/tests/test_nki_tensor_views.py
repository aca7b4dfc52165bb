"""NkiTensor views (tensor.py): reshape, permute, broadcast, expand/squeeze, flatten, dtype
views, explicit access patterns, and their checks."""

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import rand


def _via(view_fn, out_shape, dtype=None):
    @nki.jit
    def kernel(x):
        out = nl.ndarray(out_shape, dtype=dtype or x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=view_fn(x))
        return out

    return kernel


X = rand((128, 64), seed=1)


@pytest.mark.parametrize("view_fn,expected", [
    (lambda x: x.reshape((256, 32)), X.reshape(256, 32)),
    (lambda x: x.reshape((128, 4, 16)).permute((0, 2, 1)), X.reshape(128, 4, 16).transpose(0, 2, 1)),
    (lambda x: x.T, X.T),
    (lambda x: x[0:1, :].broadcast(0, 3), np.broadcast_to(X[0:1], (3, 64))),
    (lambda x: x.reshape((128, 64, 1)).squeeze_dim(2), X),
    (lambda x: x.expand_dim(1).reshape((128, 64)), X),
    (lambda x: x.reshape_dim(1, (4, -1)).flatten_dims(0, 1), X.reshape(512, 16)),
    (lambda x: x.slice(1, 8, 40, 2), X[:, 8:40:2]),
    (lambda x: x.select(0, 7), X[7]),
    (lambda x: x.ap([[64, 32], [2, 16]], offset=1), X.reshape(-1)[1 + np.arange(32)[:, None] * 64 + np.arange(16) * 2]),
], ids=["reshape", "permute", "T", "broadcast", "squeeze", "expand", "reshape_dim+flatten", "slice", "select", "ap"])
def test_hbm_views(view_fn, expected):
    np.testing.assert_array_equal(_via(view_fn, expected.shape)(X), expected)


def test_dtype_view_reinterprets_bits():
    x = rand((128, 64), seed=2)
    got = _via(lambda t: t.view(nl.int32), (128, 64), dtype=nl.int32)(x)
    np.testing.assert_array_equal(got, x.view(np.int32))


def test_on_chip_views():
    @nki.jit
    def views(x):
        out = nl.ndarray((3, 128, 32), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        assert t.is_contiguous() and not t[:, 0:64:2].is_contiguous()
        assert t.get_pattern() == [[64, 128], [1, 64]]
        nl.store(out[0], t.reshape((128, 2, 32))[:, 1, :])
        nl.store(out[1], t[:, 0:64:2])
        col = t[:, 0:1]
        nl.store(out[2], nl.add(t[:, 32:64], col.broadcast(1, 32)))
        return out

    x = rand((128, 64), seed=3)
    got = views(x)
    np.testing.assert_array_equal(got[0], x[:, 32:])
    np.testing.assert_array_equal(got[1], x[:, 0:64:2])
    np.testing.assert_allclose(got[2], x[:, 32:] + x[:, 0:1], rtol=1e-6)


@pytest.mark.parametrize("bad,rule", [
    (lambda t: t.permute((1, 0)), "view.partition_dim"),
    (lambda t: t.reshape((64, 128)), "view.partition_dim"),
    (lambda t: t.broadcast(1, 4), "view.broadcast"),
    (lambda t: t.T, "view.transpose"),
    (lambda t: t.reshape((128, 7, -1)), "view.reshape"),
    (lambda t: t.flatten_dims(0, 1), "view.partition_dim"),
    (lambda t: t.squeeze_dim(1), "view.squeeze"),
], ids=["permute-partition", "reshape-partition", "broadcast-non-1", "T-on-chip", "reshape-sizes", "flatten-partition",
        "squeeze-non-1"])
def test_on_chip_view_rules(bad, rule):
    @nki.jit
    def kernel(x):
        bad(nl.load(x))

    with pytest.raises(nki.NkiValidationError, match=rf"\[{rule}\]"):
        kernel(X)


def test_repr_and_attributes():
    seen = {}

    @nki.jit
    def attrs(x):
        t = nl.ndarray((128, 4, 8), nl.bfloat16, buffer=nl.sbuf, name="tile_a")
        seen.update(shape=t.shape, ndim=t.ndim, size=t.size, itemsize=t.itemsize, buffer=t.buffer, name=t.name,
                    repr=repr(t), x=(x.name, x.buffer))
        out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.load(x))
        return out

    attrs(X)
    assert seen["shape"] == (128, 4, 8) and seen["ndim"] == 3 and seen["size"] == 4096 and seen["itemsize"] == 2
    assert seen["buffer"] == "sbuf" and seen["name"] == "tile_a" and "tile_a" in seen["repr"]
    assert seen["x"] == ("x", "shared_hbm")


def test_a_column_taken_from_a_tile_indexes_as_p_by_1():
    # l[:, i] of an on-chip [P, n] tile is a [P] column; legacy kernels go on indexing it l[:, 0]
    @nki.jit
    def columns(x):
        out = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        col = t[:, 3]
        acc = nl.ndarray((128, 2), dtype=x.dtype, buffer=nl.sbuf)
        acc[:, 0] = nl.multiply(col[:, 0], 2.0)
        acc[:, 1] = nl.copy(t[:, 5])
        nl.store(out, acc)
        return out

    x = np.arange(128 * 8, dtype=np.float32).reshape(128, 8)
    np.testing.assert_array_equal(columns(x), np.stack([2 * x[:, 3], x[:, 5]], axis=1))
