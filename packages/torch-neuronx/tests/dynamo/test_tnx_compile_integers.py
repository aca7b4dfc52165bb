"""Integers under ``torch.compile(backend="neuron")``: the issue-13 reproducers give CPU's values. A
graph with an integer op no engine computes exactly (or one CPU refuses by value: integer division
by zero, negative integer powers) is refused by the compiler (``compile.inexact_integer``) and runs
op by op instead - those ops through CPU fallback, with a warning - in either fallback mode: CPU's
values or CPU's error, never a rounding through fp32. remainder and friends match CPU bit for bit
in compiled graphs too."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
import torch
from tnx_helpers import assert_equal, run_python
from torch_neuronx.dynamo.backend import NeuronCompileFallbackWarning

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "compiled"))
from test_tnx_integer_exactness import (  # noqa: E402
    EDGES,
    MATMUL_REPRODUCERS,
    MATMULS,
    MIXED_COMPARES,
    OPS,
    REPRODUCERS,
)

# Integer ops no engine computes exactly at these ranges (no engine divides integers): the graph
# runs op by op. Sums, scans, arg-reductions and int64 products run by exact steps instead.
REFUSED = {"floor_div"}


def _compiled(fn, *args, **options):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron", options=options or None)(*(a.to("neuron") for a in args))


def _compiled_warnings(fn, *args, **options):
    """(result, the fallback warnings) of ``fn`` compiled."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = _compiled(fn, *args, **options)
    return result, [w for w in caught if issubclass(w.category, NeuronCompileFallbackWarning)]


@pytest.mark.parametrize("name", sorted(MIXED_COMPARES))
def test_comparisons_whose_operands_promote_compiled(name):
    fn = MIXED_COMPARES[name]
    b, i = torch.tensor([False, True, True, False, True]), torch.tensor([-3, 2, 255, 1000, 0])
    assert_equal(_compiled(fn, b, i), fn(b, i))


@pytest.mark.parametrize("name", sorted(REPRODUCERS))
def test_issue_reproducers_compiled(name):
    fn, values = REPRODUCERS[name]
    x = torch.tensor(values, dtype=torch.int64)
    got, fallbacks = _compiled_warnings(fn, x)
    assert_equal(got, fn(x))
    assert bool(fallbacks) == (name in REFUSED)
    if fallbacks:
        assert "compile.inexact_integer" in str(fallbacks[0].message)


@pytest.mark.parametrize("fallback", ["error", "eager"])
def test_inexact_integer_graphs_run_op_by_op_in_either_fallback_mode(fallback):
    fn, values = REPRODUCERS["floor_div"]
    x = torch.tensor(values, dtype=torch.int64)
    got, fallbacks = _compiled_warnings(fn, x, fallback=fallback)
    assert_equal(got, fn(x))
    assert len(fallbacks) == 1 and "runs eagerly" in str(fallbacks[0].message)


def test_other_compile_errors_still_raise_under_the_error_mode():
    with pytest.raises(Exception, match="NeuronCompileError"):
        _compiled(lambda x: torch.lgamma(x), torch.tensor([3.0, 1.0, 2.0]))  # no lowering


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8, torch.int8, torch.bool], ids=str)
def test_integer_dtypes_near_their_extremes_compiled(op, dtype):
    x = torch.tensor(EDGES[dtype], dtype=dtype)
    try:
        expected = OPS[op](x)
    except RuntimeError:
        pytest.skip("CPU refuses this op for this dtype")
    got, fallbacks = _compiled_warnings(OPS[op], x)
    assert_equal(got, expected)  # 8-bit sums wrap (computed in int32, narrowed), never saturate
    assert not fallbacks


@pytest.mark.parametrize("form", sorted(MATMULS))
@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8, torch.int8], ids=str)
def test_integer_matmuls_compiled_are_exact_and_wrap_as_cpu(form, dtype):
    # TensorE computes in fp32: past 2**24 or a wrap, the compiler refuses and the matmul runs on CPU
    x = torch.tensor(EDGES[dtype], dtype=dtype).reshape(2, 4)
    got, fallbacks = _compiled_warnings(MATMULS[form], x)
    assert_equal(got, MATMULS[form](x))
    assert fallbacks and "compile.inexact_integer" in str(fallbacks[0].message)


@pytest.mark.parametrize("name", sorted(MATMUL_REPRODUCERS))
def test_integer_matmul_reproducers_compiled(name):
    fn, values, dtype = MATMUL_REPRODUCERS[name]
    x = torch.tensor(values, dtype=dtype)
    assert_equal(_compiled(fn, x), fn(x))


