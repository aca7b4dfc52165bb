"""VectorE scans and accumulator reductions: tensor_scalar_cumulative, tensor_tensor_scan,
select_reduce, range_select - against numpy references written from the SDK's nki.isa docs."""

import numpy as np
import pytest
from helpers import TRN2, assert_bits_equal, execute, ps, rounded, sb
from neuron_sim import ValidationError
from neuron_sim.isa import RangeSelect, SelectReduce, TensorScalarCumulative, TensorTensorScan

RNG = np.random.default_rng(11)
NP_OPS = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}
IDENTITY = {"add": 0.0, "subtract": 0.0, "multiply": 1.0, "maximum": -np.inf, "minimum": np.inf}


def cumulative_reference(x, op0, imm0, op1, start, reverse0=False):
    """The docs' pseudocode: reg = op1(op0(x[i], imm0), reg); out[i] = reg (fp32)."""
    out = np.empty_like(x, dtype=np.float32)
    reg = np.asarray(start, dtype=np.float32) * np.ones(x.shape[0], np.float32)
    for i in range(x.shape[1]):
        v = NP_OPS[op0](np.float32(imm0), x[:, i]) if reverse0 else NP_OPS[op0](x[:, i], np.float32(imm0))
        reg = NP_OPS[op1](v.astype(np.float32), reg).astype(np.float32)
        out[:, i] = reg
    return out


@pytest.mark.parametrize("op1", ["add", "subtract", "multiply", "maximum", "minimum"])
@pytest.mark.parametrize("cols", [1, 7, 64])
def test_tensor_scalar_cumulative_resets_to_the_ops_identity(op1, cols):
    x = RNG.uniform(0.5, 1.5, (32, cols)).astype(np.float32)
    src, dst = sb("float32", 32, cols), sb("float32", 32, cols, offset=512)
    run = execute([TensorScalarCumulative(dst=dst, src=src, op0="multiply", imm0=2.0, op1=op1)],
                  preload=[(src, x)], fetch=[dst])
    np.testing.assert_allclose(run[0], cumulative_reference(x, "multiply", 2.0, op1, IDENTITY[op1]), rtol=1e-6)


def test_tensor_scalar_cumulative_load_reduce_and_reduce_carry_the_accumulator():
    """load_reduce starts from imm1; a following reduce continues from the first one's last value."""
    x = RNG.standard_normal((16, 8)).astype(np.float32)
    src, d0, d1 = sb("float32", 16, 8), sb("float32", 16, 4, offset=512), sb("float32", 16, 4, offset=1024)
    first = TensorScalarCumulative(dst=d0, src=sb("float32", 16, 4), op0="add", imm0=0.0, op1="add", imm1=10.0,
                                   reduce_cmd="load_reduce")
    second = TensorScalarCumulative(dst=d1, src=sb("float32", 16, 4, offset=16), op0="add", imm0=0.0, op1="add",
                                    reduce_cmd="reduce")
    run = execute([first, second], preload=[(src, x)], fetch=[d0, d1])
    expected = cumulative_reference(x, "add", 0.0, "add", 10.0)
    np.testing.assert_allclose(np.concatenate([run[0], run[1]], axis=1), expected, rtol=1e-6)


def test_tensor_scalar_cumulative_reverse0_and_a_column_operand_and_bf16_output():
    x = RNG.standard_normal((8, 5)).astype(np.float32)
    col = RNG.standard_normal((8, 1)).astype(np.float32)
    src, c, dst = sb("float32", 8, 5), sb("float32", 8, 1, offset=256), sb("bfloat16", 8, 5, offset=512)
    run = execute([TensorScalarCumulative(dst=dst, src=src, op0="subtract", imm0=c, op1="add", reverse0=True)],
                  preload=[(src, x), (c, col)], fetch=[dst])
    ref = np.empty((8, 5), np.float32)
    for p in range(8):
        ref[p] = cumulative_reference(x[p:p + 1], "subtract", col[p, 0], "add", 0.0, reverse0=True)
    assert_bits_equal(run[0], rounded(ref, "bfloat16"))


