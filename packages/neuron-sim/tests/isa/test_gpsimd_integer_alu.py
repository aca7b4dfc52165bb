"""GpSimd's integer ALU: tensor_tensor over int32 (or uint32) tiles only computes in exact 32-bit
integer arithmetic; VectorE (and mixed dtypes) compute through fp32."""

import numpy as np
import pytest
from helpers import TRN2, execute, sb
from neuron_sim import ValidationError
from neuron_sim.isa import TensorTensor

BIG = np.array([[2**24 + 1, -(2**24) - 1, 2**31 - 1, -(2**31), 7, 16777216]], dtype=np.int64)
OTHER = np.array([[2**24, -(2**24) - 1, 1, -1, -3, 16777217]], dtype=np.int64)


def run_tt(op, a, b, dtype="int32", engine="gpsimd", dst_dtype=None):
    n = a.shape[1]
    x, y, out = sb(dtype, 1, n), sb(dtype, 1, n, offset=64), sb(dst_dtype or dtype, 1, n, offset=128)
    run = execute([TensorTensor(dst=out, in0=x, in1=y, op=op, engine=engine)],
                  preload=[(x, a.astype(dtype)), (y, b.astype(dtype))], fetch=[out])
    return run[0].astype(np.int64)


@pytest.mark.parametrize("op, reference", [
    ("add", lambda a, b: a + b), ("subtract", lambda a, b: a - b), ("multiply", lambda a, b: a * b),
    ("maximum", np.maximum), ("minimum", np.minimum),
    ("equal", lambda a, b: (a == b) * 1), ("not_equal", lambda a, b: (a != b) * 1),
    ("less", lambda a, b: (a < b) * 1), ("greater_equal", lambda a, b: (a >= b) * 1),
])
def test_int32_tiles_on_gpsimd_compute_exactly_and_wrap(op, reference):
    expected = reference(BIG, OTHER).astype(np.int32).astype(np.int64)  # 32-bit wrap
    np.testing.assert_array_equal(run_tt(op, BIG, OTHER), expected)


def test_vector_engine_computes_the_same_int32_tiles_in_fp32():
    got = run_tt("not_equal", BIG, OTHER, engine="vector")
    assert got[0, 0] == 0  # 2**24 + 1 and 2**24 are one fp32 value
    assert run_tt("not_equal", BIG, OTHER)[0, 0] == 1


def test_uint32_tiles_wrap_modulo_2_to_the_32():
    a = np.array([[2**32 - 1, 5]], dtype=np.int64)
    b = np.array([[2, 7]], dtype=np.int64)
    np.testing.assert_array_equal(run_tt("add", a, b, dtype="uint32"), [[1, 12]])
    np.testing.assert_array_equal(run_tt("subtract", a, b, dtype="uint32"), [[2**32 - 3, 2**32 - 2]])


def test_mixed_dtypes_are_not_integer_mode():
    a = np.array([[2**24 + 1]], dtype=np.int64)
    n = 1
    x, y, out = sb("int32", 1, n), sb("int32", 1, n, offset=64), sb("float32", 1, n, offset=128)
    run = execute([TensorTensor(dst=out, in0=x, in1=y, op="add", engine="gpsimd")],
                  preload=[(x, a.astype(np.int32)), (y, np.zeros((1, 1), np.int32))], fetch=[out])
    assert run[0][0, 0] == np.float32(2**24)  # fp32 datapath: rounded


def test_integer_mode_refuses_ops_without_integer_semantics():
    tt = TensorTensor(dst=sb("int32", 1, 4), in0=sb("int32", 1, 4), in1=sb("int32", 1, 4, offset=64), op="divide",
                      engine="gpsimd")
    with pytest.raises(ValidationError) as info:
        tt.validate(TRN2)
    assert info.value.rule == "alu.integer_mode_op"
    TensorTensor(dst=sb("int32", 1, 4), in0=sb("int32", 1, 4), in1=sb("int32", 1, 4, offset=64), op="divide",
                 engine="vector").validate(TRN2)  # fp32 division on VectorE stays legal
