"""Adaptive eager: deferred ops fused into one NEFF per run give exactly plain eager's results,
and the run is launched whenever something could observe or disturb it."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from torch_neuronx.compiled import adaptive


@pytest.fixture
def adaptive_on():
    torch_neuronx.set_adaptive_eager(True)
    yield adaptive.stats
    torch_neuronx.set_adaptive_eager(None)


def _chain(x, w):
    h = torch.tanh(x * 1.5 + 0.25)
    s = h.sum(dim=-1, keepdim=True)
    y = (h - s / h.shape[-1]) * w
    return torch.softmax(y, dim=-1), y.amax(dim=0)


def _inputs(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return torch.randn(16, 40, generator=g).to(dtype), torch.randn(40, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_fused_run_matches_plain_eager_bit_for_bit(neuron, dtype):
    x, w = _inputs(dtype)
    expected = [t.cpu() for t in _chain(x.to(neuron), w.to(neuron))]
    torch_neuronx.set_adaptive_eager(True)
    try:
        before = dict(adaptive.stats)
        got = _chain(x.to(neuron), w.to(neuron))
        assert adaptive.pending()
        got = [t.cpu() for t in got]
        assert not adaptive.pending()
        assert adaptive.stats["runs"] > before["runs"]
        assert adaptive.stats["ops"] - before["ops"] >= 6
    finally:
        torch_neuronx.set_adaptive_eager(None)
    for e, g in zip(expected, got):
        assert torch.equal(e, g)


def test_dead_intermediates_are_not_written(neuron, adaptive_on):
    x, w = _inputs()
    before = adaptive_on["dead_outputs"]
    y = _chain(x.to(neuron), w.to(neuron))[0]  # h, s and friends are gone by the flush
    y.cpu()
    assert adaptive_on["dead_outputs"] > before


def test_same_run_reuses_its_fused_neff(neuron, adaptive_on):
    x, w = _inputs()
    xs, ws = x.to(neuron), w.to(neuron)
    _chain(xs, ws)[0].cpu()
    compiles = adaptive_on["fused_compiles"]
    for _ in range(2):
        torch.testing.assert_close(_chain(xs, ws)[0].cpu(), _chain(x, w)[0], rtol=1e-5, atol=1e-6)
    assert adaptive_on["fused_compiles"] == compiles


def test_views_of_pending_results_read_the_right_elements(neuron, adaptive_on):
    x = torch.arange(48, dtype=torch.float32).reshape(6, 8)
    y = x.to(neuron) * 2
    got = (y[2:5] + 1, y.t().contiguous() - 1, y.flatten()[7:19] * 3)
    want = (x * 2)[2:5] + 1, (x * 2).t().contiguous() - 1, (x * 2).flatten()[7:19] * 3
    for g, w in zip(got, want):
        assert torch.equal(g.cpu(), w)


def test_fallback_sees_pending_results(neuron, adaptive_on):
    x = torch.randn(8, 8)
    y = x.to(neuron) + 1
    y.mul_(2)
    z = y * 3
    assert adaptive.pending()
    # A CPU-fallback op reads its inputs from the device: the run is launched first.
    values = torch.lgamma(z)  # no lowering
    assert torch.equal(values.cpu(), torch.lgamma((x + 1) * 2 * 3))


def test_synchronize_launches_pending_runs(neuron, adaptive_on):
    y = torch.ones(4, device=neuron) + 1
    assert adaptive.pending()
    torch.neuron.synchronize()
    assert not adaptive.pending()
    assert torch.equal(y.cpu(), torch.full((4,), 2.0))


def test_max_ops_ends_a_run(neuron, adaptive_on, monkeypatch):
    monkeypatch.setenv(adaptive.MAX_OPS_ENV, "3")
    before = adaptive_on["runs"]
    y = torch.ones(4, device=neuron)
    for _ in range(7):
        y = y + 1
    assert torch.equal(y.cpu(), torch.full((4,), 8.0))
    assert adaptive_on["runs"] - before == 3  # 3 + 3 ops at the limit, then the last one at .cpu()


def test_training_steps_match_plain_eager(neuron):
    from torch_neuronx.testing.gpt import GPT, GPTConfig, batches

    cfg = GPTConfig(vocab=64, d_model=32, n_layers=1, n_heads=2, seq_len=16, dropout=0.0)

    def losses():
        torch.manual_seed(0)
        model = GPT(cfg).to(neuron)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
        out = []
        for x, y in batches(cfg, 2, 3):
            loss = model(x.to(neuron), y.to(neuron))
            opt.zero_grad()
            loss.backward()
            opt.step()
            out.append(loss.item())
        return out

    plain = losses()
    torch_neuronx.set_adaptive_eager(True)
    try:
        fused = losses()
    finally:
        torch_neuronx.set_adaptive_eager(None)
    assert fused == plain


def test_in_place_ops_join_the_run(neuron, adaptive_on):
    x, w = torch.randn(8, 16), torch.randn(8, 16)
    p, q = x.to(neuron), w.to(neuron)
    runs = adaptive_on["runs"]
    y = p * 2
    y.add_(1)  # rewrites a pending result
    q.mul_(0.5).add_(y, alpha=0.25)  # in place, twice, on a tensor from outside the run
    assert adaptive.pending()
    assert torch.equal(q.cpu(), w * 0.5 + ((x * 2) + 1) * 0.25)
    assert torch.equal(y.cpu(), x * 2 + 1)
    assert adaptive_on["runs"] == runs + 1


def test_write_after_an_earlier_read_is_not_fused(neuron, adaptive_on):
    x = torch.randn(8, 16)
    p = x.to(neuron)
    a = p * 2  # reads p's memory
    p.add_(1)  # must not be written by the same launch: the run is launched first
    got = (a + p).cpu()
    assert torch.equal(got, x * 2 + (x + 1))


def test_foreach_optimizer_step_matches_plain_eager(neuron):
    torch.manual_seed(0)
    params = [torch.randn(5, 7), torch.randn(7), torch.randn(3, 3)]
    grads = [torch.randn_like(p) for p in params]

    def step():
        ps = [p.to(neuron).requires_grad_() for p in params]
        for p, g in zip(ps, grads):
            p.grad = g.to(neuron)
        opt = torch.optim.AdamW(ps, lr=0.1, foreach=True)
        for _ in range(2):
            opt.step()
        return [p.detach().cpu() for p in ps]

    plain = step()
    torch_neuronx.set_adaptive_eager(True)
    try:
        fused = step()
    finally:
        torch_neuronx.set_adaptive_eager(None)
    for a, b in zip(plain, fused):
        assert torch.equal(a, b)


def test_runs_launched_op_by_op_match_plain_eager(neuron, monkeypatch):
    """A run the timing model finds slower fused is launched op by op from its own buffers."""
    g = torch.Generator().manual_seed(3)
    x, w = torch.randn(13, 29, generator=g), torch.randn(29, generator=g)  # a run signature no other test makes
    expected = [t.cpu() for t in _chain(x.to(neuron), w.to(neuron))]
    monkeypatch.setattr(adaptive, "_worth_fusing", lambda neff, run: None)  # the timing model's verdict: slower fused
    torch_neuronx.set_adaptive_eager(True)
    try:
        y = x.to(neuron)
        y.mul_(1.0)  # an in-place op in the run too
        got = [t.cpu() for t in _chain(y, w.to(neuron))]
    finally:
        torch_neuronx.set_adaptive_eager(None)
    for e, g in zip(expected, got):
        assert torch.equal(e, g)


def test_uploads_join_the_pending_run(neuron, adaptive_on):
    """A host-to-device copy into fresh memory waits for the run's launch instead of forcing it;
    the run's ops that read the uploaded tensor see its data."""
    x = torch.randn(6, 10)
    y = x.to(neuron) * 2
    runs = adaptive_on["runs"]
    host = torch.randn(6, 10)
    uploaded = host.to(neuron)  # joins the run
    assert adaptive.pending()
    z = y + uploaded
    assert torch.equal(z.cpu(), x * 2 + host)
    assert adaptive_on["runs"] == runs + 1