def test_small_integer_matmuls_stay_compiled():
    # int8 values widened to int32: every sum is exact in fp32 and fits, so TensorE computes it
    fn = lambda x: x.int() @ x.int().t()  # noqa: E731
    x = torch.tensor([[-128, 127, 3], [5, -7, 127]], dtype=torch.int8)
    got, fallbacks = _compiled_warnings(fn, x)
    assert_equal(got, fn(x))
    assert not fallbacks


def test_integer_division_by_zero_raises_as_cpu_does():
    # the compiled graph would return a value for x / 0: the compiler refuses a divisor that may be
    # zero, and the op runs on CPU, which raises. In a process of its own: the failed CPU-fallback
    # task's output memory stays invalid for later launches that reuse it (see BOARD, 13.4).
    code = """
        import pytest, torch, torch_neuronx
        for dtype in (torch.uint8, torch.int32, torch.int64):
            x = torch.tensor([0, 3, 7], dtype=dtype)
            for fn in (lambda a: torch.div(a, a, rounding_mode="trunc"), lambda a: a // a, lambda a: a % a,
                       lambda a: torch.fmod(a, a)):
                with pytest.raises(RuntimeError, match="ZeroDivisionError"):
                    fn(x)
                torch._dynamo.reset()
                with pytest.raises(Exception, match="ZeroDivisionError"):
                    torch.compile(fn, backend="neuron")(x.to("neuron")).cpu()
        print("ok")
    """
    assert run_python(code, timeout=900).stdout.strip().endswith("ok")


def test_integer_division_by_a_nonzero_number_stays_compiled():
    x = torch.tensor([-7, 0, 9, 100, -32768, 32767], dtype=torch.int16)
    for fn in (lambda a: torch.fmod(a, -3), lambda a: torch.div(a, 2, rounding_mode="trunc")):
        got, fallbacks = _compiled_warnings(fn, x)
        assert_equal(got, fn(x))
        assert not fallbacks


def test_negative_integer_powers_match_cpu():
    x = torch.tensor([1, 2, -3, -1, -1, 0], dtype=torch.int32)
    with pytest.raises(RuntimeError, match="negative integer powers"):
        x ** -1
    with pytest.raises(Exception, match="negative integer powers"):  # CPU's error, from the CPU kernel
        _compiled(lambda a: a ** -1, x).cpu()
    e = torch.tensor([2, -1, 0, -3, -2, 3], dtype=torch.int32)
    assert_equal(_compiled(lambda a, b: a ** b, x, e), x ** e)  # 1 / x**n rounded toward zero
    assert_equal(_compiled(lambda a: a ** 2, x), x ** 2)


def test_remainder_compiled_matches_cpu_bit_for_bit():
    x = torch.full((5, 7), 0.125)
    x[1] = torch.randn(7) * 10

    def f(a):
        return torch.remainder(a, 1.5), a % -0.75, torch.fmod(a, 0.1), a // 0.3

    for got, want in zip(_compiled(f, x), f(x)):
        assert_equal(got.view(torch.int32), want.view(torch.int32))


@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_float_to_integer_conversions_wrap_as_cpu_compiled(src):
    """CPU truncates to int32 (int64 for int64; NaN and out-of-range values: its minimum) and wraps
    narrower integers: -1.0 -> 255 as uint8, 300.0 -> 44 and 1e10 -> 0; the engines' writes saturate."""
    x = torch.tensor([-1.0, -1.5, -200.7, -300.0, 255.9, 256.0, 300.0, 2.5, -2.5, 1e10, -1e10, 3e9,
                      float("nan"), float("inf"), float("-inf")]).to(src)
    for dst in (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64):
        assert_equal(_compiled(lambda t, dst=dst: t.to(dst), x), x.to(dst))


@pytest.mark.parametrize(("values", "src", "dst"), [
    ([300, -129, 255, 128, 2**31 - 1, -(2**31)], torch.int32, torch.int8),
    ([300, -129, -1], torch.int32, torch.uint8),
    ([70000, -40000], torch.int32, torch.int16),
    ([2**31, 2**32 + 5, -(2**31) - 1, 2**40 + 7], torch.int64, torch.int32),
    ([-1, 300, 2**40], torch.int64, torch.uint8),
], ids=str)
def test_integer_narrowing_wraps_as_cpu_compiled(values, src, dst):
    x = torch.tensor(values, dtype=src)
    assert_equal(_compiled(lambda t: t.to(dst), x), x.to(dst))
    assert_equal(x.to("neuron").to(dst), x.to(dst))
