"""cumprod on the device (neuronx-cc's decomposition into log-step products), eager and compiled,
forward and backward, against CPU; integer results exact (int64 beyond 2**24 runs on CPU, as
cumsum's), 16-bit floats multiplied in fp32 and rounded once."""

from __future__ import annotations

import pytest
import torch
from tnx_helpers import check_against_cpu

N = "neuron"


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


def near_one(*shape, dtype=torch.float32, seed=0):
    """Products that stay in range over a few hundred steps, with a zero and negatives."""
    x = torch.rand(shape, generator=_g(seed)) * 0.4 + 0.8
    flat = x.view(-1)
    flat[5::17] *= -1
    flat[3::41] = 0.0
    return x.to(dtype)


@pytest.mark.parametrize("shape,dim", [((5, 37), 1), ((37, 5), 0), ((3, 300), -1), ((2, 129, 3), 1), ((4, 1), 1),
                                       ((1,), 0), ((3, 0), 1)], ids=str)
def test_eager_float32(shape, dim):
    check_against_cpu(lambda t: torch.cumprod(t, dim), near_one(*shape), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_eager_16_bit_floats_round_once(dtype):
    check_against_cpu(lambda t: torch.cumprod(t, 1), near_one(6, 45, dtype=dtype), rtol=1e-2, atol=1e-3)


def test_eager_zero_dim_non_contiguous_and_dtype_argument():
    check_against_cpu(lambda t: torch.cumprod(t, 0), torch.tensor(3.5))
    check_against_cpu(lambda t: t.t().cumprod(1), near_one(9, 4), rtol=1e-5, atol=1e-6)
    check_against_cpu(lambda t: torch.cumprod(t, 1, dtype=torch.float32), near_one(3, 20, dtype=torch.bfloat16), rtol=1e-5, atol=1e-6)


def test_eager_integers_exact():
    x = torch.randint(-3, 4, (3, 40), generator=_g(1), dtype=torch.int32)
    check_against_cpu(lambda t: torch.cumprod(t, 1, dtype=torch.int32), x, rtol=0, atol=0)  # wraps as CPU (integer ALU)
    check_against_cpu(lambda t: torch.cumprod(t, 0), torch.rand(6, 3, generator=_g(2)) > 0.3, rtol=0, atol=0)  # bool -> int64
    # int64 inputs may exceed 2**24: the integer check refuses, CPU computes (as for cumsum)
    check_against_cpu(lambda t: torch.cumprod(t, 1), torch.randint(-3, 4, (3, 9), generator=_g(3)), fallback={"aten::cumprod"},
           rtol=0, atol=0)


def test_compiled_forward_and_backward():
    x = near_one(5, 37)

    def loss(t):
        return (torch.cumprod(t * 1.5, 1) * torch.arange(37.0, device=t.device)).sum()

    ref = x.clone().requires_grad_()
    loss(ref).backward()
    t = x.to(N).requires_grad_()
    got = torch.compile(loss, backend="neuron")(t)
    got.backward()
    torch.testing.assert_close(got.cpu(), loss(x), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(t.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-4)


def test_eager_backward():
    x = near_one(4, 23)
    ref = x.clone().requires_grad_()
    torch.cumprod(ref, 1).sum().backward()
    t = x.to(N).requires_grad_()
    torch.cumprod(t, 1).sum().backward()
    torch.testing.assert_close(t.grad.cpu(), ref.grad, rtol=1e-4, atol=1e-5)


def test_bad_dim_raises_what_cpu_raises_at_the_call():
    with pytest.raises(IndexError, match="Dimension out of range"):
        torch.cumprod(torch.ones(2, 3, device=N), 3)