@pytest.mark.parametrize(
    "inst, rule",
    [
        (TensorScalarCumulative(dst=sb("float32", 8, 4), src=sb("float32", 8, 4, offset=64), op0="add", imm0=1.0,
                                op1="divide"), "accumulator.op"),
        (TensorScalarCumulative(dst=sb("int32", 8, 4), src=sb("float32", 8, 4, offset=64), op0="add", imm0=1.0,
                                op1="add"), "accumulator.dtype"),
        (TensorScalarCumulative(dst=sb("float32", 8, 4), src=sb("float32", 8, 4, offset=64), op0="add", imm0=1.0,
                                op1="add", reduce_cmd="load_reduce"), "accumulator.imm1"),
        (TensorScalarCumulative(dst=sb("float32", 8, 4), src=sb("float32", 8, 4, offset=64), op0="add", imm0=1.0,
                                op1="add", reduce_cmd="idle"), "accumulator.reduce_cmd"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_tensor_scalar_cumulative_rules(inst, rule):
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.rule == rule


@pytest.mark.parametrize("op0, op1, r0, r1", [("multiply", "add", False, False), ("subtract", "maximum", True, False),
                                              ("add", "subtract", False, True)])
def test_tensor_tensor_scan_matches_the_docs_recurrence(op0, op1, r0, r1):
    d0 = RNG.uniform(0.5, 0.9, (32, 20)).astype(np.float32)
    d1 = RNG.standard_normal((32, 20)).astype(np.float32)
    a, b, dst = sb("float32", 32, 20), ps("float32", 32, 20), sb("float32", 32, 20, offset=512)
    run = execute([TensorTensorScan(dst=dst, data0=a, data1=b, initial=0.25, op0=op0, op1=op1, reverse0=r0, reverse1=r1)],
                  preload=[(a, d0), (b, d1)], fetch=[dst])
    ref = np.empty_like(d0)
    prev = np.full(32, 0.25, np.float32)
    for i in range(20):
        first = NP_OPS[op0](prev, d0[:, i]) if r0 else NP_OPS[op0](d0[:, i], prev)
        prev = (NP_OPS[op1](d1[:, i], first) if r1 else NP_OPS[op1](first, d1[:, i])).astype(np.float32)
        ref[:, i] = prev
    np.testing.assert_allclose(run[0], ref, rtol=1e-6)


def test_tensor_tensor_scan_cannot_read_both_inputs_from_psum():
    inst = TensorTensorScan(dst=sb("float32", 8, 4), data0=ps("float32", 8, 4), data1=ps("float32", 8, 4, offset=64),
                            initial=0.0, op0="add", op1="add")
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.rule == "tensor_tensor.both_psum"


def test_select_reduce_selects_and_reduces_the_row_max_into_reduce_res():
    pred = RNG.integers(0, 2, (32, 17)).astype(np.uint8)
    x = RNG.standard_normal((32, 17)).astype(np.float32)
    p, t, dst, res = sb("uint8", 32, 17), sb("float32", 32, 17, offset=64), sb("float32", 32, 17, offset=256), \
        sb("float32", 32, 1, offset=512)
    run = execute([SelectReduce(dst=dst, predicate=p, on_true=t, on_false=-5.0, reduce_res=res, reduce_cmd="reset_reduce")],
                  preload=[(p, pred), (t, x)], fetch=[dst, res])
    selected = np.where(pred != 0, x, np.float32(-5.0))
    np.testing.assert_array_equal(run[0], selected)
    np.testing.assert_array_equal(run[1], selected.max(axis=1, keepdims=True))


def test_select_reduce_reverse_pred_and_a_column_on_false():
    pred = RNG.integers(0, 2, (16, 4)).astype(np.int16)
    x = RNG.standard_normal((16, 4)).astype(np.float32)
    col = RNG.standard_normal((16, 1)).astype(np.float32)
    p, t, f, dst = sb("int16", 16, 4), sb("float32", 16, 4, offset=64), sb("float32", 16, 1, offset=128), \
        sb("float32", 16, 4, offset=256)
    run = execute([SelectReduce(dst=dst, predicate=p, on_true=t, on_false=f, reverse_pred=True)],
                  preload=[(p, pred), (t, x), (f, col)], fetch=[dst])
    np.testing.assert_array_equal(run[0], np.where(pred == 0, x, col))


@pytest.mark.parametrize(
    "kwargs, rule",
    [
        ({"predicate": sb("float32", 8, 4, offset=64)}, "select_reduce.predicate_dtype"),
        ({"on_true": sb("int32", 8, 4, offset=128)}, "select_reduce.dtype"),
        ({"reduce_op": "add"}, "select_reduce.reduce_op"),
        ({"reduce_res": sb("int32", 8, 1, offset=512)}, "select_reduce.reduce_res_dtype"),
        ({"predicate": ps("uint8", 8, 4), "on_true": ps("float32", 8, 4, offset=64)}, "select_reduce.both_psum"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_select_reduce_rules(kwargs, rule):
    args = {"dst": sb("float32", 8, 4), "predicate": sb("uint8", 8, 4, offset=64), "on_true": sb("float32", 8, 4, offset=128),
            "on_false": 0.0, **kwargs}
    with pytest.raises(ValidationError) as info:
        SelectReduce(**args).validate(TRN2)
    assert info.value.rule == rule


def test_range_select_keeps_a_window_per_partition_and_reduces_its_max():
    x = RNG.standard_normal((32, 24)).astype(np.float32)
    lo = RNG.integers(0, 12, (32, 1)).astype(np.float32)
    hi = lo + RNG.integers(1, 12, (32, 1)).astype(np.float32)
    t, b0, b1 = sb("float32", 32, 24), sb("float32", 32, 1, offset=128), sb("float32", 32, 1, offset=132)
    dst, res = sb("float32", 32, 24, offset=256), sb("float32", 32, 1, offset=512)
    run = execute([RangeSelect(dst=dst, on_true=t, comp_op0="greater_equal", comp_op1="less", bound0=b0, bound1=b1,
                               on_false_value=-1e9, range_start=4, reduce_res=res)],
                  preload=[(t, x), (b0, lo), (b1, hi)], fetch=[dst, res])
    index = 4 + np.arange(24, dtype=np.float32)[None, :]
    kept = np.where((index >= lo) & (index < hi), x, np.float32(-1e9))
    np.testing.assert_array_equal(run[0], kept)
    np.testing.assert_array_equal(run[1], kept.max(axis=1, keepdims=True))



@pytest.mark.parametrize(
    "kwargs, rule",
    [
        ({"comp_op0": "add"}, "range_select.comp_op"),
        ({"bound1": sb("bfloat16", 8, 1, offset=132)}, "range_select.bound_dtype"),
        ({"on_true": sb("int16", 8, 4, offset=64)}, "range_select.dtype"),
        ({"reduce_op": "minimum"}, "range_select.reduce_op"),
    ],
    ids=lambda v: v if isinstance(v, str) else None,
)
def test_range_select_rules(kwargs, rule):
    args = {"dst": sb("float32", 8, 4), "on_true": sb("float32", 8, 4, offset=64), "comp_op0": "less", "comp_op1": "less",
            "bound0": sb("float32", 8, 1, offset=128), "bound1": sb("float32", 8, 1, offset=132), "on_false_value": 0.0,
            **kwargs}
    with pytest.raises(ValidationError) as info:
        RangeSelect(**args).validate(TRN2)
    assert info.value.rule == rule
