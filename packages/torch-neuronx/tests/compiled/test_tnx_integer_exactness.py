"""Integers are exact on the device (issue 13): moves move bytes, compares and arithmetic run where
the engines compute integers exactly - GpSimd's integer ALU, int64 by 32-bit words, fp32 below
2**24 - and every other integer op runs through CPU fallback (the compiler's verdict), never through
fp32. Each reproducer of the issue, plus every integer dtype near its extremes, in eager mode on
both executors (``test_tnx_compile_integers.py`` has the compiled ones)."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import assert_equal, run_python

BIG = 16777217  # 2**24 + 1: the first integer fp32 cannot hold

REPRODUCERS = {
    "times_one": (lambda x: x * 1, [[BIG]]),
    "ne_scalar": (lambda x: x != 16777216, [[BIG]]),
    "eq_scalar": (lambda x: x == 16777216, [[BIG]]),
    "lt_scalar": (lambda x: x < 16777218, [[BIG]]),
    "ge_scalar": (lambda x: x >= 16777218, [[BIG]]),
    "eq_tensor": (lambda x: x == x.flip(0), [[BIG, 16777216]]),
    "lt_tensor": (lambda x: x < x.flip(0), [[BIG, 16777216]]),
    "roll": (lambda x: x.roll(1, 0), [[0, BIG]]),
    "roll_dim1": (lambda x: x.roll(1, 1), [[0, BIG]]),
    "flip": (lambda x: x.flip(1), [[0, BIG]]),
    "index_select": (lambda x: x.index_select(1, torch.tensor([1, 0], device=x.device)), [[0, BIG]]),
    "cumsum": (lambda x: x.cumsum(1), [[0, BIG]]),
    "argmin_abs": (lambda x: x.abs().argmin(), [[BIG, 16777216]]),
    "argmin_neg": (lambda x: x.neg().argmin(), [[16777216, BIG]]),
    "floor_div": (lambda x: torch.div(x, 2, rounding_mode="floor"), [[-BIG]]),
    "flip_2_40": (lambda x: x.flip(0), [[1099511627773]]),
}

EDGES = {
    torch.int64: [2**63 - 1, -(2**63), 2**63 - 2, 1099511627773, BIG, -BIG, 0, -1],
    torch.int32: [2**31 - 1, -(2**31), 2**31 - 2, BIG, -BIG, 0, -1, 7],
    torch.int16: [32767, -32768, 1, 0, -1, 300, -300, 5],
    torch.int8: [127, -128, 1, 0, -1, 100, -100, 5],
    torch.uint8: [255, 0, 254, 1, 128, 127, 9, 3],
    torch.bool: [True, False, True, True, False, False, True, False],
}
# What a user does with token ids, positions, indices and masks: moves, compares, selects, casts
OPS = {
    "clone": lambda x: x.clone(),
    "slice_t": lambda x: x.reshape(2, 4).t()[1:],
    "cat": lambda x: torch.cat([x, x.flip(0)]),
    "eq": lambda x: x == x.roll(1),
    "lt": lambda x: x < x.roll(1),
    "ne_scalar": lambda x: x != 1,
    "where": lambda x: torch.where(x.roll(3) > x, x, x.roll(1)),
    "max": lambda x: torch.maximum(x, x.roll(2)),
    "gather": lambda x: x[torch.tensor([7, 0, 3, 3], device=x.device)],
    "to_int64": lambda x: x.long(),
    "to_int32": lambda x: x.int(),
    "to_bool": lambda x: x.bool(),
    "to_float": lambda x: x.float(),
    "sum": lambda x: x.sum(),
    "add": lambda x: x + x.roll(1),
    "mul": lambda x: x * 3,
}


def _check(fn, values, dtype):
    x = torch.tensor(values, dtype=dtype)
    try:
        expected = fn(x)
    except RuntimeError as err:  # what CPU refuses, the device refuses
        with pytest.raises(RuntimeError, match=str(err).split("\n")[0][:40]):
            fn(x.to("neuron"))
        return
    assert_equal(fn(x.to("neuron")), expected)


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32])
def test_issue_reproducers(name, dtype):
    fn, values = REPRODUCERS[name]
    if dtype == torch.int32 and name == "flip_2_40":
        values = [[2**31 - 3]]
    _check(fn, values, dtype)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", list(EDGES), ids=str)
def test_every_integer_dtype_near_its_extremes(op, dtype):
    _check(OPS[op], EDGES[dtype], dtype)


# Comparisons whose operands promote: a bool mask against an int (fuzz-23: ``mask != -1`` compared
# the mask with True), uint8 against int8 (int16 on CPU), a 0-d tensor that does not win.
MIXED_COMPARES = {
    "bool_ne_minus_one": lambda b, i: b != -1,
    "bool_eq_two": lambda b, i: b == 2,
    "bool_lt_two": lambda b, i: b < 2,
    "bool_ge_minus_one": lambda b, i: b >= -1,
    "bool_gt_half": lambda b, i: b > 0.5,
    "bool_le_0d": lambda b, i: b <= torch.tensor(-1, device=b.device),
    "bool_eq_int64": lambda b, i: b == i,
    "int64_gt_bool": lambda b, i: i > b,
    "bool_ne_uint8": lambda b, i: b != i.to(torch.uint8),
    "uint8_eq_int8": lambda b, i: i.to(torch.uint8) == i.to(torch.int8),
    "int8_eq_0d_1000": lambda b, i: i.to(torch.int8) == torch.tensor(1000, device=b.device),
    "mask_of_ge_ne": lambda b, i: (i >= 0) != -1,
    "maximum_bool_int64": lambda b, i: torch.maximum(b, i),
    "where_bool_int": lambda b, i: torch.where(b, b, i),
    "clamp_int_by_half": lambda b, i: torch.clamp(i, min=0.5),
}


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("name", sorted(MIXED_COMPARES))
def test_comparisons_whose_operands_promote(name, adaptive):
    torch_neuronx = pytest.importorskip("torch_neuronx")
    fn = MIXED_COMPARES[name]
    b, i = torch.tensor([False, True, True, False, True]), torch.tensor([-3, 2, 255, 1000, 0])
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        assert_equal(fn(b.to("neuron"), i.to("neuron")), fn(b, i))
    finally:
        torch_neuronx.set_adaptive_eager(False)


# Integer matmuls in every form users write (fuzz-27: TensorE's fp32 saturated int8 [[100, 100],
# [1, 1]] @ .t() to 127 where CPU wraps to 32, and rounded an int32 16777217 to 16777216). Operands
# are EDGES as [2, 4]: products and sums pass every dtype's range and 2**24.
MATMULS = {
    "mm": lambda x: torch.mm(x, x.t()),
    "matmul": lambda x: torch.matmul(x, x.t()),
    "gram": lambda x: x @ x.mT,
    "bmm": lambda x: torch.bmm(x[None], x.t()[None]),
    "addmm": lambda x: torch.addmm(x[:, 1:3], x, x.t()),
    "einsum": lambda x: torch.einsum("ij,kj->ik", x, x),
    "tensordot": lambda x: torch.tensordot(x, x, dims=([1], [1])),
    "linear": lambda x: torch.nn.functional.linear(x, x, x[:, 0]),
    "outer_k1": lambda x: x[:, :1] @ x[:1, :],
}
MATMUL_REPRODUCERS = {
    "int8_gram_wraps": (lambda x: torch.mm(x, x.t()), [[100, 100], [1, 1]], torch.int8),
    "int32_past_2_24": (lambda x: x @ torch.tensor([[1, 3]], dtype=x.dtype, device=x.device), [[BIG], [1]],
                        torch.int32),
}


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("name", sorted(MATMUL_REPRODUCERS))
def test_integer_matmul_reproducers(name, adaptive):
    torch_neuronx = pytest.importorskip("torch_neuronx")
    fn, values, dtype = MATMUL_REPRODUCERS[name]
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        _check(fn, values, dtype)
    finally:
        torch_neuronx.set_adaptive_eager(False)


@pytest.mark.parametrize("form", sorted(MATMULS))
@pytest.mark.parametrize("dtype", list(EDGES), ids=str)
def test_integer_matmuls_are_exact_and_wrap_as_cpu(form, dtype):
    fn = MATMULS[form]
    _check(lambda x: fn(x.reshape(2, 4)), EDGES[dtype], dtype)


@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_float_to_integer_conversions_wrap_as_cpu(src):
    """CPU truncates to int32 (int64 for int64; NaN and out-of-range values: its minimum) and wraps
    narrower integers: -1.0 -> 255 as uint8, 300.0 -> 44 and 1e10 -> 0."""
    x = torch.tensor([-1.0, -1.5, -200.7, 255.9, 256.0, 300.0, 2.5, -2.5, 1e10, -1e10, 3e9,
                      float("nan"), float("inf"), float("-inf")]).to(src)
    for dst in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        assert_equal(x.to("neuron").to(dst), x.to(dst))
        assert_equal((x.to("neuron") * 1).to(dst), (x * 1).to(dst))


def test_the_exact_executor_agrees():
    """The reproducers again with the ISA interpreted instruction by instruction."""
    code = """
        import sys, torch, torch_neuronx
        sys.path[:0] = [{tests!r}, {helpers!r}]
        from test_tnx_integer_exactness import REPRODUCERS, EDGES, OPS, _check
        for fn, values in REPRODUCERS.values():
            _check(fn, values, torch.int64)
        for name in ("clone", "eq", "lt", "where", "max", "cat", "to_int32", "add", "sum"):
            for dtype in EDGES:
                _check(OPS[name], EDGES[dtype], dtype)
        print("ok")
    """
    import os

    tests = os.path.dirname(__file__)
    proc = run_python(code.format(tests=tests, helpers=os.path.dirname(tests)), env={"NEURON_SIM_MODE": "exact"},
                      timeout=900)
    assert proc.stdout.strip().endswith("ok")


def test_integer_arithmetic_the_engines_cannot_do_exactly_runs_on_cpu():
    # no engine divides integers: floor division past 2**24 runs through CPU fallback
    torch_neuronx = pytest.importorskip("torch_neuronx")
    torch_neuronx.clear_op_tracking()
    x = torch.tensor([BIG, -BIG], dtype=torch.int64, device="neuron")
    assert (torch.div(x, 2, rounding_mode="floor").cpu() == torch.tensor([8388608, -8388609])).all()
    assert "aten::div" in torch_neuronx.get_fallback_ops()
