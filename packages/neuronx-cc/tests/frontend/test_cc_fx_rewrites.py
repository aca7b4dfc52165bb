"""The FX rewrites made before torch-mlir: graphs it ran away, aborted or segfaulted on lower to
the values torch computes (or are refused with a clear error), through ``from_fx``."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
from neuron_sim import IndexOutOfBoundsError  # noqa: E402
from neuronxcc.frontend import UnsupportedOp, decompositions, from_fx, run_graph  # noqa: E402
from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

END = 2**63 - 1  # how PyTorch writes "to the end" of a dim


def lowered(fn, *inputs):
    """``fn``'s graph (traced as eager mode traces an op) evaluated on ``inputs``."""
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(*inputs)
    return [torch.from_numpy(np.asarray(r)) for r in run_graph(from_fx(gm), *inputs)]


@pytest.mark.parametrize("shape, dim, start, end, step", [
    ((2, 16), 1, 8, END, 1),      # the backward of q[..., 8:]
    ((3, 5, 7), -1, 1, END, 2),   # strided, odd sizes
    ((4, 6), 0, -3, END, 1),      # counted from the end
    ((4, 6), 1, -100, 2, 1),      # a start before the dim is clamped to 0
    ((5,), 0, 2, 100, 1),         # an end past the dim is clamped to it
    ((1, 9), 1, 0, -1, 3),
])
def test_slice_scatter_to_the_end_of_a_dim(shape, dim, start, end, step):
    x = torch.randn(shape)
    src_shape = list(shape)
    src_shape[dim] = len(range(*slice(start, end, step).indices(shape[dim])))
    src = torch.randn(src_shape)

    def fn(x, src):
        return torch.ops.aten.slice_scatter(x, src, dim, start, end, step)

    (got,) = lowered(fn, x, src)
    assert torch.equal(got, fn(x, src))


def test_slice_scatter_of_an_empty_slice_is_a_copy():
    x, src = torch.randn(3, 4), torch.randn(3, 0)

    def fn(x, src):
        return torch.ops.aten.slice_scatter(x, src, 1, 7, END)

    (got,) = lowered(fn, x, src)
    assert torch.equal(got, x)


@pytest.mark.parametrize("shape, dim, start, end", [
    ((2, 5), 1, 1, END),          # Transformers' shift_tokens_right: labels[:, 1:] = labels[:, :-1]
    ((2, 5), 1, 0, 4),            # the other end
    ((3, 7, 2), 1, 2, 5),         # the middle: both ends kept
    ((4, 3), 0, 0, END),          # the whole dim: src itself
    ((1, 130), -1, 129, END),     # size-1 dims, past a partition
])
def test_a_contiguous_slice_scatter_is_a_concatenation(shape, dim, start, end):
    """No scatter, so integers move exactly: an int64 past 2**24 (a scatter moves values through fp32)."""
    x = torch.randint(-2**62, 2**62, shape)
    src_shape = list(shape)
    src_shape[dim] = len(range(*slice(start, end).indices(shape[dim])))
    src = torch.randint(-2**62, 2**62, src_shape)

    def fn(x, src):
        return torch.ops.aten.slice_scatter(x, src, dim, start, end)

    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(x, src)
    graph = from_fx(gm)
    assert "scatter" not in {n.op for n in graph.nodes}, [n.op for n in graph.nodes]
    (got,) = run_graph(graph, x, src)
    assert torch.equal(torch.from_numpy(np.asarray(got)), fn(x, src))


def test_slice_backward_of_a_rotary_half():
    """rotate_half's backward: two slices, one at a non-zero offset to the end, scattered back."""
    x = torch.randn(2, 3, 16, requires_grad=True)
    g = torch.randn(2, 3, 16)
    torch.cat((-x[..., 8:], x[..., :8]), dim=-1).backward(g)

    def grad(g):
        return (torch.ops.aten.slice_backward(g[..., 8:], [2, 3, 16], 2, 0, 8, 1)
                + torch.ops.aten.slice_backward(-g[..., :8], [2, 3, 16], 2, 8, END, 1))

    (got,) = lowered(grad, g)
    assert torch.equal(got, x.grad)


@pytest.mark.parametrize("op", ["clamp_min", "clamp_max", "clamp"])
@pytest.mark.parametrize("self_shape, bound_shape", [((1,), (2,)), ((), (3, 2)), ((3, 1), (1, 4)), ((2, 3), (3,))])
def test_clamp_whose_bounds_broadcast_self(op, self_shape, bound_shape):
    x, b = torch.randn(self_shape), torch.randn(bound_shape)

    def fn(x, b):
        if op == "clamp":
            return torch.clamp(x, b - 0.5, b + 0.5)
        return getattr(torch, op)(x, b)

    (got,) = lowered(fn, x, b)
    expected = fn(x, b)
    assert got.shape == expected.shape and torch.equal(got, expected)


