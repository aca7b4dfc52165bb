"""The FX rewrites made before torch-mlir: graphs it ran away, aborted or segfaulted on lower to
the values torch computes (or are refused with a clear error), through ``from_fx``."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
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
