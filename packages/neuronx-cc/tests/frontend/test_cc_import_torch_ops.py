"""A zoo of torch functions through torch-mlir's StableHLO and the importer, each checked against
torch on the same inputs (fp32 tolerance; exact for integers and booleans)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_mlir")
import torch.nn.functional as F  # noqa: E402
from neuronxcc.frontend import UnsupportedOp, import_module, run_graph  # noqa: E402
from torch_mlir import fx  # noqa: E402

torch.manual_seed(0)
x, y = torch.randn(4, 6), torch.randn(4, 6)
i, j = torch.randint(0, 4, (3,)), torch.randint(0, 6, (4, 6))
b = torch.rand(4, 6) > 0.5
n = torch.randint(-9, 9, (4, 6))  # (n % 4 is left out: torch-mlir lowers it to StableHLO's C-style remainder)
ZOO = {
    "softmax": (lambda x: F.softmax(x, -1), (x,)),
    "log_softmax": (lambda x: F.log_softmax(x, 0), (x,)),
    "cross_entropy": (lambda x, t: F.cross_entropy(x, t), (x, torch.tensor([0, 5, 2, 1]))),
    "rmsnorm": (lambda x: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6), (x,)),
    "silu_gelu_tanh": (lambda x: F.silu(x) + F.gelu(x, approximate="tanh") + torch.tanh(x), (x,)),
    "cumsum": (lambda x: torch.cumsum(x, 0), (x,)),
    "masked_fill": (lambda x, b: x.masked_fill(b, -1e9), (x, b)),
    "clamp_minmax": (lambda x: x.clamp(-0.5, 0.7), (x,)),
    "index_put": (lambda x, i: x.index_put((i,), torch.ones(3, 6)), (x, i)),
    "index_put_acc": (lambda x, i: x.index_put((i,), torch.ones(3, 6), accumulate=True), (x, i)),
    "scatter": (lambda x, j: torch.zeros(4, 6).scatter(1, j, x), (x, j)),
    "gather": (lambda x, j: torch.gather(x, 1, j), (x, j)),
    "argmin_max": (lambda x: (x.argmin(0), x.max(1).values, x.min()), (x,)),
    "mean_var": (lambda x: (x.mean(), x.var(1), x.std(0)), (x,)),
    "int_ops": (lambda n: (n // 4, torch.div(n, 3, rounding_mode="trunc"), n * 3 - 1, n.abs(), n.sign()), (n,)),
    "bool_ops": (lambda x, b: ((x > 0) & b, (x > 0) | b, ~b, (x > 0) ^ b, b.any(), b.all(1)), (x, b)),
    "cat_stack": (lambda x, y: (torch.cat([x, y], 1), torch.stack([x, y])), (x, y)),
    "flip_roll": (lambda x: (torch.flip(x, [0, 1]), torch.roll(x, 2, 1)), (x,)),
    "pad": (lambda x: (F.pad(x, (1, 2, 0, 1), value=3.0), F.pad(x, (-1, 1))), (x,)),
    "repeat_expand": (lambda x: (x.repeat(2, 1), x[:, :1].expand(4, 6), x.unsqueeze(0).repeat_interleave(2, 0)), (x,)),
    "triu_tril": (lambda x: (torch.triu(x, 1), torch.tril(x, -1)), (x,)),
    "pow_exp": (lambda x: (x.abs().pow(1.5), torch.exp2(x), torch.log2(x.abs() + 1), x.reciprocal()), (x,)),
    "trig": (lambda x: (torch.sin(x), torch.cos(x), torch.atan2(x, y), torch.erf(x), torch.sigmoid(x)), (x,)),
    "round": (lambda x: (torch.round(x * 3), torch.floor(x), torch.ceil(x), torch.trunc(x * 3), torch.frac(x)), (x,)),
    "where_scalar": (lambda x: torch.where(x > 0, x, 0.0), (x,)),
    "bmm": (lambda a, b: torch.bmm(a, b), (torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
    "einsum": (lambda a, b: torch.einsum("bij,bkj->bik", a, b), (torch.randn(2, 3, 4), torch.randn(2, 5, 4))),
    "embedding_2d": (lambda w, idx: F.embedding(idx, w), (torch.randn(10, 4), torch.randint(0, 10, (2, 3)))),
    "adv_index_2": (lambda x, a, b2: x[a, b2], (torch.randn(4, 5, 3), torch.tensor([0, 3, 1]), torch.tensor([4, 0, 2]))),
    "adv_index_col": (lambda x, a: x[:, a], (torch.randn(4, 5, 3), torch.tensor([0, 3, 1]))),
    "nll": (lambda x, t: F.nll_loss(F.log_softmax(x, -1), t), (x, torch.tensor([0, 5, 2, 1]))),
    "to_dtypes": (lambda x: (x.to(torch.bfloat16), x.to(torch.float16).float(), x.long(), (x > 0).float(), x.int().to(torch.int8)), (x,)),
    "arange_linspace": (lambda x: (x + torch.arange(6), torch.linspace(0, 1, 6) * x), (x,)),
    "new_zeros_full": (lambda x: (x.new_zeros(3), torch.full((2, 2), 7.0), torch.ones_like(x)), (x,)),
    "amax_logsumexp": (lambda x: (x.amax(1), torch.logsumexp(x, 1), x.norm(dim=1)), (x,)),
    "select_slice_step": (lambda x: (x[1], x[:, ::2], x[1:3, -2:], x[..., None].squeeze(-1)), (x,)),
    "split_chunk": (lambda x: x.chunk(3, 1), (x,)),
    "prod": (lambda x: (x.prod(1), ), (x,)),
    "nan_ops": (lambda x: (torch.isnan(x), torch.isinf(x / 0), torch.nan_to_num(x / 0)), (x,)),
    "minimum_maximum": (lambda x, y: (torch.minimum(x, y), torch.maximum(x, y), torch.fmod(x, y)), (x, y)),
    # ties (n has few distinct values) in their original order, as torch's stable sort keeps them
    "sort_topk": (lambda x, n: (*torch.sort(x, 1), *torch.sort(n, 0, descending=True), torch.topk(x, 3).values,
                                torch.sort(x.T, 0, descending=True)[1]), (x, n)),
}


class Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


def _numpy(t):
    return t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy()


@pytest.mark.parametrize("name", sorted(ZOO))
def test_torch_function(name):
    fn, args = ZOO[name]
    graph = import_module(fx.export_and_import(Wrap(fn), *args, output_type="stablehlo"))
    got = run_graph(graph, *(a.numpy() for a in args))
    expected = fn(*args)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        e = _numpy(e)
        g = g.astype(np.float32) if g.dtype.name == "bfloat16" else g
        assert g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        np.testing.assert_allclose(g, e, atol=1e-5, rtol=1e-5, equal_nan=True)


@pytest.mark.parametrize("fn,op", [(lambda x: F.max_pool1d(x[None], 2), "stablehlo.reduce_window")])
def test_torch_function_without_graph_form(fn, op):
    module = fx.export_and_import(Wrap(fn), torch.randn(4, 6), output_type="stablehlo")
    with pytest.raises(UnsupportedOp) as err:
        import_module(module)
    assert err.value.op == op and "test_cc_import_torch_ops.py" in err.value.location