def test_clamp_of_integers_by_float_bounds_promotes():
    x, b = torch.tensor([1, -3, 7], dtype=torch.int32), torch.tensor([0.5, -2.5, 9.25])
    (got,) = lowered(lambda x, b: torch.clamp_min(x, b), x, b)
    assert got.dtype == torch.float32 and torch.equal(got, torch.clamp_min(x, b))


@pytest.mark.parametrize("fn", [lambda x: torch.clamp(x, min=0.5), lambda x: torch.clamp(x, -1.5, 2.25),
                                lambda x: torch.clamp_max(x, 0.25), lambda x: torch.clamp(x, max=True)])
def test_clamp_of_integers_by_float_numbers_promotes(fn):
    x = torch.tensor([0, 1, -3, 7])
    (got,) = lowered(fn, x)
    assert got.dtype == fn(x).dtype and torch.equal(got, fn(x))


@pytest.mark.parametrize("fn", [torch.fmax, torch.fmin], ids=["fmax", "fmin"])
@pytest.mark.parametrize("a, b", [
    ([[1.0, float("nan"), 3.0], [4.0, 5.0, float("nan")]], [2.0, 2.0, float("nan")]),  # the second broadcasts
    ([2.0, float("nan"), 0.0], [[1.0, 3.0, float("nan")], [4.0, 5.0, 6.0]]),  # the first broadcasts
    ([[1.0, -7.0, 3.0]], [[2.5], [float("nan")]]),  # both broadcast
], ids=["second", "first", "both"])
def test_fmax_fmin_of_operands_that_broadcast(fn, a, b):
    """fuzz-45: fmax of a [2, 3] and a [3] failed to lower ('chlo.broadcast_compare' op inferred
    type(s) 'tensor<3xi1>' are incompatible with return type(s) 'tensor<2x3xi1>')."""
    a, b = torch.tensor(a), torch.tensor(b)
    (got,) = lowered(fn, a, b)
    want = fn(a, b)
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~got.isnan()], want[~want.isnan()]), (got, want)


def test_index_put_without_indices_is_refused():
    """CPU rejects every such call; torch-mlir segfaulted on it."""
    with pytest.raises(UnsupportedOp, match="empty index list"):
        lowered(lambda x, v: torch.ops.aten.index_put(x, [], v, True), torch.rand([]), torch.tensor([1.0]))


fill = torch.ops.aten.fill.Scalar  # functional, as functionalized graphs hold it


@pytest.mark.parametrize("make", [
    lambda x: fill(torch.empty_strided((2, 3), (1, 2)), 2.0) + x,
    lambda x: fill(x.new_empty((2, 3)), 1.5) * x,
    lambda x: fill(torch.empty_like(x, dtype=torch.bool), True) & (x > 0),
])
def test_uninitialized_factories_lower(make):
    x = torch.randn(2, 3)
    (got,) = lowered(make, x)
    assert torch.equal(got, make(x))


def test_an_uninitialized_result_has_its_shape_and_dtype():
    got = lowered(lambda x: (torch.empty(4, 1, dtype=torch.int32), x + 1), torch.randn(3))
    assert got[0].shape == (4, 1) and got[0].dtype == torch.int32


@pytest.mark.parametrize("fn", [lambda x: torch.sum(x, 0), lambda x: torch.amax(x, -1, keepdim=True),
                                lambda x: torch.max(x, 0)[1]])
def test_dim_op_over_a_0dim_tensor(fn):
    x = torch.tensor(2.5)
    (got,) = lowered(fn, x)
    assert torch.equal(got, fn(x))


def test_dim_ops_over_0dim_operands():
    x, i, s = torch.tensor(1.5), torch.tensor(0), torch.tensor(2.0)
    for fn, inputs in [(lambda x, i, s: x.scatter_add(0, i, s), (x, i, s)), (lambda x, i: x.gather(-1, i), (x, i))]:
        (got,) = lowered(fn, *inputs)
        assert got.shape == () and torch.equal(got, fn(*inputs))


@pytest.mark.parametrize("dim, index", [(-1, [0]), (0, 0)])
def test_index_select_of_a_0dim_tensor(dim, index):
    """fuzz-35: its 1-d index was "an operand of another rank" and refused."""
    x, i = torch.tensor(-3.25), torch.tensor(index)
    (got,) = lowered(lambda x, i: x.index_select(dim, i), x, i)
    assert got.shape == () and torch.equal(got, x.index_select(dim, i))


@pytest.mark.parametrize("index", [[1], [-1]])
def test_index_select_of_a_0dim_tensor_checks_its_index(index):
    x, i = torch.tensor(-3.25), torch.tensor(index)
    with pytest.raises(IndexError):
        x.index_select(0, i)  # CPU
    with pytest.raises(IndexOutOfBoundsError, match=rf"index {index[0]} is out of bounds for a dimension of size 1"):
        lowered(lambda x, i: x.index_select(0, i), x, i)


def test_index_select_of_a_0dim_tensor_by_a_matrix_is_refused():
    """CPU raises (the index must be a vector); the meta kernel accepts it."""
    with pytest.raises(UnsupportedOp, match="a dim argument over a 0-dim tensor"):
        lowered(lambda x, i: x.index_select(0, i), torch.tensor(1.0), torch.tensor([[0]]))


