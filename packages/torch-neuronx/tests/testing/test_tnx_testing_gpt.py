"""torch_neuronx.testing's reference GPT (the demo's model) trains on neuron with CPU's losses."""

from __future__ import annotations

from torch_neuronx.testing import GPTConfig, train_steps


def test_reference_gpt_matches_cpu():
    cfg = GPTConfig(n_layers=2, seq_len=64)
    cpu, _ = train_steps("cpu", steps=5, batch=4, cfg=cfg)
    neuron, seconds = train_steps("neuron", steps=5, batch=4, cfg=cfg)
    assert seconds > 0
    for step, (n, c) in enumerate(zip(neuron, cpu)):
        assert abs(n - c) <= 1e-6 * abs(c), f"step {step}: neuron {n!r} != cpu {c!r}"
