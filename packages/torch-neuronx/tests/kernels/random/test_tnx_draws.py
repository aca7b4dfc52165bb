"""ATen's random ops on neuron: computed on the NeuronCore from the device generator's Philox
state - distributions (moments and Kolmogorov-Smirnov bounds at fixed seeds), reproducibility,
offsets, explicit generators, dropout, nn.init, and bad input."""

from __future__ import annotations

import math

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal, op_records

N = 64 * 64  # one shape for most draws: one NEFF per op
KS_BOUND = 1.63 / math.sqrt(N)  # Kolmogorov-Smirnov at alpha = 0.01


def _ks(sample: torch.Tensor, cdf) -> float:
    """The Kolmogorov-Smirnov distance of ``sample`` from the distribution with CDF ``cdf``."""
    x = sample.double().flatten().sort().values
    n = x.numel()
    f = cdf(x)
    upper = torch.arange(1, n + 1, dtype=torch.float64) / n - f
    lower = f - torch.arange(0, n, dtype=torch.float64) / n
    return max(upper.max().item(), lower.max().item())


def _draw(fill, dtype=torch.float32, generator=None):
    t = torch.empty(64, 64, dtype=dtype, device="neuron")
    fill(t, generator)
    return t.cpu()


def test_uniform_normal_exponential_and_friends_follow_their_distributions():
    torch.manual_seed(0)
    u = _draw(lambda t, g: t.uniform_(2.0, 5.0))
    assert 2.0 <= u.min() and u.max() < 5.0
    assert _ks(u, lambda x: (x - 2.0) / 3.0) < KS_BOUND
    z = _draw(lambda t, g: t.normal_(1.0, 2.0))
    assert abs(z.mean() - 1.0) < 4 * 2.0 / math.sqrt(N) and abs(z.std() - 2.0) < 0.1
    assert _ks(z, lambda x: torch.special.ndtr((x - 1.0) / 2.0)) < KS_BOUND
    e = _draw(lambda t, g: t.exponential_(4.0))
    assert e.min() >= 0 and _ks(e, lambda x: 1 - torch.exp(-4.0 * x)) < KS_BOUND
    c = _draw(lambda t, g: t.cauchy_(3.0, 0.5))
    assert _ks(c, lambda x: 0.5 + torch.atan((x - 3.0) / 0.5) / math.pi) < KS_BOUND
    ln = _draw(lambda t, g: t.log_normal_(0.0, 0.5))
    assert ln.min() > 0 and _ks(ln.log(), lambda x: torch.special.ndtr(x / 0.5)) < KS_BOUND
    geo = _draw(lambda t, g: t.geometric_(0.25))
    assert geo.min() >= 1 and torch.equal(geo, geo.round())
    assert abs(geo.mean() - 4.0) < 0.25  # mean 1/p, sd sqrt(1-p)/p = 3.5: 4 sd of the mean of N is 0.22
    assert torch_neuronx.get_fallback_ops() == []


def test_bernoulli_scalar_and_tensor_probabilities():
    torch.manual_seed(1)
    b = _draw(lambda t, g: t.bernoulli_(0.3))
    assert set(b.unique().tolist()) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 4 * math.sqrt(0.21 / N)
    p = torch.tensor([0.0, 1.0, 0.5, 0.9]).repeat(16, 16)  # 64 x 64, a different p in each column
    drawn = torch.bernoulli(p.to("neuron")).cpu()
    assert drawn[:, 0::4].sum() == 0 and drawn[:, 1::4].min() == 1
    assert abs(drawn[:, 2::4].mean() - 0.5) < 0.05 and abs(drawn[:, 3::4].mean() - 0.9) < 0.04
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize("dtype, low, high, call", [
    (torch.int64, 0, 10, lambda t: t.random_(0, 10)),
    (torch.int64, 0, 7, lambda t: t.random_(7)),
    (torch.int32, -5, 3, lambda t: t.random_(-5, 3)),
    (torch.uint8, 0, 256, lambda t: t.random_()),
    (torch.int8, 0, 128, lambda t: t.random_()),
    (torch.bool, 0, 2, lambda t: t.random_()),
    (torch.float32, 0, 2**24 + 1, lambda t: t.random_()),
    (torch.bfloat16, 100, 2**8 + 1, lambda t: t.random_(100, None)),
])
def test_random_overloads_stay_in_range_and_cover_it(dtype, low, high, call):
    torch.manual_seed(2)
    t = torch.empty(4000, dtype=dtype, device="neuron")
    values = call(t).cpu().to(torch.int64 if dtype != torch.float32 else torch.float64)
    assert low <= values.min().item() and values.max().item() < high
    if high - low <= 256:
        assert values.unique().numel() == high - low  # every value of a small range appears
    assert "aten::random_" not in str(torch_neuronx.get_fallback_ops())


