"""argsort: PyTorch's stable sort order - NaN above every number, -0.0 equal to 0.0, equal
elements in their original order (descending too), integers compared exactly."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim import ValidationError
from neuron_sim.graph import TensorType
from neuron_sim.graph.ops import OPS, infer

NAN, INF = np.nan, np.inf


def argsort(x, dim=-1, descending=False):
    (t,) = infer("argsort", [TensorType(x.shape, str(x.dtype))], {"dim": dim, "dtype": "int64"})
    return OPS["argsort"].evaluate([x], {"dim": dim, "descending": descending, "dtype": "int64"}, [t])[0]


def test_floats_nan_last_ascending_first_descending_ties_in_order():
    x = np.array([1.0, NAN, -0.0, 0.0, 1.0, -INF, NAN, INF], np.float32)
    assert argsort(x).tolist() == [5, 2, 3, 0, 4, 7, 1, 6]
    assert argsort(x, descending=True).tolist() == [1, 6, 7, 0, 4, 2, 3, 5]


def test_integers_beyond_2_24_compare_exactly():
    x = np.array([2**24 + 1, 2**24, 2**63 - 1, -(2**63), 2**24 + 1], np.int64)
    assert argsort(x).tolist() == [3, 1, 0, 4, 2]
    assert argsort(x, descending=True).tolist() == [2, 0, 4, 1, 3]


def test_any_dim():
    x = np.array([[3, 1, 2], [0, 5, 1]], np.int32)
    assert argsort(x, dim=0).tolist() == [[1, 0, 1], [0, 1, 0]]
    assert argsort(x, dim=1, descending=True).tolist() == [[0, 2, 1], [1, 2, 0]]


@pytest.mark.parametrize("shape,attrs", [((), {"dim": 0}), ((3,), {"dim": 1}), ((3,), {"dim": 0, "dtype": "float32"})])
def test_bad_operands_are_refused(shape, attrs):
    with pytest.raises(ValidationError):
        infer("argsort", [TensorType(shape, "float32")], attrs)
