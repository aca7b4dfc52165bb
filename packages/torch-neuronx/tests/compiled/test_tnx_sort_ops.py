"""sort / argsort / msort / topk on the device (neuronx-cc's argsort), eager and compiled, forward
and backward, against CPU: values and indices exactly (stable order: ties in their original order,
NaN above every number, -0.0 equal to 0.0), integers beyond 2**24, 16-bit floats, odd shapes.
topk's indices among equal values are unspecified in PyTorch (CPU's partial sort picks any); they
are checked to select the right values, and equal the stable order's prefix here."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import torch_neuronx_runtime

N = "neuron"


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def few_values(*shape, dtype=torch.float32, seed=0):
    """Few distinct values (many ties), NaN, infinities and both zeros."""
    x = torch.randint(-3, 4, shape, generator=_g(seed)).float()
    flat = x.view(-1)
    flat[::7] = float("nan")
    flat[1::5] = -0.0
    flat[2::11] = float("inf")
    flat[3::13] = float("-inf")
    return x.to(dtype)


def wide_integers(*shape, dtype=torch.int64, seed=0):
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, shape, generator=_g(seed), dtype=torch.int64).to(dtype)
    flat = x.view(-1)
    flat[::4] = 2**24 + 1 if info.max > 2**25 else 3  # ties, and neighbours fp32 would merge
    flat[1::4] = 2**24 if info.max > 2**25 else 2
    return x


def _same(got, expected):
    got = got if isinstance(got, (tuple, list)) else (got,)
    expected = expected if isinstance(expected, (tuple, list)) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        g = g.cpu()
        assert g.dtype == e.dtype and g.shape == e.shape, (g.dtype, g.shape, e.dtype, e.shape)
        assert torch.equal(g.isnan() if g.is_floating_point() else g, e.isnan() if e.is_floating_point() else e)
        if g.is_floating_point():  # bit for bit: -0.0 and 0.0 stay where they were
            keep = ~e.isnan()
            assert torch.equal(g[keep].view(torch.int16 if g.element_size() == 2 else torch.int32),
                               e[keep].view(torch.int16 if e.element_size() == 2 else torch.int32))


def _on_device(fn, *inputs):
    torch_neuronx.clear_op_tracking()
    got = fn(*(x.to(N) for x in inputs))
    fallback = torch_neuronx.get_fallback_ops()
    assert not fallback, f"ran through CPU fallback: {fallback} {torch_neuronx.get_fallback_reasons()}"
    return got


SORTS = {
    "sort": lambda x: torch.sort(x, dim=1, stable=True),
    "sort-desc-dim0": lambda x: torch.sort(x, dim=0, descending=True, stable=True),
    "argsort": lambda x: torch.argsort(x, dim=-1, stable=True),
    "argsort-desc": lambda x: torch.argsort(x, dim=0, descending=True, stable=True),
    "method-transposed": lambda x: x.t().sort(dim=1, descending=True, stable=True),
}


@pytest.mark.parametrize("name", sorted(SORTS))
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_eager_float_order(name, dtype):
    x = few_values(6, 45, dtype=dtype)
    _same(_on_device(SORTS[name], x), SORTS[name](x))


@pytest.fixture
def exact_executor():
    """Launches run their ISA programs instruction by instruction (the default fast mode evaluates
    the NEFF's graph form): the sorting network itself is what answers."""
    device = torch_neuronx_runtime().device(0)
    saved = device.mode
    device.mode = "exact"
    yield
    torch.neuron.synchronize()
    device.mode = saved


@pytest.mark.parametrize("make,descending", [
    (lambda: few_values(5, 37), False), (lambda: few_values(3, 130, dtype=torch.bfloat16), True),
    (lambda: wide_integers(4, 21), False), (lambda: wide_integers(4, 21, dtype=torch.int32), True)],
    ids=["float32", "bfloat16-desc", "int64", "int32-desc"])
def test_the_network_on_the_exact_executor(exact_executor, make, descending):
    x = make()
    fn = lambda t: torch.sort(t, dim=1, descending=descending, stable=True)  # noqa: E731
    _same(_on_device(fn, x), fn(x))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_eager_unstable_sort_and_msort(dtype):
    """stable=False (and msort): CPU's order of equal elements (-0.0 and 0.0 too) is its
    introsort's; the device returns the stable order - equal values, indices that select them."""
    x = few_values(6, 45, dtype=dtype)
    got = _on_device(lambda t: (torch.sort(t, dim=1), torch.msort(t)), x)
    (values, indices), msorted = got
    expected = torch.sort(x, dim=1)
    assert torch.equal(values.cpu().nan_to_num(7.0), expected.values.nan_to_num(7.0))  # -0.0 == 0.0
    _same(values, x.gather(1, indices.cpu()))
    _same(values, torch.sort(x, dim=1, stable=True).values)
    _same(msorted, torch.sort(x, dim=0, stable=True).values)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8], ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_eager_integers_exact(dtype, descending):
    x = wide_integers(5, 33, dtype=dtype)
    fn = lambda t: torch.sort(t, dim=1, descending=descending, stable=True)  # noqa: E731
    _same(_on_device(fn, x), fn(x))


