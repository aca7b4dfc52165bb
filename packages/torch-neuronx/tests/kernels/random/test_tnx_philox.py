"""Philox4x32-10 in torch int32 ops (the host's reference): the published known-answer vectors, and
the device's hardware generator (neuron_rng::random_words) giving the same words as the host."""

from __future__ import annotations

import pytest
import torch
from torch_neuronx.kernels.random import philox

# Random123's kat_vectors for philox4x32_10: (counter c0..c3, key k0 k1) -> output words.
KNOWN_ANSWERS = [
    ((0, 0, 0, 0, 0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 6, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344, 0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("inputs, expected", KNOWN_ANSWERS)
def test_known_answers(inputs, expected):
    words = philox.philox(*(torch.tensor([philox.as_int32(v)], dtype=torch.int32) for v in inputs))
    assert [int(w) & 0xFFFFFFFF for w in words] == list(expected)


def test_mul_hi_lo_is_the_64_bit_product():
    a = torch.tensor([philox.as_int32(v) for v in (0, 1, 0xFFFFFFFF, 0x80000000, 0x12345678)], dtype=torch.int32)
    for m in (0xD2511F53, 0xCD9E8D57, 1, 7, 2**31):
        high, low = philox.mul_hi_lo(a, m)
        for x, h, lo in zip(a.tolist(), high.tolist(), low.tolist()):
            product = (x & 0xFFFFFFFF) * m
            assert (h & 0xFFFFFFFF, lo & 0xFFFFFFFF) == (product >> 32, product & 0xFFFFFFFF)


def test_the_device_computes_the_hosts_words():
    """Integer draws are exact on the device: the same words as the host's torch ops."""
    key = torch.tensor(philox.key_words(2**40 + 12345, 2**33 + 7), dtype=torch.int32)
    host = torch.ops.neuron_rng.random(torch.empty(7, 9, dtype=torch.int32), key, -(2**31), 2**32)
    device = torch.ops.neuron_rng.random(torch.empty(7, 9, dtype=torch.int32, device="neuron"), key.to("neuron"), -(2**31), 2**32)
    assert torch.equal(device.cpu(), host)
    assert len(set(host.flatten().tolist())) == 63  # full-range words: no repeats in 63


@pytest.mark.parametrize("count", [1, 3, 4, 129, 513, 4099])
def test_the_device_generator_gives_the_reference_words(count):
    key = torch.tensor(philox.key_words(2**63 + 5, 2**35 + 1), dtype=torch.int32)
    device = torch.ops.neuron_rng.random_words(key.to("neuron"), count)
    assert device.dtype == torch.int32 and device.shape == (count,)
    assert torch.equal(device.cpu(), philox.words(key, count))


@pytest.mark.parametrize("shape", [(1,), (3,), (130, 7), (2, 3, 517)], ids=str)
def test_draws_of_odd_shapes_are_the_hosts(shape):
    key = torch.tensor(philox.key_words(77, 5), dtype=torch.int32)
    host = torch.ops.neuron_rng.normal(torch.empty(shape), key, 0.0, 1.0)
    device = torch.ops.neuron_rng.normal(torch.empty(shape, device="neuron"), key.to("neuron"), 0.0, 1.0)
    assert torch.allclose(device.cpu(), host, rtol=1e-5, atol=1e-5)  # log/sqrt/cos on ScalarE: a few ulps
    x = torch.randn(shape)
    out, mask = torch.ops.neuron_rng.dropout(x.to("neuron"), key.to("neuron"), 0.4)
    assert torch.equal(mask.cpu(), torch.ops.neuron_rng.dropout(x, key, 0.4)[1])  # the mask bit for bit


# Probabilities at the edges of the threshold: 0, 1, NaN, out of range, float32's rounding of p
# (1 - 2**-25 rounds to 1.0, 1 - 2**-24 is the largest draw), below a draw's resolution (2**-24).
_PROBABILITIES = [0.0, 1.0, -0.1, 1.5, float("nan"), 0.1, 0.25, 0.5, 0.9, 1 / 3, 2 / 3, 0.123456789, 1e-7,
                  2**-24, 2**-25, 3 * 2**-26, 1e-9, 1e-30, 5e-324, 1 - 2**-24, 1 - 2**-25, 1 - 2**-26, 1 - 1e-9]


def _words_around(p: float, seed: int) -> torch.Tensor:
    """Random words (as int32) and every word whose top 24 bits are within 300 of p's threshold,
    with random low bits: where the float and the integer compares could disagree."""
    g = torch.Generator().manual_seed(seed)
    f = torch.tensor(p if p == p else 0.0, dtype=torch.float32).clamp(0, 1).item()
    k = torch.arange(-300, 301, dtype=torch.int64) + int(f * 2**24)
    k = k[(k >= 0) & (k < 2**24)]
    near = (k << 8) | torch.randint(0, 256, k.shape, generator=g)
    edges = torch.tensor([0, 255, 2**31 - 1, 2**31, 2**32 - 256, 2**32 - 1], dtype=torch.int64)
    anywhere = torch.randint(0, 2**32, (4096,), generator=g, dtype=torch.int64)
    w = torch.cat([near, edges, anywhere])
    return torch.where(w >= 2**31, w - 2**32, w).to(torch.int32)


@pytest.mark.parametrize("seed", range(8))
def test_the_word_threshold_is_the_float_compare(seed):
    """unit_below(w, p) (one unsigned compare of the word) keeps exactly the words the float
    compare unit_open_right(w) < p keeps, for every p (torch rounds p to float32 first)."""
    for p in _PROBABILITIES:
        w = _words_around(p, seed)
        assert torch.equal(philox.unit_below(w, p), philox.unit_open_right(w) < p), p


def test_the_word_threshold_over_every_draw_value():
    """All 2**24 values a draw's top bits take, for the probabilities dropout and bernoulli use."""
    w = torch.arange(2**24, dtype=torch.int64) << 8 | 0x5A
    w = torch.where(w >= 2**31, w - 2**32, w).to(torch.int32)
    for p in (0.0, 0.1, 0.9, 1 - 2**-24, 2**-24, 1.0):
        assert torch.equal(philox.unit_below(w, p), philox.unit_open_right(w) < p), p


@pytest.mark.parametrize("p", [0.0, 1e-30, 2**-24, 0.1, 0.5, 1 - 2**-24, 1.0])
def test_device_masks_are_the_float_compares(p):
    """The device's dropout and bernoulli masks are the host's float compares of the same words."""
    key = torch.tensor(philox.key_words(2**40 + 3, 17), dtype=torch.int32)
    u = philox.unit_open_right(philox.words(key, 4099))
    x = torch.randn(4099)
    _, mask = torch.ops.neuron_rng.dropout(x.to("neuron"), key.to("neuron"), p)
    assert torch.equal(mask.cpu(), u < 1.0 - p)
    drawn = torch.ops.neuron_rng.bernoulli.float(torch.empty(4099, device="neuron"), key.to("neuron"), p)
    assert torch.equal(drawn.cpu(), (u < p).float())