@pytest.mark.parametrize("k", [0, 1])
def test_topk_of_a_0dim_tensor_returns_its_value(k):
    """CPU returns the 0-dim value (and index 0) for k = 0 as for k = 1."""
    x = torch.tensor(255, dtype=torch.uint8)
    got = lowered(lambda x: x.topk(k, 0), x)
    assert [(g.shape, g.item()) for g in got] == [(e.shape, e.item()) for e in x.topk(k, 0)]


BOOLS = [torch.zeros(3, 5, dtype=torch.bool), torch.ones(3, 5, dtype=torch.bool), torch.rand(3, 5) > 0.7]


@pytest.mark.parametrize("x", BOOLS, ids=["false", "true", "mixed"])
@pytest.mark.parametrize("fn", [torch.amax, torch.amin, torch.max, torch.min, lambda x: x.amax(1),
                                lambda x: x.amin(0, keepdim=True), lambda x: torch.max(x, 1), lambda x: torch.min(x, 0, True)],
                         ids=["amax", "amin", "max", "min", "amax_dim", "amin_keepdim", "max_dim", "min_dim"])
def test_bool_max_and_min(fn, x):
    """torch-mlir's i1 reduction started max from true (signed min of i1) and min from false."""
    expected = fn(x)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    got = lowered(fn, x)
    assert [(g.dtype, g.shape) for g in got] == [(e.dtype, e.shape) for e in expected]
    assert all(torch.equal(g, e) for g, e in zip(got, expected))


def test_abs_of_unsigned_is_the_identity_and_of_bool_refused():
    x = torch.tensor([0, 1, 200, 255], dtype=torch.uint8)
    (got,) = lowered(torch.abs, x)
    assert got.dtype == torch.uint8 and torch.equal(got, x)
    with pytest.raises(UnsupportedOp, match="abs of a bool tensor"):
        lowered(torch.abs, torch.tensor([True, False]))


@pytest.mark.parametrize("dtype", [torch.int8, torch.uint8])
@pytest.mark.parametrize("x, dim", [(torch.tensor([7, 127, 100, -3, 255]), 0),
                                    (torch.tensor([[7, 255, 3], [100, 200, 90]], dtype=torch.uint8), 1),
                                    (torch.tensor([[1.75, 90.5], [-2.5, 60.0]]), 0)])
def test_cumsum_to_8_bit_integers_wraps(x, dim, dtype):
    """torch-mlir's pipeline segfaulted on it; CPU's sums wrap modulo 2**8."""
    (got,) = lowered(lambda x: x.cumsum(dim, dtype=dtype), x)
    assert got.dtype == dtype and torch.equal(got, x.cumsum(dim, dtype=dtype))


@pytest.mark.parametrize("fn, inputs", [
    (lambda x, i: x[i], (torch.arange(5), torch.tensor([-5, -3, 4, -1]))),
    (lambda x, i: x[:, i], (torch.arange(12).view(3, 4), torch.tensor([[-1, 0], [2, -4]]))),
    (lambda x, i, j: x[i, j], (torch.randn(3, 7), torch.tensor([-3, 2]), torch.tensor([-7, 6]))),
    (lambda x, i, v: x.index_put((i,), v), (torch.zeros(5), torch.tensor([-1, 1]), torch.tensor([3., 4.]))),
    (lambda x, i, v: x.index_put((i,), v, True), (torch.zeros(5), torch.tensor([-1, 4, -5]), torch.tensor([3., 4., 1.]))),
], ids=["index", "index_dim1", "index_two_dims", "index_put", "index_put_accumulate"])
def test_negative_advanced_indices_count_from_the_end(fn, inputs):
    (got,) = lowered(fn, *inputs)
    assert torch.equal(got, fn(*inputs))


SIZE_1_DIM_INDEXING = [
    (lambda x, i: x.index_select(0, i), torch.arange(3.).view(1, 3)),
    (lambda x, i: x.index_select(-1, i), torch.arange(6, dtype=torch.int32).view(2, 3, 1)),
    (lambda x, i: x.index_select(1, i.view(())), torch.tensor([[[2**40 + 1]], [[-5]]])),  # a 0-d index
    (lambda x, i: x.index_select(0, i), torch.tensor([7.], dtype=torch.float16)),
    (lambda x, i: torch.take(x, i), torch.tensor([[7.]])),
    (lambda x, i: torch.nn.functional.embedding(i, x), torch.arange(129.).view(1, 129)),
]
SIZE_1_DIM_IDS = ["index_select", "index_select_last_dim", "index_select_0d_index", "index_select_1d", "take",
                  "embedding"]


@pytest.mark.parametrize("fn, x", SIZE_1_DIM_INDEXING, ids=SIZE_1_DIM_IDS)
def test_an_index_into_a_size_1_dim_reads_its_row(fn, x):
    i = torch.tensor([0])
    (got,) = lowered(fn, x, i)
    assert torch.equal(got, fn(x, i))


