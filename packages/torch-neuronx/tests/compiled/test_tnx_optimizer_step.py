"""An eager optimizer step over neuron parameters is deferred and launched fused (adaptive eager
for the step): fewer launches, plain eager's values bit for bit, and nothing deferred after it."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import op_records
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch_neuronx.compiled import adaptive

SHAPES = [(64, 33), (33,), (2, 3, 5), (1,)]


def _steps(monkeypatch, fuse: bool, make, steps: int = 3):
    monkeypatch.setenv("TORCH_NEURONX_FUSE_OPTIMIZER_STEP", "1" if fuse else "0")
    g = torch.Generator().manual_seed(0)
    params = [torch.randn(s, generator=g).to("neuron").requires_grad_() for s in SHAPES]
    grads = [[torch.randn(s, generator=g) for s in SHAPES] for _ in range(steps)]
    opt = make(params)
    launches = []
    for step in grads:
        for p, gi in zip(params, step):
            p.grad = gi.to("neuron")
        with op_records() as records:
            opt.step()
            assert not adaptive.enabled()  # nothing of the thread's later work is deferred
            torch.neuron.synchronize()
        launches.append(sum(r.task_kind == "neff" for r in records))
    return [p.detach().cpu() for p in params], launches


OPTIMIZERS = {
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1),
    "Adam_foreach_false": lambda ps: torch.optim.Adam(ps, lr=1e-2, foreach=False),
    "SGD_momentum": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    "RMSprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2),
}


@pytest.mark.parametrize("name", list(OPTIMIZERS))
def test_an_eager_step_is_fused_with_plain_eagers_values(monkeypatch, name):
    fused, fused_launches = _steps(monkeypatch, True, OPTIMIZERS[name])
    plain, plain_launches = _steps(monkeypatch, False, OPTIMIZERS[name])
    for a, b in zip(fused, plain):
        assert torch.equal(a, b)
    assert max(fused_launches[1:]) < min(plain_launches[1:]), (fused_launches, plain_launches)


def test_a_foreach_adamw_step_is_one_launch(monkeypatch):
    _, launches = _steps(monkeypatch, True, OPTIMIZERS["AdamW"])
    assert launches[1:] == [1, 1], launches


class _FailsOnce(torch.optim.SGD):
    def step(self, closure=None):
        if not getattr(self, "failed", False):
            self.failed = True
            raise RuntimeError("a step that fails")
        return super().step(closure)


def test_a_step_that_raises_defers_until_the_optimizers_next_step_ends(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_FUSE_OPTIMIZER_STEP", "1")
    p = torch.ones(4, device="neuron", requires_grad=True)
    p.grad = torch.ones(4, device="neuron")
    opt = _FailsOnce([p], lr=0.5)
    with pytest.raises(RuntimeError, match="a step that fails"):
        opt.step()
    assert adaptive.enabled()  # the step hook never saw it end (documented)
    torch.optim.SGD([p], lr=0.5).step()
    assert adaptive.enabled()  # another optimizer's step ends only its own
    assert p.cpu().tolist() == [0.5] * 4  # deferred work launches at a read, with eager's values
    opt.step()
    assert not adaptive.enabled()
    assert p.cpu().tolist() == [0.0] * 4


def test_cpu_optimizers_and_compiled_steps_are_left_alone(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_FUSE_OPTIMIZER_STEP", "1")
    p = torch.ones(3, requires_grad=True)
    p.grad = torch.ones(3)
    opt = torch.optim.AdamW([p], lr=0.1)
    seen = []
    handle = register_optimizer_step_post_hook(lambda *a: seen.append(adaptive.enabled()))
    try:
        opt.step()
    finally:
        handle.remove()
    assert seen == [False]
    q = torch.ones(3, device="neuron", requires_grad=True)
    q.grad = torch.ones(3, device="neuron")
    copt = torch.optim.AdamW([q], lr=0.1)
    torch._dynamo.reset()
    torch.compile(copt.step, backend="neuron")()
    assert not adaptive.enabled()
    expected = torch.ones(3, requires_grad=True)
    expected.grad = torch.ones(3)
    torch.optim.AdamW([expected], lr=0.1).step()
    torch.testing.assert_close(q.detach().cpu(), expected.detach())
    assert "aten::_foreach_add_" not in torch_neuronx.get_fallback_ops()
