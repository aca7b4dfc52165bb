"""nl.matmul and nl.transpose: TensorE work landing in PSUM."""

import nki
import nki.language as nl
import numpy as np
import pytest
from nki_helpers import DTYPES, assert_close, f32, rand


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("transpose_x", [True, False])
def test_matmul(transpose_x, dtype):
    @nki.jit
    def mm(x, y):
        out = nl.ndarray((128 if transpose_x else x.shape[0], y.shape[1]), dtype=nl.float32, buffer=nl.shared_hbm)
        r = nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x)
        assert r.buffer == "psum" and r.dtype == "float32"
        nl.store(out, r)
        return out

    x = rand((96, 128) if transpose_x else (128, 96), dtype, seed=1)
    y = rand((96, 200), dtype, seed=2)
    expected = (f32(x).T if transpose_x else f32(x)) @ f32(y)
    assert_close(mm(x, y), expected, np.float32, rtol=1e-4, atol=1e-4)


def test_matmul_operand_in_psum_is_evacuated_first():
    @nki.jit
    def chained(a, b):
        out = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.shared_hbm)
        ab = nl.matmul(nl.load(a), nl.load(b), transpose_x=True)  # PSUM [128, 128]
        nl.store(out, nl.matmul(ab, nl.load(b)[:, 0:64], transpose_x=True))
        return out

    a, b = rand((128, 128), seed=3), rand((128, 128), seed=4)
    assert_close(chained(a, b), (a.T @ b).T @ b[:, 0:64], rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dtype", DTYPES)
def test_transpose_to_psum(dtype):
    @nki.jit
    def tr(x):
        out = nl.ndarray((x.shape[1], x.shape[0]), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.transpose(nl.load(x))
        assert t.buffer == "psum"
        nl.store(out, t)
        return out

    x = rand((64, 128), dtype, seed=5)
    np.testing.assert_array_equal(f32(tr(x)), f32(x).T)


def test_matmul_reads_hbm_operands_only_after_a_load():
    @nki.jit
    def from_hbm(x):
        nl.matmul(x, x, transpose_x=True)

    with pytest.raises(nki.NkiValidationError, match=r"\[engine.memory_access\].*nl.load it first"):
        from_hbm(rand((128, 128)))