@pytest.mark.parametrize("fn, x", SIZE_1_DIM_INDEXING, ids=SIZE_1_DIM_IDS)
@pytest.mark.parametrize("index", [1, -2, 2**40])
def test_an_index_past_a_size_1_dim_raises(fn, x, index):
    """torch-mlir folded ``index_select`` over a size-1 dim into its operand: any index read row 0."""
    i = torch.tensor([index])
    with pytest.raises((IndexError, RuntimeError)):  # CPU's strided kernel raises RuntimeError
        fn(x, i)
    with pytest.raises(IndexOutOfBoundsError, match=r"index -?\d+ is out of bounds for a dimension of size 1"):
        lowered(fn, x, i)


@pytest.mark.parametrize("fn, x", [
    (lambda x: torch.fmod(x, -2), torch.empty(7, 0, 1, dtype=torch.int8)),
    (lambda x: x.repeat(1, 0, 2, 3), torch.ones(2, 3, 4)),
    (lambda x: x.gather(1, torch.zeros(2, 0, dtype=torch.long)), torch.empty(2, 0)),
    (lambda x: x[:0] * 2 + 1, torch.randn(3, 5)),
], ids=["fmod", "repeat", "gather", "slice"])
def test_results_without_elements_have_their_shape_and_dtype(fn, x):
    (got,) = lowered(fn, x)
    expected = fn(x)
    assert (got.shape, got.dtype) == (expected.shape, expected.dtype)


_EMPTY = torch.zeros(0, 1, dtype=torch.long)


@pytest.mark.parametrize("fn", [
    lambda x, i: x.scatter_reduce(0, i, x, "amax", include_self=False),
    lambda x, i: x.scatter_reduce(0, i, x, "mean"),
    lambda x, i: x.scatter_add(0, i, x),
    lambda x, i: x.scatter(0, i, 5.0),
    lambda x, i: x.index_add(0, i.flatten(), x[:0], alpha=3),
    lambda x, i: x.index_fill(0, i.flatten(), 2.0),
    lambda x, i: x.index_copy(0, i.flatten(), x[:0]),
    lambda x, i: x.scatter_add(0, i, x) * 2,
], ids=["scatter_reduce", "scatter_reduce_mean", "scatter_add", "scatter_value", "index_add", "index_fill",
        "index_copy", "then_an_op"])
@pytest.mark.parametrize("index", ["input", "constant"])
def test_a_scatter_with_an_empty_index_writes_nothing(fn, index):
    """torch-mlir has no lowering of scatter_reduce and cannot legalize the empty index constant."""
    x = torch.tensor([[1.0], [-2.0], [3.5]])
    if index == "input":
        (got,) = lowered(fn, x, _EMPTY)
    else:
        (got,) = lowered(lambda x: fn(x, torch.zeros(0, 1, dtype=torch.long)), x)
    expected = fn(x, _EMPTY)
    assert got.dtype == expected.dtype and torch.equal(got, expected)


def test_gather_over_a_size_0_dim_is_refused():
    """Every index is out of bounds (CPU raises); building the gather aborted the process."""
    with pytest.raises(UnsupportedOp, match="dimension 1 of size 0 .* every index is out of bounds"):
        lowered(lambda x, i: x.gather(1, i), torch.empty(2, 0), torch.zeros(2, 1, dtype=torch.long))


@pytest.mark.parametrize("x, divisor", [(torch.tensor([1.0, -2.5, 0.0]), 0.0), (torch.tensor([5.5, -7.0]), 2.0),
                                        (torch.tensor([7, -7, 3], dtype=torch.int8), -2)])
def test_fmod_by_a_number(x, divisor):
    """torch-mlir left fmod.Scalar's number as an unlowered torch.constant.float / int."""
    (got,) = lowered(lambda x: torch.fmod(x, divisor), x)
    expected = torch.fmod(x, divisor)
    assert got.dtype == expected.dtype and torch.equal(got.nan_to_num(7.0), expected.nan_to_num(7.0))


def test_topk_of_nothing():
    x = torch.randn(2, 5)
    got = lowered(lambda x: x.topk(0, 1), x)
    assert [(g.shape, g.dtype) for g in got] == [(e.shape, e.dtype) for e in x.topk(0, 1)]


_COMPARES = [torch.eq, torch.ne, torch.lt, torch.le, torch.gt, torch.ge]


@pytest.mark.parametrize("compare", _COMPARES)
@pytest.mark.parametrize("number", [-1, 2, 256, 0, 1, 0.5, -0.5, True])
def test_compare_of_bools_with_a_number_in_the_promoted_dtype(compare, number):
    """``bool_x != -1`` compares in int64 (-1 is not True); torch-mlir converted the number to bool."""
    x = torch.tensor([False, True, True, False])
    (got,) = lowered(lambda x: compare(x, number), x)
    assert torch.equal(got, compare(x, number))