@pytest.mark.parametrize("shape,dim", [((1,), 0), ((4, 1), 1), ((1, 7), 1), ((3, 0), 1), ((130, 3), 0), ((2, 129, 3), 1),
                                       ((2, 3, 5, 7), 2)], ids=str)
def test_eager_odd_shapes(shape, dim):
    x = few_values(*shape) if 0 not in shape else torch.empty(shape)
    fn = lambda t: torch.sort(t, dim=dim, stable=True)  # noqa: E731
    _same(_on_device(fn, x), fn(x))


def test_eager_zero_dim_and_non_contiguous():
    _same(_on_device(lambda t: torch.sort(t, 0), torch.tensor(2.5)), torch.sort(torch.tensor(2.5), 0))
    x = few_values(8, 10)
    fn = lambda t: t[::2, 1::3].sort(dim=0, stable=True)  # noqa: E731
    _same(_on_device(fn, x), fn(x))


@pytest.mark.parametrize("largest", [True, False])
def test_topk_values_and_indices(largest):
    x = few_values(7, 40)
    got = _on_device(lambda t: torch.topk(t, 5, dim=1, largest=largest), x)
    expected = torch.topk(x, 5, dim=1, largest=largest)
    _same(got.values, expected.values)
    assert torch.equal(x.gather(1, got.indices.cpu()).isnan(), expected.values.isnan())
    _same(got.values, x.gather(1, got.indices.cpu()))  # the indices select those values
    stable = torch.sort(x, dim=1, descending=largest, stable=True).indices[:, :5]
    assert torch.equal(got.indices.cpu(), stable)


def test_compiled_sort_topk_and_integers():
    def fn(x, n):
        v, i = torch.sort(x * 2, dim=1, descending=True, stable=True)
        return v, i, torch.topk(x.abs(), 3, dim=0).values, torch.argsort(n, dim=1, stable=True)  # (no -0.0 ties)

    x, n = few_values(5, 37), wide_integers(4, 19)
    _same(torch.compile(fn, backend="neuron")(x.to(N), n.to(N)), fn(x, n))


def test_sort_backward_eager_and_compiled():
    x = torch.randn(6, 33, generator=_g(1))
    w = torch.randn(6, 17, generator=_g(2))

    def loss(t, w):
        return (torch.sort(t, dim=1, stable=True).values[:, :17] * w).sum() + torch.topk(t, 4, dim=0).values.sum()

    ref = x.clone().requires_grad_()
    loss(ref, w).backward()
    for run in (loss, torch.compile(loss, backend="neuron")):
        t = x.to(N).requires_grad_()
        run(t, w.to(N)).backward()
        assert torch.equal(t.grad.cpu(), ref.grad)


@pytest.mark.parametrize("fn,error", [
    (lambda t: torch.sort(t, dim=2), IndexError),
    (lambda t: torch.topk(t, 9, dim=1), RuntimeError),
    (lambda t: torch.argsort(t, dim=-3), IndexError),
], ids=["sort-dim", "topk-k", "argsort-dim"])
def test_bad_input_raises_what_cpu_raises_at_the_call(fn, error):
    x = torch.randn(3, 4)
    with pytest.raises(error) as cpu:
        fn(x)
    with pytest.raises(error) as got:
        fn(x.to(N))
    assert str(got.value).split("(")[0] == str(cpu.value).split("(")[0]


@pytest.mark.parametrize("largest", [True, False])
def test_unsorted_topk_runs_on_the_device(largest):
    """``topk(sorted=False)`` (DeepSeek's expert-group routing) leaves the order of its k results
    unspecified: the device gives the sorted order, which selects CPU's values and indices."""
    x = torch.randn(14, 9, generator=_g(3))
    values, indices = _on_device(lambda t: torch.topk(t, 3, dim=-1, largest=largest, sorted=False), x)
    expected = torch.topk(x, 3, dim=-1, largest=largest, sorted=True)
    _same((values, indices), expected)
    cpu_unsorted = torch.topk(x, 3, dim=-1, largest=largest, sorted=False)
    assert torch.equal(values.cpu().sort(-1)[0], cpu_unsorted.values.sort(-1)[0])
