"""Affine views: the strides view ops produce, and reshape's stride rule."""

import numpy as np
import pytest
from neuronxcc.compiler.views import View, reshape_strides


def elements(view: View, base: np.ndarray) -> np.ndarray:
    flat = base.reshape(-1)
    index = view.offset + sum(np.arange(n).reshape([-1 if d == k else 1 for d in range(len(view.shape))]) * s
                              for k, (n, s) in enumerate(zip(view.shape, view.strides)))
    return flat[np.broadcast_to(index, view.shape)]


def test_view_ops_match_numpy():
    base = np.arange(2 * 3 * 4).reshape(2, 3, 4)
    v = View.hbm("t", (2, 3, 4), "float32")
    np.testing.assert_array_equal(elements(v.transpose((2, 0, 1)), base), base.transpose(2, 0, 1))
    np.testing.assert_array_equal(elements(v.slice((0, 1, 1), (2, 3, 4), (1, 1, 2)), base), base[:, 1:, 1::2])
    b = View.hbm("b", (3,), "float32").broadcast((2, 3, 4), (1,))
    np.testing.assert_array_equal(elements(b, np.arange(3)), np.broadcast_to(np.arange(3)[None, :, None], (2, 3, 4)))
    np.testing.assert_array_equal(elements(v.reshape((6, 4)), base), base.reshape(6, 4))


@pytest.mark.parametrize("shape,perm,new,ok", [((6, 4), (1, 0), (24,), False), ((6, 4), (0, 1), (2, 3, 4), True),
                                               ((2, 3, 4), (0, 2, 1), (2, 12), False), ((2, 3, 4), (1, 0, 2), (3, 2, 4), True),
                                               ((2, 3, 4), (1, 0, 2), (6, 4), False)], ids=str)
def test_reshape_strides(shape, perm, new, ok):
    base = np.arange(int(np.prod(shape))).reshape(shape)
    v = View.hbm("t", shape, "float32").transpose(perm)
    r = v.reshape(new)
    assert (r is not None) == ok
    if ok:
        np.testing.assert_array_equal(elements(r, base), base.transpose(perm).reshape(new))


def test_reshape_of_broadcast_keeps_stride_zero():
    v = View.hbm("b", (5,), "float32").broadcast((4, 5), (1,))
    assert reshape_strides(v.shape, v.strides, (2, 2, 5)) == (0, 0, 1)
    assert v.reshape((20,)) is None