@pytest.mark.parametrize("compare", _COMPARES + [torch.maximum, torch.minimum])
@pytest.mark.parametrize("a, b", [
    (torch.tensor([False, True]), torch.tensor([-1, 2])),                                 # bool vs int64
    (torch.tensor([False, True]), torch.tensor([255, 1], dtype=torch.uint8)),
    (torch.tensor([255, 1], dtype=torch.uint8), torch.tensor([-1, 1], dtype=torch.int8)),  # int16 on CPU
    (torch.tensor([-24, 1], dtype=torch.int8), torch.tensor(1000)),                       # a 0-d operand: int8 wins
    (torch.tensor([False, True]), torch.tensor(-1)),
    (torch.tensor([1, 2], dtype=torch.int32), torch.tensor([1.5, 2.0], dtype=torch.float16)),
])
def test_compare_of_tensors_in_the_promoted_dtype(compare, a, b):
    for x, y in ((a, b), (b, a)):
        (got,) = lowered(compare, x, y)
        assert torch.equal(got, compare(x, y)) and got.dtype == compare(x, y).dtype


@pytest.mark.parametrize("compare", _COMPARES)
@pytest.mark.parametrize("x, number", [
    (torch.tensor([-24, 1], dtype=torch.int8), 1000),   # the number wraps to the tensor's dtype, as on CPU
    (torch.tensor([255, 1], dtype=torch.uint8), -1),
    (torch.tensor([2, 3], dtype=torch.int32), 2.5),
])
def test_compare_with_a_number_of_the_tensors_category(compare, x, number):
    (got,) = lowered(lambda x: compare(x, number), x)
    assert torch.equal(got, compare(x, number))


_NUMPY = {torch.float16: np.float16, torch.bfloat16: __import__("ml_dtypes").bfloat16}
_HALF_OPS = {
    "gelu": lambda x: torch.nn.functional.gelu(x),
    "gelu_tanh": lambda x: torch.nn.functional.gelu(x, approximate="tanh"),
    "silu": lambda x: torch.nn.functional.silu(x),
    "asinh": torch.asinh,
    "sinh": torch.sinh,
    "log2": lambda x: torch.log2(x.abs() + 0.5),
    "softmax": lambda x: torch.softmax(x, -1),
    "mean": lambda x: x.mean(-1),
    "var": lambda x: x.var(-1),
    "layer_norm": lambda x: torch.nn.functional.layer_norm(x, (x.shape[-1],)),
    "tanh": torch.tanh,
    "softplus": lambda x: torch.nn.functional.softplus(x),
}


def _within_one_ulp(got, want):
    """Both sides compute in fp32 (a few fp32 ulp apart) and round once: one 16-bit ulp at most."""
    spacing = torch.finfo(want.dtype).eps * torch.maximum(want.float().abs(), torch.tensor(torch.finfo(want.dtype).tiny))
    return bool(((got.float() - want.float()).abs() <= spacing * 1.01).all())


def _lowered_16_bit(fn, x):
    """``lowered`` for one 16-bit float input and result (numpy has no bfloat16: moved as bits)."""
    gm = make_fx(fn, decomposition_table=decompositions(), tracing_mode="fake")(x)
    (out,) = run_graph(from_fx(gm), x.float().numpy().astype(np.float32).astype(_NUMPY[x.dtype]))
    return torch.from_numpy(np.asarray(out).view(np.int16).copy()).view(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(_HALF_OPS))
def test_16_bit_float_ops_compute_in_fp32_and_round_once(name, dtype):
    """fuzz-20: gelu(-4.0) of float16 was -0.0 (every step of torch-mlir's expansion rounded to
    float16); CPU computes in fp32 and rounds once: -1.267e-4."""
    fn = _HALF_OPS[name]
    x = torch.tensor([[-4.0, -2.0, -1.0, -0.3, 0.0, 0.7, 1.3, 2.5, 5.0, 9.0]], dtype=dtype)
    got = _lowered_16_bit(fn, x)
    assert _within_one_ulp(got, fn(x)), (got, fn(x))


