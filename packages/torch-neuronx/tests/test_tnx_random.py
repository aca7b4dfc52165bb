"""RNG: torch.Generator(device="neuron"), per-device default generators, seeding and state (the
draws themselves: tests/kernels/random)."""

from __future__ import annotations

import pytest
import torch
import torch_neuronx
from tnx_helpers import assert_equal, held_stream


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
    assert_equal(torch.nn.functional.dropout(torch.ones(1000, device="neuron"), 0.5), y.cpu())
    z = torch.empty(1000, device="neuron").uniform_(2, 3)
    assert 2 <= z.min().item() and z.max().item() <= 3
    assert torch.randperm(10, device="neuron").sort().values.cpu().tolist() == list(range(10))
    assert torch.multinomial(torch.ones(5, device="neuron"), 5).sort().values.cpu().tolist() == list(range(5))


def test_random_ops_draw_in_program_order():
    # Even with the stream busy, a random op takes its numbers when it is issued: reseeding the
    # generator afterwards must not change them, and reading the state does not wait.
    g = torch.Generator(device="neuron").manual_seed(1)
    torch.randn(6, device="neuron", generator=g)  # compiled before the stream is held
    with held_stream():
        g.manual_seed(1)
        a = torch.randn(6, device="neuron", generator=g)
        g.manual_seed(99)
        b = torch.randn(6, device="neuron", generator=g)
        state = torch.neuron.get_rng_state()
        assert not torch.neuron.current_stream().query()  # nothing ran yet
    assert_equal(a, torch.randn(6, device="neuron", generator=torch.Generator(device="neuron").manual_seed(1)).cpu())
    assert_equal(b, torch.randn(6, device="neuron", generator=torch.Generator(device="neuron").manual_seed(99)).cpu())
    assert state.dtype == torch.uint8 and state.numel() == 16


def test_dropout_draws_from_the_device_generator():
    torch.manual_seed(0)
    cpu_state = torch.default_generator.get_state()
    y = torch.nn.functional.dropout(torch.ones(500, device="neuron"), 0.3)
    assert torch.equal(torch.default_generator.get_state(), cpu_state)  # CPU stream untouched
    torch.neuron.manual_seed(0)
    assert_equal(torch.nn.functional.dropout(torch.ones(500, device="neuron"), 0.3), y.cpu())


def test_rng_state_is_seed_and_offset():
    g = torch.Generator(device="neuron").manual_seed(2**40 + 3)
    torch.rand(5, device="neuron", generator=g)
    state = g.get_state()
    assert state.dtype == torch.uint8 and state.numel() == 16
    assert int.from_bytes(bytes(state[:8].tolist()), "little") == 2**40 + 3
    assert int.from_bytes(bytes(state[8:].tolist()), "little") == 1 == g.get_offset()
    h = torch.Generator(device="neuron")
    h.set_state(state)
    assert h.initial_seed() == 2**40 + 3 and h.get_offset() == 1
    assert_equal(torch.rand(5, device="neuron", generator=g), torch.rand(5, device="neuron", generator=h).cpu())


def test_all_devices_states_and_fork_rng():
    states = torch.neuron.get_rng_state_all()
    assert len(states) == torch.neuron.device_count() and all(s.numel() == 16 for s in states)
    a = torch.rand(5, device="neuron")
    torch.neuron.set_rng_state_all(states)
    assert_equal(a, torch.rand(5, device="neuron").cpu())
    torch.neuron.set_rng_state_all(states)
    with torch.random.fork_rng(devices=[0], device_type="neuron"):
        torch.rand(5, device="neuron")  # drawn inside: the state is restored on exit
    assert_equal(a, torch.rand(5, device="neuron").cpu())


def test_a_foreign_or_malformed_state_is_refused():
    with pytest.raises(RuntimeError, match="16 bytes.*got 5056 bytes - that is a CPU generator's state"):
        torch.neuron.set_rng_state(torch.get_rng_state())
    with pytest.raises(RuntimeError, match="16 bytes.*got 8 bytes"):
        torch.neuron.set_rng_state(torch.zeros(8, dtype=torch.uint8))
    with pytest.raises(TypeError, match="RNG state must be a torch.ByteTensor"):
        torch.neuron.set_rng_state(torch.zeros(16, dtype=torch.float32))
    with pytest.raises(RuntimeError, match="RNG state size to be 16"):
        torch.Generator().set_state(torch.neuron.get_rng_state())  # and the other way round: CPU refuses ours