def test_random_beyond_32_bits_draws_on_the_host_reproducibly():
    torch.manual_seed(3)
    a = torch.empty(1000, dtype=torch.int64, device="neuron").random_()
    torch.manual_seed(3)
    b = torch.empty(1000, dtype=torch.int64, device="neuron").random_()
    assert_equal(a, b.cpu())
    assert a.cpu().max() > 2**40 and a.cpu().min() >= 0


def test_manual_seed_reproduces_and_successive_draws_are_independent():
    torch.manual_seed(4)
    a, b = torch.randn(N, device="neuron"), torch.randn(N, device="neuron")
    torch.neuron.manual_seed(4)
    assert_equal(a, torch.randn(N, device="neuron").cpu())
    assert_equal(b, torch.randn(N, device="neuron").cpu())
    correlation = torch.corrcoef(torch.stack([a.cpu(), b.cpu()]))[0, 1]
    assert abs(correlation) < 4 / math.sqrt(N)
    torch.manual_seed(5)
    assert not torch.equal(torch.randn(N, device="neuron").cpu(), a.cpu())


def test_each_draw_takes_one_offset_step_and_the_offset_replays_it():
    g = torch.Generator(device="neuron").manual_seed(6)
    assert g.get_offset() == 0
    first = torch.rand(N, device="neuron", generator=g)
    torch.rand(N, device="neuron", generator=g)
    assert g.get_offset() == 2
    g.set_offset(0)
    assert_equal(first, torch.rand(N, device="neuron", generator=g).cpu())
    # The same shape and seed at another offset: other numbers.
    assert not torch.equal(first.cpu(), torch.rand(N, device="neuron", generator=g).cpu())


def test_an_explicit_generator_is_the_one_used():
    torch.manual_seed(7)
    state = torch.neuron.get_rng_state()
    g = torch.Generator(device="neuron").manual_seed(8)
    a = torch.randn(N, device="neuron", generator=g)
    assert torch.equal(torch.neuron.get_rng_state(), state)  # the default generator did not move
    b = torch.randn(N, device="neuron", generator=torch.Generator(device="neuron").manual_seed(8))
    assert_equal(a, b.cpu())
    torch.manual_seed(8)  # the default generator with g's seed and offset: g's numbers
    assert_equal(a, torch.randn(N, device="neuron").cpu())


def test_factories_and_like_variants_draw_on_the_device():
    torch.manual_seed(9)
    ints = torch.randint(3, 9, (64, 64), device="neuron")
    assert ints.dtype == torch.int64 and 3 <= ints.min() and ints.max() < 9
    like = torch.randint_like(ints, 0, 2)
    assert set(like.cpu().unique().tolist()) == {0, 1}
    x = torch.zeros(64, 64, device="neuron")
    assert 0 <= torch.rand_like(x).min() and torch.rand_like(x).max() < 1
    assert abs(torch.randn_like(x).mean()) < 0.1
    assert torch.randperm(50, device="neuron").sort().values.cpu().tolist() == list(range(50))
    for name in ("aten::normal_", "aten::uniform_", "aten::random_"):
        assert name not in str(torch_neuronx.get_fallback_ops())


def test_random_ops_take_device_time_as_programs():
    x = torch.empty(64, 64, device="neuron")
    with op_records() as records:
        x.normal_()
    draws = [r for r in records if r.name == "neuron_rng::normal_" and r.task_kind == "neff"]
    assert len(draws) == 1
    assert draws[0].end_ns > draws[0].start_ns


def test_reduced_precision_and_odd_layouts():
    torch.manual_seed(10)
    h = torch.empty(3, 5, 7, dtype=torch.bfloat16, device="neuron").normal_()
    assert h.dtype == torch.bfloat16 and h.cpu().float().abs().max() < 8
    t = torch.zeros(6, 4, device="neuron").t()  # a transposed view: the draw lands in its elements
    t.uniform_(1.0, 2.0)
    assert 1.0 <= t.cpu().min() and t.cpu().max() < 2.0
    one = torch.empty(1, device="neuron").uniform_()
    assert 0 <= one.item() < 1
    empty = torch.empty(0, 3, device="neuron").normal_()
    assert empty.shape == (0, 3)
    d = torch.empty(100, dtype=torch.float64, device="neuron").uniform_()  # float64: on the host, same stream
    assert 0 <= d.cpu().min() and d.cpu().max() < 1


