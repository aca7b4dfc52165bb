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
