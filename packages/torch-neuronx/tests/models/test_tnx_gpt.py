"""A 4-layer GPT (d=256, seq 128, batch 8) trains 20 steps on neuron with CPU's losses.

Ops compiled for the NeuronCore round like the hardware (fp32 math, its own reduction order), so
results match CPU to rounding, not bit for bit."""

from __future__ import annotations

import torch
from torch_neuronx.testing import GPT, GPTConfig, train_steps


def test_gpt_trains_like_cpu():
    # No dropout: neuron's generator draws other masks than CPU's for a seed (as CUDA's does).
    cfg = GPTConfig(n_layers=4, d_model=256, seq_len=128, dropout=0.0)
    cpu, _ = train_steps("cpu", steps=20, batch=8, cfg=cfg)
    neuron, _seconds = train_steps("neuron", steps=20, batch=8, cfg=cfg)
    assert len(neuron) == 20
    for step, (n, c) in enumerate(zip(neuron, cpu)):
        assert abs(n - c) <= 1e-4 * abs(c), f"step {step}: neuron {n!r} != cpu {c!r}"
    assert neuron[-1] < neuron[0]  # it learns


def test_gpt_eval_logits_equal_cpu():
    cfg = GPTConfig(n_layers=2, seq_len=32)
    torch.manual_seed(0)
    model = GPT(cfg).eval()
    idx = torch.randint(0, cfg.vocab, (2, 32))
    expected = model(idx)
    actual = model.to("neuron")(idx.to("neuron"))
    assert actual.device.type == "neuron"
    torch.testing.assert_close(actual.detach().cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
