"""RNG: torch.Generator(device="neuron"), per-device default generators, seeding and state."""

from __future__ import annotations

import threading

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal, gate_stream


def test_device_generator():
    g = torch.Generator(device="neuron")
    assert g.device.type == "neuron"
    g.manual_seed(7)
    a = torch.randn(6, device="neuron", generator=g)
    g.manual_seed(7)
    b = torch.randn(6, device="neuron", generator=g)
    assert_equal(a, b.cpu())
    c = torch.randn(6, device="neuron", generator=g)
    assert not torch.equal(b.cpu(), c.cpu())
    # The same engine as CPU's: same seed, same numbers.
    assert_equal(a, torch.randn(6, generator=torch.Generator().manual_seed(7)))


def test_manual_seed_and_state():
    torch_neuronx.manual_seed(3)
    a = torch.rand(4, device="neuron")
    torch.neuron.manual_seed(3)
    b = torch.rand(4, device="neuron")
    assert_equal(a, b.cpu())
    state = torch.neuron.get_rng_state()
    c = torch.randint(0, 100, (8,), device="neuron")
    torch.neuron.set_rng_state(state)
    d = torch.randint(0, 100, (8,), device="neuron")
    assert_equal(c, d.cpu())
    assert torch.neuron.initial_seed() == 3
    torch.manual_seed(11)  # seeds every device generator too
    assert torch.neuron.initial_seed() == 11


def test_device_and_cpu_streams_are_independent():
    torch.manual_seed(5)
    torch.randn(100)  # consumes the CPU generator only
    a = torch.randn(3, device="neuron")
    torch.manual_seed(5)
    b = torch.randn(3, device="neuron")
    assert_equal(a, b.cpu())


def test_random_ops_and_dropout():
    torch.manual_seed(0)
    x = torch.ones(1000, device="neuron")
    y = torch.nn.functional.dropout(x, 0.5)
    kept = (y.cpu() != 0).float().mean().item()
    assert 0.4 < kept < 0.6
    torch.manual_seed(0)
    assert_equal(torch.nn.functional.dropout(torch.ones(1000), 0.5), y.cpu())
    z = torch.empty(1000, device="neuron").uniform_(2, 3)
    assert 2 <= z.min().item() and z.max().item() <= 3
    assert torch.randperm(10, device="neuron").sort().values.cpu().tolist() == list(range(10))
    assert torch.multinomial(torch.ones(5, device="neuron"), 5).sort().values.cpu().tolist() == list(range(5))


def test_random_ops_draw_in_program_order():
    # Even with the stream busy, a random op takes its numbers when it is issued: reseeding the
    # generator afterwards must not change them.
    g = torch.Generator(device="neuron").manual_seed(1)
    gate = gate_stream()
    threading.Timer(0.2, gate.set).start()  # a random op waits for the work queued before it: let it through
    a = torch.randn(6, device="neuron", generator=g)
    g.manual_seed(99)
    b = torch.randn(6, device="neuron", generator=g)
    assert_equal(a, torch.randn(6, generator=torch.Generator().manual_seed(1)))
    assert_equal(b, torch.randn(6, generator=torch.Generator().manual_seed(99)))


def test_dropout_draws_from_the_device_generator():
    torch.manual_seed(0)
    cpu_state = torch.default_generator.get_state()
    y = torch.nn.functional.dropout(torch.ones(500, device="neuron"), 0.3)
    assert torch.equal(torch.default_generator.get_state(), cpu_state)  # CPU stream untouched
    torch.neuron.manual_seed(0)
    assert_equal(torch.nn.functional.dropout(torch.ones(500, device="neuron"), 0.3), y.cpu())


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 1.0])
def test_dropout_matches_cpu_with_the_mask_drawn_on_the_host(p):
    """native_dropout: CPU's mask and output bit for bit (same seed, same stream); the mask is
    drawn on the host and uploaded, the masking and scaling (and the backward) run compiled."""
    x = torch.randn(32, 48)
    torch.manual_seed(3)
    out, mask = torch.ops.aten.native_dropout(x, p, True)
    torch.manual_seed(3)
    torch_neuronx.clear_op_tracking()
    x_dev = x.to("neuron").requires_grad_()
    out_dev, mask_dev = torch.ops.aten.native_dropout(x_dev, p, True)
    out_dev.sum().backward()
    assert_equal(out, out_dev.detach().cpu())
    assert_equal(mask, mask_dev.cpu())
    assert_equal(mask * (0.0 if p == 1 else 1 / (1 - p)), x_dev.grad.cpu())
    assert torch_neuronx.get_fallback_ops() == []
