"""neuron_dtypes: the Neuron SDK's numpy dtype helpers nki-library's test harness imports."""

import ml_dtypes
import neuron_dtypes as ndt
import nki.language as nl
import numpy as np
import pytest


@pytest.mark.parametrize("dtype, size, is_float", [(np.float32, 4, True), (nl.bfloat16, 2, True), (np.int8, 1, False),
                                                   (nl.float8_e4m3, 1, True), (np.uint16, 2, False)])
def test_sizes_and_float_types(dtype, size, is_float):
    assert ndt.sizeinbytes(dtype) == size
    assert ndt.is_float_type(dtype) is is_float


def test_static_cast_rounds_to_the_dtype():
    x = np.array([1.0 + 2.0 ** -10, -3.0], dtype=np.float32)
    cast = ndt.static_cast(x, ndt.bfloat16)
    assert cast.dtype == ml_dtypes.bfloat16 and cast.astype(np.float32).tolist() == [1.0, -3.0]
    assert ndt.finfo(ndt.bfloat16).bits == 16