def test_dropout_in_a_run_matches_plain_eager(neuron):
    x = torch.randn(16, 32)

    def run():
        torch.manual_seed(7)
        h = x.to(neuron) * 1.5
        out = torch.nn.functional.dropout(h, 0.3) + h
        return out.cpu()

    plain = run()
    torch_neuronx.set_adaptive_eager(True)
    try:
        fused = run()
    finally:
        torch_neuronx.set_adaptive_eager(None)
    assert torch.equal(plain, fused)


@pytest.mark.parametrize("index", [[], [0]], ids=["to empty", "smaller"])
def test_an_out_tensor_resized_after_a_deferred_op_read_it(neuron, adaptive_on, index):
    """fuzz-19: ``minimum`` reads v1 and is deferred; ``index_select(..., out=v1)`` then resizes
    v1 (to empty: no data pointer any more). The flush reads v1's memory as it was when the op
    joined the run (it read address 0x0 and raised)."""
    def program(x, idx):
        v1 = x.masked_fill(x > 1, 0.5)
        v2 = torch.minimum(v1, v1)
        v3 = torch.index_select(v2, 0, idx, out=v1)
        return v2, v3

    x, idx = torch.tensor([0.25, 3.0, -1.0]), torch.tensor(index, dtype=torch.long)
    expected = program(x, idx)
    got = program(x.to(neuron), idx.to(neuron))
    for e, g in zip(expected, got):
        assert torch.equal(g.cpu(), e)


def test_an_upload_into_a_tensor_resized_before_the_flush(neuron, adaptive_on):
    y = torch.ones(4, device=neuron) * 2  # a pending run
    dst = torch.empty(4, device=neuron)
    dst.copy_(torch.arange(4.0))  # joins the run: submitted just before its launch
    assert adaptive.pending()
    z = y + dst
    dst.resize_(2)  # metadata only: the upload still writes all 4 elements
    assert torch.equal(z.cpu(), torch.arange(4.0) + 2)
    assert torch.equal(dst.cpu(), torch.arange(2.0))


def test_set_adaptive_eager_switches_even_when_its_flush_raises(neuron, monkeypatch):
    def broken_compiler(*args):
        raise RuntimeError("the fused run's compile failed")

    g = torch.Generator().manual_seed(11)
    x = torch.randn(3, 17, generator=g)  # a run signature no other test makes: it is compiled
    monkeypatch.setattr(adaptive, "_compile", broken_compiler)
    torch_neuronx.set_adaptive_eager(True)
    try:
        y = (x.to(neuron) * 3).exp()
        assert adaptive.pending()
        with pytest.raises(RuntimeError, match="fused run's compile failed"):
            torch_neuronx.set_adaptive_eager(False)
        assert not adaptive.enabled()
        del y
        assert torch.equal((x.to(neuron) + 1).cpu(), x + 1)  # plain eager from here
        assert not adaptive.pending()
    finally:
        torch_neuronx.set_adaptive_eager(None)
