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


def test_uint32_products_wrap_modulo_2_to_the_32():
    # the low word of a 64-bit product (what int64 multiplication by 32-bit words builds on)
    a = np.array([[2**32 - 1, 65535, 2**31, 3]], dtype=np.int64)
    b = np.array([[2**32 - 1, 65535, 2, 2**31 + 1]], dtype=np.int64)
    np.testing.assert_array_equal(run_tt("multiply", a, b, dtype="uint32"), (a * b) % 2**32)


def test_vector_bitvec_ops_treat_uint32_words_as_bit_patterns():
    # logical shifts and masks of words >= 2**31 (no fp32 cast, no sign extension)
    from neuron_sim.isa import TensorScalar

    words = np.array([[2**32 - 1, 2**31 + 5, 65536 + 7, 0]], dtype=np.uint32)
    for op, imm, expected in (("right_shift", 16, words >> 16), ("bitwise_and", 0xFFFF, words & 0xFFFF),
                              ("bitwise_xor", 0xFFFFFFFF, ~words)):
        x, out = sb("uint32", 1, 4), sb("uint32", 1, 4, offset=64)
        run = execute([TensorScalar(dst=out, src=x, op0=op, operand0=imm, engine="vector")], preload=[(x, words)],
                      fetch=[out])
        np.testing.assert_array_equal(run[0], expected)


def test_integer_alu_cost_follows_the_gpsimd_rate():
    # two operand reads per element per partition per cycle at 1.2 GHz, plus GpSimd's fixed
    # software-loop cost: the same for int32 as for fp32 tiles of the same size
    from neuron_sim.timing.costs import compute_cost

    def cost(dtype, n):
        return compute_cost(TensorTensor(dst=sb(dtype, 128, n), in0=sb(dtype, 128, n, offset=8192),
                                         in1=sb(dtype, 128, n, offset=16384), op="add", engine="gpsimd"), TRN2)

    small, big = cost("int32", 64), cost("int32", 1024)
    spec = TRN2.gpsimd
    assert big.issue_ns == pytest.approx(spec.cycles_to_ns(2 * 1024 + spec.fixed_cycles))
    assert big.issue_ns > small.issue_ns
    assert cost("float32", 1024).issue_ns == big.issue_ns