_VARIANCES = {
    "std_dim": lambda x: x.std(-1),
    "var_dim": lambda x: x.var(-1),
    "std_all": lambda x: x.std(),
    "var_keepdim_c0": lambda x: x.var(0, keepdim=True, correction=0),
    "var_mean": lambda x: torch.var_mean(x, -1)[0],
    "var_mean_mean": lambda x: torch.var_mean(x, -1)[1],
    "std_mean": lambda x: torch.std_mean(x, (0, 1))[0],
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", sorted(_VARIANCES))
def test_16_bit_variances_do_not_overflow_where_cpu_does_not(name, dtype):
    """fuzz-29: bfloat16 [1e38] * 4 had std inf (its fp32 sum overflowed), CPU 0.0 (Welford in
    float64); [1e38, -1e38] has a finite std although its variance overflows fp32. Values near the
    dtype's largest, ordinary values, a row of zeros: within one 16-bit rounding of CPU's."""
    big = torch.finfo(dtype).max / 3.5
    x = torch.tensor([[big, big, big, big], [big, -big, big, 0.5], [1.5, -2.0, 3.25, 0.0], [0.0, 0.0, 0.0, 0.0]],
                     dtype=dtype)
    fn = _VARIANCES[name]
    got = _lowered_16_bit(fn, x)
    want = fn(x)
    assert bool((want.isfinite() == got.isfinite()).all()), (got, want)
    assert _within_one_ulp(got[want.isfinite()], want[want.isfinite()]), (got, want)


def test_ops_that_round_once_lower_to_one_graph_op():
    """What ROUNDS_ONCE promises: each of its pointwise ops on float16 is one computing graph op."""
    from neuronxcc.frontend.fx_rewrites import ROUNDS_ONCE

    aten = torch.ops.aten
    x = torch.rand(3, 5, dtype=torch.float16) + 0.5
    moving = {"convert", "broadcast_in_dim", "constant", "reshape", "transpose", "copy", "select", "compare"}
    for name in sorted(ROUNDS_ONCE):
        op = getattr(aten, name).default if hasattr(getattr(aten, name), "default") else None
        if op is None or torch.Tag.pointwise not in op.tags or name in ("clamp", "where", "masked_fill", "clone"):
            continue  # clamp is max then min, where / masked_fill / clone move data: exact either way
        required = [a for a in op._schema.arguments if not a.kwarg_only and not a.has_default_value()]
        if any(a.type.kind() != "TensorType" for a in required):
            continue  # a Scalar argument (clamp_max's bound)
        arity = len(required)
        gm = make_fx(lambda *t, op=op: op(*t), decomposition_table=decompositions(), tracing_mode="fake")(*[x] * arity)
        computing = [n.op for n in from_fx(gm, [x] * arity).nodes if n.op not in moving]
        assert len(computing) <= 1, (name, computing)


_BY_A_NUMBER = {
    "mul": lambda x, s: x * s,
    "div": lambda x, s: x / s,
    "rdiv": lambda x, s: s / x,  # reciprocal(x) * s
    "add": lambda x, s: x + s,  # CPU's add and sub round the number to the 16-bit dtype first
    "rsub": lambda x, s: s - x,
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("number", [-3.4028234663852886e38, 0.1, 1 / 3, 3.3, 70001.0, 257, 2.0])
@pytest.mark.parametrize("name", sorted(_BY_A_NUMBER))
def test_16_bit_floats_by_a_number_as_cpu(name, number, dtype):
    """fuzz-50: bfloat16 [0.5, -0.0, -6.15625] * -3.4028e38 was [-inf, nan, inf] (the number
    rounded to bfloat16 first), CPU [-1.7014e38, 0.0, inf]; x * 0.1 was x times 0.10009765625.
    Bit for bit as CPU."""
    fn = _BY_A_NUMBER[name]
    x = (torch.linspace(-7, 7, 29) ** 3).to(dtype)
    x = torch.cat([x, torch.tensor([0.5, -0.0, -6.15625, 1e-3, 6e4], dtype=dtype)])
    try:
        want = fn(x, number)
    except RuntimeError:  # the number does not fit the dtype where CPU's kernel converts it
        pytest.skip("CPU refuses this number for this dtype")
    got = _lowered_16_bit(lambda t: fn(t, number), x)
    assert torch.equal(got.view(torch.int16), want.view(torch.int16)) or torch.equal(
        got.isnan(), want.isnan()) and torch.equal(got[~got.isnan()], want[~want.isnan()]), (got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("fn", [lambda x: x[0].prod(), lambda x: x[:, :2].prod(), lambda x: x.prod(0), lambda x: x.prod(-1, keepdim=True),
                                lambda x: x.prod(1), lambda x: x[0, :, 0].prod()],
                         ids=["all", "all_of_a_view", "dim0", "last_keepdim", "dim1", "fuzz_row"])
def test_16_bit_prod_rounds_each_product_as_cpu(fn, dtype):
    """fuzz-48: float16 [60800, 11088, 18864, 0, 60800].prod() was 0 (the product in fp32, rounded
    once); CPU's kernel rounds each product: 60800 * 11088 = inf, inf * 0 = NaN. Bit for bit (fewer
    than 64 elements: CPU reduces longer contiguous rows in vector lanes)."""
    torch.manual_seed(0)
    x = (torch.rand(3, 6, 5) * 0.5 + 0.75).to(dtype)
    x[0, :, 0] = torch.tensor([60800, 11088, 18864, 0, 60800, 1.0], dtype=dtype)
    want = fn(x)
    got = _lowered_16_bit(fn, x)
    assert got.shape == want.shape
    assert torch.equal(got.isnan(), want.isnan()) and torch.equal(got[~got.isnan()], want[~want.isnan()]), (got, want)


_OUT_OF_RANGE = [-1.0, -1.5, -200.7, -300.0, 255.9, 256.0, 300.0, 2.5, -2.5, 0.5, 1e10, -1e10, 3e9, -2147483648.0,
                 float("nan"), float("inf"), float("-inf")]


@pytest.mark.parametrize("src", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("dst", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64], ids=str)
def test_float_to_integer_conversions_wrap_as_cpu(src, dst):
    """CPU truncates to int32 (int64 for int64; NaN and values out of range: its minimum) and wraps
    to narrower integers: -1.0 -> 255 as uint8, 300.0 -> 44, 1e10 -> 0; the engines saturate."""
    x = torch.tensor(_OUT_OF_RANGE).to(src)
    gm = make_fx(lambda t: t.to(dst), decomposition_table=decompositions(), tracing_mode="fake")(x)
    (got,) = run_graph(from_fx(gm), x.float().numpy().astype(_NUMPY.get(src, np.float32)))
    assert torch.equal(torch.from_numpy(np.asarray(got)), x.to(dst)), (np.asarray(got).tolist(), x.to(dst).tolist())


_SHIFTED = {"int8": [8, -8, 1, 127, -128], "uint8": [8, 248, 1, 127, 255], "int32": [8, -8, 1, 2**31 - 1, -(2**31)],
            "int64": [8, -8, 1, 2**40 + 3, -(2**62)]}


@pytest.mark.parametrize("dtype", sorted(_SHIFTED))
@pytest.mark.parametrize("k", [0, 2, 7, 8, 31, 33, 64, 70, -1])
def test_shifts_by_a_number(dtype, k):
    """fuzz-33: torch-mlir left ``x >> 2``'s number as an unlowered torch.constant.int. CPU shifts by
    a negative number or one of the dtype's width or more as by that width."""
    x = torch.tensor(_SHIFTED[dtype], dtype=getattr(torch, dtype))
    for fn in (lambda x: x >> k, lambda x: x << k, lambda x: torch.bitwise_right_shift(x, k),
               lambda x: torch.bitwise_left_shift(x, k)):
        (got,) = lowered(fn, x)
        assert got.dtype == fn(x).dtype and torch.equal(got, fn(x)), (got, fn(x))


@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int8, torch.int64], ids=str)
def test_isinf_of_integers_is_false(dtype):
    """fuzz-32: isinf of bool / uint8 went through stablehlo.abs, which refuses them."""
    x = torch.tensor([1, 0, 1, 0], dtype=dtype)
    (got,) = lowered(lambda x: x.isinf() | x.isposinf(), x)
    assert got.dtype == torch.bool and not got.any()


@pytest.mark.parametrize("shape, offset, d1, d2", [
    ((3, 2, 4), 0, 0, 2),     # fuzz-33's diagonal face
    ((4, 4), 1, 0, 1), ((4, 4), -3, 0, 1), ((4, 4), 9, 0, 1),  # past the matrix: empty
    ((2, 5, 3), -1, 2, 1),    # dims in reverse order
    ((1, 7), 0, -1, -2), ((5, 1, 6), 2, 0, -1), ((2, 3, 1, 130), -1, 3, 1),
])
def test_diagonal_of_a_computed_value(shape, offset, d1, d2):
    """torch-mlir has no lowering of ``diagonal`` (it left the dims as torch.constant.int)."""
    x = torch.randn(shape)

    def fn(x):
        return (-x).diagonal(offset, d1, d2)

    (got,) = lowered(fn, x)
    assert got.shape == fn(x).shape and torch.equal(got, fn(x))


def test_diag_trace_and_diagonal_copy_of_a_computed_value():
    x = torch.randn(5, 3)
    for fn in (lambda x: torch.diag(x * 2), lambda x: torch.diag(x * 2, -2), lambda x: torch.trace(x * 2),
               lambda x: torch.diagonal(x[:3] + 1).sum(), lambda x: torch.diagonal_copy(x + 1, 1)):
        (got,) = lowered(fn, x)
        assert torch.allclose(got, fn(x)), (got, fn(x))


@pytest.mark.parametrize("shape, dim, size, step", [
    ((3, 2, 9), 2, 2, 1),      # more windows than positions
    ((3, 2, 9), -1, 4, 3),     # a remainder left out
    ((10, 3), 0, 7, 1),        # more positions than windows
    ((4, 5), 1, 5, 2),         # one window
    ((6,), 0, 1, 1), ((2, 1, 3), 1, 1, 5),
])
def test_unfold_of_a_computed_value(shape, dim, size, step):
    x = torch.randn(shape)

    def fn(x):
        return (x * 2).unfold(dim, size, step)

    (got,) = lowered(fn, x)
    assert got.shape == fn(x).shape and torch.equal(got, fn(x))


@pytest.mark.parametrize("x, k", [
    (torch.tensor([1, 5, -7], dtype=torch.int32), 3),
    (torch.tensor([True, False]), True),
    (torch.tensor([True, False]), 3),  # promotes to int64
    (torch.tensor([1, 200], dtype=torch.uint8), 255),
], ids=["int32", "bool", "bool_by_an_int", "uint8"])
def test_xor_with_a_number(x, k):
    """fuzz-47: torch.compile of x ^ 3 raised NeuronCompileError (bitwise_xor.Scalar had no lowering)."""
    (got,) = lowered(lambda t: t ^ k, x)
    assert got.dtype == (x ^ k).dtype and torch.equal(got, x ^ k)


@pytest.mark.parametrize("fn", [lambda t: t.any(), lambda t: t.all(), lambda t: t.any(1), lambda t: t.all(0),
                                lambda t: t.any(1, keepdim=True)], ids=["any", "all", "any_dim", "all_dim", "keepdim"])
def test_any_all_of_uint8(fn):
    """fuzz-46: torch.compile of any/all of uint8 raised NeuronCompileError; CPU's result is uint8."""
    x = torch.tensor([[0, 3, 0], [0, 0, 0], [255, 1, 2]], dtype=torch.uint8)
    (got,) = lowered(fn, x)
    assert got.dtype == fn(x).dtype and torch.equal(got, fn(x))


def test_an_op_without_a_lowering_is_named_not_its_number():
    """torch-mlir fails an unlowered op that is not explicitly marked illegal on its first operand
    ('torch.constant.int'); the error names the op."""
    x = torch.randn(3, 4)
    with pytest.raises(UnsupportedOp, match=r"torch\.aten\.kthvalue.*no StableHLO lowering"):
        lowered(lambda x: torch.kthvalue(x * 2, 2, 1)[0], x)


@pytest.mark.parametrize("name", ["gt", "ge", "lt", "le", "eq", "ne"])
@pytest.mark.parametrize("fill", [True, False])
def test_comparisons_of_a_constant_bool_tensor(name, fill):
    """fuzz-37: torch-mlir folded a comparison of a constant all-true bool tensor reading true as
    the signed i1 -1: ``v.masked_fill(v > False, False)`` stayed all true."""
    compare = getattr(torch, name)

    def fn(x):
        v = torch.zeros(1, 1, 5, dtype=torch.long) != (1 if fill else 0)
        w = torch.zeros(1, 1, 5, dtype=torch.long) == 1
        return (v.masked_fill(compare(v, False), False), compare(v, True), compare(v, False), compare(v, w),
                compare(w, v), compare(x, v))

    x = torch.tensor([True, False, True, False, True])
    for got, want in zip(lowered(fn, x), fn(x)):
        assert torch.equal(got.reshape(want.shape), want), (got, want)


_FLOAT32_SPREADS = [[3e38, -3e38], [3e38, 3e38], [3e38, 1e38, -2e38], [1e38] * 4, [2e19, -2e19, 1.0], [1.0, 2.0, 4.0],
                    [0.0] * 3, [float("inf"), 1.0], [float("nan"), 1.0], [1e-40, -1e-40, 3e-41]]
_SPREADS = {"std": lambda t: t.std(), "var": lambda t: t.var(), "std0": lambda t: t.std(0),
            "std_c0": lambda t: t.std(correction=0), "var_mean": lambda t: torch.var_mean(t),
            "std_mean0": lambda t: torch.std_mean(t, 0), "std_rows": lambda t: t.reshape(1, -1).expand(2, -1).std(1),
            "var_keepdim": lambda t: t.reshape(1, -1).var(1, keepdim=True)}


@pytest.mark.parametrize("rows", [[[2e19, -2e19, 1.0]], [[1e-40, -1e-40, 0.0]], [[1.0, 2.0, 3.0], [-5.0, 0.5, 7.0]],
                                  [[3.0, 3.0, 3.0, 3.0]]], ids=["squares-overflow", "subnormal", "plain", "constant"])
def test_layer_norm_moments_as_cpus_layer_norm(rows):
    """CPU's layer norm takes its moments in fp32 (not in double as its var_mean): where the squared
    deviations overflow, [[2e19, -2e19, 1.0]] normalizes to zeros; the saved mean and rstd too."""
    x = torch.tensor(rows)
    w, b = torch.linspace(0.5, 2.0, x.shape[-1]), torch.linspace(-1.0, 1.0, x.shape[-1])
    fn = lambda t, w, b: torch.native_layer_norm(t, (t.shape[-1],), w, b, 1e-5)  # noqa: E731
    for got, want in zip(lowered(fn, x, w, b), fn(x, w, b)):
        assert torch.allclose(got.reshape(want.shape), want, rtol=1e-5, atol=1e-45, equal_nan=True), (got, want)


@pytest.mark.parametrize("name", sorted(_SPREADS))
@pytest.mark.parametrize("values", _FLOAT32_SPREADS, ids=lambda v: f"{v[:2]}...{len(v)}")
def test_float32_var_and_std_as_cpu(values, name):
    """CPU accumulates float32 var/std in double: [2e19, -2e19, 1.0].std() is 2e19 and subnormal
    spreads are not 0, where fp32 squares overflowed or underflowed; its one-element all-reduce
    subtracts a float32 mean, so [1e38] * 4 has std inf there (and 0 over rows)."""
    x = torch.tensor(values)
    fn = _SPREADS[name]
    want = fn(x)
    want = want if isinstance(want, tuple) else (want,)
    for got, expected in zip(lowered(fn, x), want):
        assert torch.allclose(got.reshape(expected.shape), expected, rtol=1e-5, atol=1e-45, equal_nan=True), (got, expected)
