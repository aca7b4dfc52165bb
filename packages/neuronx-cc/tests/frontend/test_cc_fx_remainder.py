"""remainder, fmod, floor division and truncation through the FX frontend: bit for bit what CPU
computes for fp32 (tensor and number operands, negative divisors, signed zeros, zero divisors),
on both executors. NaNs compare as NaN: CPU's own NaN bits depend on its code path (a scalar or
a vectorized loop), so only their positions are checked."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuronxcc.compiler import compile_graph  # noqa: E402
from neuronxcc.compiler.testing import run_exact, run_fast  # noqa: E402
from neuronxcc.frontend import from_fx  # noqa: E402
from neuronxcc.frontend.fx import decompositions  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

g = torch.Generator().manual_seed(0)
X = torch.randn(5, 7, generator=g) * 10
X[0, :6] = torch.tensor([0.125, -0.125, 0.0, -0.0, 3.0, -3.0])
Y = torch.randn(5, 7, generator=g) * 3
Y[1, :5] = torch.tensor([1.5, -1.5, 0.1, -0.1, 0.0])
NUMBERS = [1.5, -1.5, 0.75, -0.75, 0.1, 3, -3, 1e-3]
OPS = {
    "remainder": torch.remainder, "mod": lambda a, b: a % b, "fmod": torch.fmod, "floordiv": lambda a, b: a // b,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"), "floor_divide": torch.floor_divide,
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
}


def _bits(t: torch.Tensor) -> np.ndarray:
    a = t.numpy().astype(np.float32)
    return np.where(np.isnan(a), np.float32(np.nan), a).view(np.uint32)  # one NaN pattern


def _run(fn, *args) -> list[torch.Tensor]:
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*args)
    graph = from_fx(gm, list(args))
    inputs = {v.name: a.numpy() for v, a in zip(graph.inputs, args)}
    program = compile_graph(graph)
    return [run_exact(program, inputs), run_fast(graph, inputs)]


def _agree(fn, *args):
    """``fn`` (tensors -> a list of tensors) on both executors == on CPU, bit for bit."""
    expected = [_bits(t) for t in fn(*args)]
    for results in _run(fn, *args):
        for got, want in zip(results.values(), expected):
            np.testing.assert_array_equal(_bits(torch.from_numpy(np.asarray(got))), want)


@pytest.mark.parametrize("op", sorted(OPS))
def test_fp32_by_a_number_matches_cpu_bit_for_bit(op):
    _agree(lambda a: [OPS[op](a, number) for number in NUMBERS], X)


@pytest.mark.parametrize("op", sorted(OPS))
def test_fp32_by_a_tensor_matches_cpu_bit_for_bit(op):
    _agree(lambda a, b: [OPS[op](a, b)], X, Y)


def test_the_issue_reproducer_is_exact():
    x = torch.full((5, 7), 0.125)
    _agree(lambda a: [torch.remainder(a, 1.5)], x)  # was 1.625 everywhere in some processes
    _agree(lambda a: [a % 0.75], X)


def test_a_number_divided_by_a_tensor():
    _agree(lambda b: [torch.remainder(2.5, b)], Y)


def test_trunc_keeps_negative_zero():
    x = torch.tensor([-0.0, -0.3, 0.3, -2.5, 2.5, float("inf"), -float("inf"), 8388609.0])
    _agree(lambda a: [torch.trunc(a), torch.ceil(a), torch.floor(a), torch.round(a)], x)


def test_integer_remainder_and_floor_division_are_exact_for_small_values():
    xi = torch.randint(-1000, 1000, (5, 7), generator=g).to(torch.int16)
    yi = (torch.randint(1, 50, (5, 7), generator=g) * torch.where(torch.rand(5, 7, generator=g) < 0.5, -1, 1)).to(torch.int16)

    def fn(a, b):  # int16 values widened: small enough for the fp32 datapath; divisors off zero
        a, p = a.int(), b.int().abs() + 1
        return [a % p, a % -p, torch.fmod(a, p), torch.fmod(a, -p), a // p, a // -p, a % -7, a // 3]

    expected = fn(xi, yi)
    for results in _run(fn, xi, yi):
        for got, want in zip(results.values(), expected):
            np.testing.assert_array_equal(np.asarray(got), want.numpy())


def test_a_constant_float_compared_with_an_int_number():
    # torch-mlir folds lt/gt of a constant float tensor and an int number from uninitialized
    # memory (1.5 < 0 came out True); the frontend compares with the number as a float
    def fn(a):
        c = torch.scalar_tensor(1.5)
        return [torch.where(c < 0, a + c, a - c), torch.where(torch.scalar_tensor(-0.5) > 0, a, -a),
                torch.where(c >= 2, a, a * 2)]

    _agree(fn, X)
