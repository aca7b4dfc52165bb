"""Differential tests of the compiled eager ops: every op the device runs natively gives CPU's
results (within dtype tolerance) in both executor modes - fast (the NEFF's graph form) and exact
(its ISA program, instruction by instruction) - and does not fall back to CPU kernels."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import torch_neuronx
from tnx_helpers import torch_neuronx_runtime

TOL = {torch.float32: dict(rtol=1e-4, atol=1e-5), torch.bfloat16: dict(rtol=2e-2, atol=2e-2)}


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def rand(*shape, dtype=torch.float32, low=-2.0, high=2.0, seed=0):
    return (torch.rand(shape, generator=_g(seed)) * (high - low) + low).to(dtype)


def pos(*shape, dtype=torch.float32, seed=0):
    return rand(*shape, dtype=dtype, low=0.1, high=3.0, seed=seed)


def idx(high, *shape, seed=0):
    return torch.randint(0, high, shape, generator=_g(seed))


# name -> (function of CPU/neuron tensors, input factory, dtypes)
CASES = {
    # elementwise unary
    "neg": (torch.neg, lambda d: [rand(5, 37, dtype=d)]),
    "abs": (torch.abs, lambda d: [rand(5, 37, dtype=d)]),
    "exp": (torch.exp, lambda d: [rand(5, 37, dtype=d)]),
    "log": (torch.log, lambda d: [pos(5, 37, dtype=d)]),
    "sqrt": (torch.sqrt, lambda d: [pos(5, 37, dtype=d)]),
    "rsqrt": (torch.rsqrt, lambda d: [pos(5, 37, dtype=d)]),
    "sin": (torch.sin, lambda d: [rand(5, 37, dtype=d)]),
    "tanh": (torch.tanh, lambda d: [rand(5, 37, dtype=d)]),
    "sigmoid": (torch.sigmoid, lambda d: [rand(5, 37, dtype=d)]),
    "relu": (torch.relu, lambda d: [rand(5, 37, dtype=d)]),
    "gelu": (F.gelu, lambda d: [rand(5, 37, dtype=d)]),
    "gelu_tanh": (lambda x: F.gelu(x, approximate="tanh"), lambda d: [rand(5, 37, dtype=d)]),
    "silu": (F.silu, lambda d: [rand(5, 37, dtype=d)]),
    "erf": (torch.erf, lambda d: [rand(5, 37, dtype=d)]),
    "reciprocal": (torch.reciprocal, lambda d: [pos(5, 37, dtype=d)]),
    "floor": (torch.floor, lambda d: [rand(5, 37, dtype=d)]),
    # binary / ternary
    "add": (lambda a, b: a + b, lambda d: [rand(5, 37, dtype=d), rand(37, dtype=d, seed=1)]),
    "sub_alpha": (lambda a, b: torch.sub(a, b, alpha=0.5), lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1)]),
    "mul_scalar": (lambda a: a * 3.5, lambda d: [rand(5, 37, dtype=d)]),
    "div": (lambda a, b: a / b, lambda d: [rand(5, 37, dtype=d), pos(5, 37, dtype=d, seed=1)]),
    "pow": (lambda a: a ** 2.5, lambda d: [pos(5, 37, dtype=d)]),
    "maximum": (torch.maximum, lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1)]),
    "where": (lambda c, a, b: torch.where(c > 0, a, b), lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1),
                                                                    rand(5, 37, dtype=d, seed=2)]),
    "masked_fill": (lambda a, m: a.masked_fill(m > 0.5, -1e4), lambda d: [rand(5, 37, dtype=d), rand(5, 37, seed=1)]),
    "clamp": (lambda a: a.clamp(-0.5, 0.75), lambda d: [rand(5, 37, dtype=d)]),
    "addcmul": (lambda a, b, c: torch.addcmul(a, b, c, value=0.3), lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1),
                                                                              rand(5, 37, dtype=d, seed=2)]),
    "lerp": (lambda a, b: torch.lerp(a, b, 0.25), lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1)]),
    "eq_lt_logical": (lambda a, b: torch.logical_and(a < b, ~(a == b)), lambda d: [rand(5, 37, dtype=d), rand(5, 37, dtype=d, seed=1)]),
    "cast_to_int": (lambda a: (a * 10).to(torch.int32), lambda d: [rand(5, 37, dtype=d)]),
    "cast_to_bf16": (lambda a: a.to(torch.bfloat16), lambda d: [rand(5, 37, dtype=d)]),
    # reductions
    "sum_dim": (lambda a: a.sum(dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "sum_all": (lambda a: a.sum(), lambda d: [rand(6, 37, dtype=d)]),
    "mean_keepdim": (lambda a: a.mean(dim=-1, keepdim=True), lambda d: [rand(3, 5, 37, dtype=d)]),
    "max_dim": (lambda a: a.max(dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "amin": (lambda a: a.amin(dim=0), lambda d: [rand(6, 37, dtype=d)]),
    "argmax": (lambda a: a.argmax(dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "prod": (lambda a: a.prod(dim=1), lambda d: [rand(6, 7, dtype=d, low=0.5, high=1.5)]),
    "var_std": (lambda a: (a.var(dim=1), a.std(dim=0)), lambda d: [rand(6, 37, dtype=d)]),
    "norm": (lambda a: torch.linalg.vector_norm(a, dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "logsumexp": (lambda a: torch.logsumexp(a, dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "cumsum": (lambda a: a.cumsum(dim=1), lambda d: [rand(6, 37, dtype=d)]),
    "softmax": (lambda a: a.softmax(dim=-1), lambda d: [rand(6, 37, dtype=d)]),
    "log_softmax": (lambda a: a.log_softmax(dim=-1), lambda d: [rand(6, 37, dtype=d)]),
    # matmuls
    "mm": (torch.mm, lambda d: [rand(24, 40, dtype=d), rand(40, 33, dtype=d, seed=1)]),
    "bmm": (torch.bmm, lambda d: [rand(3, 24, 40, dtype=d), rand(3, 40, 33, dtype=d, seed=1)]),
    "addmm": (lambda b, x, w: torch.addmm(b, x, w), lambda d: [rand(33, dtype=d), rand(24, 40, dtype=d, seed=1),
                                                               rand(40, 33, dtype=d, seed=2)]),
    "linear": (F.linear, lambda d: [rand(2, 24, 40, dtype=d), rand(33, 40, dtype=d, seed=1), rand(33, dtype=d, seed=2)]),
    "matmul_4d": (torch.matmul, lambda d: [rand(2, 3, 16, 20, dtype=d), rand(2, 3, 20, 12, dtype=d, seed=1)]),
    # indexing
    "embedding": (lambda w, i: F.embedding(i, w), lambda d: [rand(50, 24, dtype=d), idx(50, 4, 9, seed=1)]),
    "index_select": (lambda a, i: a.index_select(0, i), lambda d: [rand(30, 24, dtype=d), idx(30, 17, seed=1)]),
    "gather": (lambda a, i: a.gather(1, i), lambda d: [rand(6, 37, dtype=d), idx(37, 6, 5, seed=1)]),
    "scatter_add": (lambda a, i, s: a.scatter_add(1, i, s), lambda d: [rand(6, 37, dtype=d), idx(37, 6, 5, seed=1),
                                                                       rand(6, 5, dtype=d, seed=2)]),
    "index_put_acc": (lambda a, i, v: a.index_put((i,), v, accumulate=True),
                      lambda d: [rand(20, 8, dtype=d), idx(20, 12, seed=1), rand(12, 8, dtype=d, seed=2)]),
    # data movement
    "cat": (lambda a, b: torch.cat([a, b], dim=1), lambda d: [rand(5, 7, dtype=d), rand(5, 9, dtype=d, seed=1)]),
    "stack": (lambda a, b: torch.stack([a, b], dim=0), lambda d: [rand(5, 7, dtype=d), rand(5, 7, dtype=d, seed=1)]),
    "transpose_contiguous": (lambda a: a.transpose(0, 1).contiguous(), lambda d: [rand(5, 37, dtype=d)]),
    "permute_contiguous": (lambda a: a.permute(2, 0, 1).contiguous(), lambda d: [rand(3, 5, 7, dtype=d)]),
    "expand_contiguous": (lambda a: a.expand(4, 5, 7).contiguous(), lambda d: [rand(5, 7, dtype=d)]),
    "chunk_clone": (lambda a: [c.clone() for c in a.chunk(3, dim=1)], lambda d: [rand(5, 9, dtype=d)]),
    # normalization and losses
    "layer_norm": (lambda a, w, b: F.layer_norm(a, (37,), w, b), lambda d: [rand(6, 37, dtype=d), rand(37, dtype=d, seed=1),
                                                                            rand(37, dtype=d, seed=2)]),
    "rms_norm": (lambda a, w: F.rms_norm(a, (37,), w), lambda d: [rand(6, 37, dtype=d), rand(37, dtype=d, seed=1)]),
    "group_norm": (lambda a: F.group_norm(a, 2), lambda d: [rand(3, 4, 5, 6, dtype=d)]),
    "cross_entropy": (lambda a, t: F.cross_entropy(a, t), lambda d: [rand(6, 37, dtype=d), idx(37, 6, seed=1)]),
    "nll_loss": (lambda a, t: F.nll_loss(a.log_softmax(-1), t), lambda d: [rand(6, 37, dtype=d), idx(37, 6, seed=1)]),
    "sdpa_causal": (lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
                    lambda d: [rand(2, 2, 8, 16, dtype=d), rand(2, 2, 8, 16, dtype=d, seed=1), rand(2, 2, 8, 16, dtype=d, seed=2)]),
    # dim arguments over 0-dim tensors (computed over the tensor viewed as [1])
    "sum_0dim_keepdim": (lambda a: a.sum(0, keepdim=True), lambda d: [rand(dtype=d)]),
    "softmax_0dim": (lambda a: a.softmax(-1), lambda d: [rand(dtype=d)]),
    "argmax_0dim": (lambda a: a.argmax(0), lambda d: [rand(dtype=d)]),
    "max_dim_0dim": (lambda a: list(a.max(0)), lambda d: [rand(dtype=d)]),
    "cumsum_0dim": (lambda a: a.cumsum(0), lambda d: [rand(dtype=d)]),
    # ops through decompositions
    "flip": (lambda a: a.flip(0, 2), lambda d: [rand(3, 5, 7, dtype=d)]),
    "roll": (lambda a: a.roll((2, -1), (0, 1)), lambda d: [rand(5, 7, dtype=d)]),
    "roll_flat": (lambda a: a.roll(4), lambda d: [rand(5, 7, dtype=d)]),
    "round_decimals": (lambda a: a.round(decimals=2), lambda d: [rand(5, 37, dtype=d)]),
    "round_neg_decimals": (lambda a: (a * 1000).round(decimals=-2), lambda d: [rand(5, 37, dtype=d)]),
    "addmv": (torch.addmv, lambda d: [rand(5, dtype=d), rand(5, 37, dtype=d, seed=1), rand(37, dtype=d, seed=2)]),
    "elu": (F.elu, lambda d: [rand(5, 37, dtype=d)]),
}
# Each case runs in float32; these also in bfloat16.
BF16 = {"add", "mul_scalar", "exp", "gelu", "sum_dim", "softmax", "mm", "layer_norm", "cat", "where", "flip", "round_decimals"}
# Cases that still run (partly) through CPU fallback, with the ATen ops that do.
ALLOWED_FALLBACK: dict[str, set[str]] = {}

PARAMS = [(name, torch.float32) for name in CASES] + [(name, torch.bfloat16) for name in sorted(BF16)]


@pytest.fixture(params=["fast", "exact"])
def executor_mode(request):
    device = torch_neuronx_runtime().device(0)
    saved = device.mode
    device.mode = request.param
    yield request.param
    torch.neuron.synchronize()
    device.mode = saved


def _to(value, device):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to(v, device) for v in value)
    return value


@pytest.mark.parametrize("name,dtype", PARAMS, ids=[f"{n}-{str(d).removeprefix('torch.')}" for n, d in PARAMS])
def test_compiled_op_matches_cpu(name, dtype, executor_mode):
    fn, make_inputs = CASES[name]
    inputs = make_inputs(dtype)
    expected = fn(*inputs)
    torch_neuronx.clear_op_tracking()
    actual = _to(fn(*_to(inputs, "neuron")), "cpu")
    fallback = set(torch_neuronx.get_fallback_ops()) - ALLOWED_FALLBACK.get(name, set())
    assert not fallback, f"{name} ran through CPU fallback: {sorted(fallback)}"
    torch.testing.assert_close(actual, expected, equal_nan=True, **TOL[dtype])


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8, torch.float16], ids=str)
def test_a_python_number_promotes_as_a_number_not_as_a_tensor(dtype, adaptive):
    """``3 - x`` has no Scalar overload (rsub.Tensor): the number promotes as a wrapped number
    (x's dtype), not as a 0-d int64 tensor - for a 0-d x too, where a tensor would win."""
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        for shape in ((), (4,)):
            x = torch.full(shape, 5, dtype=dtype)
            for fn in (lambda t: 3 - t, lambda t: torch.rsub(t, 3), lambda t: 2 - t.neg()):
                got, expected = fn(x.to("neuron")), fn(x)
                assert got.dtype == expected.dtype
                torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
            # a 0-d int64 *tensor* still promotes as a tensor (and is not served the number's NEFF)
            got, expected = torch.rsub(x.to("neuron"), torch.tensor(3)), torch.rsub(x, torch.tensor(3))
            assert got.dtype == expected.dtype
    finally:
        torch_neuronx.set_adaptive_eager(False)


LAYOUT_CALLS = {
    # fuzz-39: a number ** a permuted tensor is contiguous on CPU (the meta kernel keeps the permutation)
    "rpow": (lambda x, y: 0.5 ** x, lambda: torch.rand(3, 4, 5).permute(2, 0, 1)),
    # fuzz-31: floor division takes its first operand's layout (the meta kernel the second's)
    "floordiv": (lambda x, y: x // y, lambda: torch.arange(54.0).reshape(3, 6, 3)[:, 0:6:2]),
    "div_floor": (lambda x, y: torch.div(x, y, rounding_mode="floor"), lambda: torch.arange(54.0).reshape(3, 6, 3)[:, 0:6:2]),
}


@pytest.mark.parametrize("adaptive", [False, True])
@pytest.mark.parametrize("name", sorted(LAYOUT_CALLS))
def test_results_have_cpus_layout_where_the_meta_kernel_gives_another(name, adaptive):
    fn, make = LAYOUT_CALLS[name]
    x, y = make(), torch.ones(3, 3, 3).transpose(1, 0) + 1
    expected = fn(x, y)
    torch_neuronx.set_adaptive_eager(adaptive)
    try:
        got = fn(x.to("neuron"), y.to("neuron"))
        values = got.cpu()
    finally:
        torch_neuronx.set_adaptive_eager(False)
    assert got.stride() == expected.stride(), (got.stride(), expected.stride())
    torch.testing.assert_close(values, expected)