def test_a_dropout_costs_about_an_elementwise_pass():
    """The mask's words come from the hardware generator (4 words per lane per cycle), made on chip
    in the tiles that read them: a dropout of [8, 128, 256] takes about the device time of one
    elementwise op of that shape (the Philox of int32 ops it replaced took ~30x; a mask computed
    over the flat words and stored for a second pass over the input took 1.76x)."""
    x = torch.randn(8, 128, 256, device="neuron")
    y = torch.randn_like(x)
    with op_records() as records:
        torch.ops.aten.native_dropout(x, 0.1, True)
        torch.mul(x, y)
    took = {r.name.split(".")[0]: r.end_ns - r.start_ns for r in records if r.task_kind == "neff"}
    assert took["neuron_rng::dropout"] <= 1.5 * took["aten::mul"], took


def test_compiled_dropout_masks_are_eagers():
    def f(x):
        return torch.nn.functional.dropout(x * 2, 0.25, training=True)

    x = torch.randn(3, 129, 5, device="neuron")
    torch.manual_seed(21)
    eager = f(x).cpu()
    torch.manual_seed(21)
    compiled = torch.compile(f, backend="neuron", dynamic=False)(x).cpu()
    assert_equal(compiled, eager)
    assert 0.6 < float((eager != 0).float().mean()) < 0.9


@pytest.mark.parametrize("p", [0.0, 0.3, 1.0])
def test_dropout_draws_its_mask_on_the_device(p):
    torch.manual_seed(11)
    x = torch.randn(64, 64, device="neuron").requires_grad_()
    torch_neuronx.clear_op_tracking()
    out, mask = torch.ops.aten.native_dropout(x, p, True)
    out.sum().backward()
    scale = 0.0 if p == 1 else 1 / (1 - p)
    m = mask.cpu()
    assert m.dtype == torch.bool and abs(m.float().mean() - (1 - p)) < 0.03
    assert_equal(out.detach(), x.detach().cpu() * m * scale)
    assert_equal(x.grad, m.float() * scale)
    assert torch_neuronx.get_fallback_ops() == []
    torch.manual_seed(11)
    torch.randn(64, 64, device="neuron")
    assert_equal(mask, torch.ops.aten.native_dropout(x.detach(), p, True)[1].cpu())  # reproducible


def test_nn_init_on_the_device():
    torch.manual_seed(12)
    layer = torch.nn.Linear(64, 32, device="neuron")
    bound = 1 / math.sqrt(64)
    w = layer.weight.detach().cpu()
    assert w.abs().max() <= bound and w.std() > bound / 2
    w2 = torch.empty(64, 64, device="neuron")
    torch.nn.init.xavier_normal_(w2)
    assert abs(w2.cpu().std() - math.sqrt(2 / 128)) < 0.01
    torch.nn.init.trunc_normal_(w2, std=0.02, a=-0.04, b=0.04)
    assert w2.cpu().abs().max() <= 0.04
    torch.manual_seed(12)
    assert_equal(torch.nn.Linear(64, 32, device="neuron").weight.detach(), w)
    assert "aten::uniform_" not in str(torch_neuronx.get_fallback_ops())


def test_a_cpu_generator_is_refused_as_cuda_refuses_it():
    x = torch.empty(4, device="neuron")
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator but found 'cpu'"):
        x.normal_(generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator but found 'cpu'"):
        torch.randn(4, device="neuron", generator=torch.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'neuron' device type for generator"):
        torch.multinomial(torch.ones(5, device="neuron"), 2, generator=torch.Generator())


def test_bad_parameters_raise_at_the_call():
    x = torch.empty(4, device="neuron")
    with pytest.raises(RuntimeError, match="std >= 0.0"):
        x.normal_(0.0, -1.0)
    with pytest.raises(RuntimeError, match="from=3.0 > to=1.0"):
        x.uniform_(3.0, 1.0)
    with pytest.raises(RuntimeError, match=r"p to be in \[0, 1\]"):
        x.bernoulli_(1.5)
    with pytest.raises(RuntimeError, match="from=5 >= to=5"):
        x.random_(5, 5)
