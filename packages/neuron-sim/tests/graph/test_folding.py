"""neuron_sim.graph.folding: the one evaluation every constant-folding layer uses."""

from __future__ import annotations

import numpy as np
from neuron_sim.graph import folding
from neuron_sim.graph.tensor_type import TensorType


def test_evaluation_over_constants_has_the_graphs_bits_and_no_floating_point_warnings(recwarn):
    a = np.array([1.0, -1.0, 0.0, 3.0], np.float32)
    b = np.array([0.0, 0.0, 0.0, 7.0], np.float32)
    (q,) = folding.evaluate("divide", [a, b], {}, [TensorType((4,), "float32")])
    assert q.dtype == np.float32 and q[:2].tolist() == [np.inf, -np.inf] and np.isnan(q[2])
    assert q[3] == np.float32(3.0) / np.float32(7.0)
    assert not recwarn.list


def test_uniform_means_the_same_bits():
    assert folding.is_uniform(np.broadcast_to(np.float32(2.5), (64, 300)))
    assert folding.is_uniform(np.full(5, np.nan, np.float32)) and folding.is_uniform(np.array([], np.float32))
    assert not folding.is_uniform(np.array([0.0, -0.0], np.float32))  # equal values, other bits
    assert not folding.is_uniform(np.arange(3, dtype=np.int64))
