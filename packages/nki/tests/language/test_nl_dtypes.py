"""dtype names and limits: nl.fp32.min, nl.bfp16.min, nl.finfo, nl.static_cast, nki.dtype."""

import ml_dtypes
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def test_limits_are_the_most_negative_values():
    assert nl.fp32.min == float(np.finfo(np.float32).min)
    assert np.float32(nl.fp32.min).view(np.uint32) == 0xFF7FFFFF
    assert np.array(nl.bfp16.min, dtype=ml_dtypes.bfloat16).view(np.uint16) == 0xFF80
    assert nl.finfo(nl.bfloat16).max == ml_dtypes.finfo(ml_dtypes.bfloat16).max
    assert nl.finfo(nl.float16).eps == np.finfo(np.float16).eps
    assert nl.static_cast(3.7, nl.int32) == 3 and nl.static_cast([1.5, 2.5], nl.bfloat16).dtype == ml_dtypes.bfloat16
    assert nki.dtype is str and isinstance(nl.float32, nki.dtype)


def test_fp32_min_fills_masked_out_elements():
    @nki.jit
    def lower_triangle(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        i_p, i_f = nl.mgrid[0:x.shape[0], 0:x.shape[1]]
        kept = nisa.affine_select(pred=(i_f <= i_p), on_true_tile=t, on_false_value=nl.fp32.min)
        nl.store(out, kept)
        return out

    x = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    expected = np.where(np.tril(np.ones((64, 64), bool)), x, np.finfo(np.float32).min)
    np.testing.assert_array_equal(lower_triangle(x), expected)
