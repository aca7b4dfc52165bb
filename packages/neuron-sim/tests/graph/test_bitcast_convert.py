"""bitcast_convert: an operand's bytes read as another dtype (StableHLO's shape rule for widths)."""

from __future__ import annotations

import numpy as np
import pytest
from neuron_sim.errors import ValidationError
from neuron_sim.graph import ops
from neuron_sim.graph.tensor_type import TensorType


@pytest.mark.parametrize("src,dtype,shape", [((5,), "int32", (5,)), ((5,), "bfloat16", (5, 2)), ((5, 4), "int8", (5, 4, 4))],
                         ids=str)
def test_bitcast_convert_reads_the_operands_bytes(src, dtype, shape):
    x = np.array([-0.0, np.nan, -np.inf, 1.5, 3e-45] * (int(np.prod(src)) // 5), np.float32).reshape(src)
    (t,) = ops.infer("bitcast_convert", [TensorType(src, "float32")], {"dtype": dtype})
    (y,) = ops.OPS["bitcast_convert"].evaluate([x], {"dtype": dtype}, [t])
    assert t.shape == shape and y.shape == shape and y.tobytes() == x.tobytes()
    (back,) = ops.infer("bitcast_convert", [t], {"dtype": "float32"})
    assert back.shape == src


@pytest.mark.parametrize("src,dtype", [(((4,), "bool"), "uint8"), (((4,), "float32"), "bool"), (((3,), "int8"), "int16"),
                                       (((4, 3), "int8"), "float32")], ids=str)
def test_bitcast_convert_refuses_what_has_no_byte_reading(src, dtype):
    with pytest.raises(ValidationError, match="graph.bitcast"):
        ops.infer("bitcast_convert", [TensorType(*src)], {"dtype": dtype})
