"""Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011), written
in torch ops on int32 tensors, and the distributions drawn from its words.

``words`` is the host's reference of the device generator: the device computes the same words
with its hardware generator (``neuron_rng::random_words``, ``ops``: neuron-sim's RandomWords), and
the CPU kernel of that op is this function. The distribution functions (``unit_open_right``,
``standard_normal``...) are traced into device programs. An int32 tensor holds each uint32 word's
bits; the 32x32 -> 64-bit product Philox needs is formed from 16-bit halves (every partial product
fits 32 bits), and logical right shifts mask off the sign bits an arithmetic shift copies in.

Counter layout of a draw: key = the generator's seed (low, high word); counter = (offset low,
offset high, block index, 0). A draw of ``n`` words runs ``b = ceil(n / 4)`` blocks, and word ``i``
is lane ``i // b`` of block ``i % b``: one draw takes one offset step however many numbers it
makes, and draws at different offsets never share a block.
"""

from __future__ import annotations

import math
import struct

import torch

_M0, _M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
_ROUNDS = 10
_LOW16 = 0xFFFF
_TWO_POW_MINUS_24 = 2.0**-24
_SIGN_BIT = -(2**31)  # int32 bits 0x80000000


def as_int32(value: int) -> int:
    """The int32 with the bits of ``value``'s low 32 bits."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def key_words(seed: int, offset: int) -> list[int]:
    """The 4 int32 values a draw's program takes: seed (low, high), offset (low, high)."""
    return [as_int32(seed), as_int32(seed >> 32), as_int32(offset), as_int32(offset >> 32)]


def shift_right(x: torch.Tensor, n: int) -> torch.Tensor:
    """Logical right shift of int32 bits (torch's ``>>`` is arithmetic)."""
    return torch.bitwise_right_shift(x, torch.full_like(x, n)) & ((1 << (32 - n)) - 1)


def mul_hi_lo(a: torch.Tensor, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low words of the 64-bit product of uint32 words ``a`` and the constant ``m`` <= 2**32
    (the high word as Hacker's Delight's mulhu forms it from 16-bit halves: every partial sum
    stays below 2**32)."""
    low = a * as_int32(m)
    m_lo, m_hi = m & _LOW16, m >> 16
    a_lo, a_hi = a & _LOW16, shift_right(a, 16)
    t = a_hi * m_lo + shift_right(a_lo * m_lo, 16)
    middle = a_lo * m_hi + (t & _LOW16)
    high = a_hi * m_hi + shift_right(t, 16) + shift_right(middle, 16)
    return high, low


def philox(c0, c1, c2, c3, k0, k1):
    """Philox4x32-10 of counter (c0..c3) under key (k0, k1): int32 tensors (or ints for the key)."""
    for r in range(_ROUNDS):
        hi0, lo0 = mul_hi_lo(c0, _M0)
        hi1, lo1 = mul_hi_lo(c2, _M1)
        c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
        if r < _ROUNDS - 1:
            k0 = k0 + as_int32(_W0)
            k1 = k1 + as_int32(_W1)
    return c0, c1, c2, c3


def words(key: torch.Tensor, count: int) -> torch.Tensor:
    """``count`` random uint32 words (as int32) of the draw ``key`` (int32 [seed lo, seed hi,
    offset lo, offset hi])."""
    blocks = -(-count // 4)
    index = torch.arange(blocks, dtype=torch.int32, device=key.device)
    zero = torch.zeros_like(index)
    out = philox(zero + key[2], zero + key[3], index, zero, key[0], key[1])
    return torch.cat(out)[:count]  # lane-major: each lane's words stay contiguous (no interleaving pass)


def unit_open_right(w: torch.Tensor) -> torch.Tensor:
    """float32 in [0, 1): the top 24 bits of each word, exactly representable."""
    return shift_right(w, 8).to(torch.float32) * _TWO_POW_MINUS_24


def unit_below(w: torch.Tensor, p: float) -> torch.Tensor:
    """``unit_open_right(w) < p`` (bools, the same ones) as one unsigned compare of the words with a
    threshold, not a shift, a mask, a conversion, a multiply and a float compare per word. torch
    compares a float32 tensor with float32(p), and ``k * 2**-24 < f`` for the integer ``k = w >> 8``
    holds exactly when ``k < ceil(f * 2**24)``, i.e. when the word (unsigned) is below
    ``T = ceil(f * 2**24) * 256``. The unsigned compare is the signed one of the words with their
    sign bit flipped (``w + 2**31``, wrapping) against ``T - 2**31``: two int32 ops, exact on the
    device's integer ALU (torch has no uint32 compare on CPU, where a fallback runs this)."""
    if not p > 0.0:  # 0, negative or NaN: no word is below
        threshold = 0
    elif p >= 1.0:
        threshold = 2**32
    else:
        f = struct.unpack("f", struct.pack("f", p))[0]  # float32(p), rounded to nearest as torch rounds it
        threshold = math.ceil(f * 2.0**24) * 256  # f * 2**24 is exact in a Python float
    flipped = w + _SIGN_BIT  # the sign bit flipped: adding 2**31 wraps as xor-ing it (one int32 add)
    if threshold == 2**32:  # every word: T - 2**31 is past int32, the compare is ``<=`` its largest
        return flipped <= 2**31 - 1
    return flipped < threshold - 2**31


def unit_open_left(w: torch.Tensor) -> torch.Tensor:
    """float32 in (0, 1] (never 0: safe under log)."""
    return (shift_right(w, 8) + 1).to(torch.float32) * _TWO_POW_MINUS_24


def normal_words(count: int) -> int:
    """Words ``standard_normal`` takes for ``count`` numbers (a pair for each two)."""
    return 2 * -(-count // 2)


def standard_normal(w: torch.Tensor, count: int) -> torch.Tensor:
    """``count`` float32 N(0, 1) numbers by Box-Muller from ``normal_words(count)`` words ``w``:
    each pair of words gives two."""
    pairs = w.reshape(-1, 2)
    radius = torch.sqrt(-2.0 * torch.log(unit_open_left(pairs[:, 0])))
    angle = unit_open_right(pairs[:, 1]) * (2.0 * math.pi) - math.pi
    return torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1).reshape(-1)[:count]


def below(w: torch.Tensor, bound: int) -> torch.Tensor:
    """[0, bound) for 0 < ``bound`` <= 2**32, as uint32 bits: the high word of ``w * bound``
    (Lemire's multiply-shift; its bias is at most bound / 2**32)."""
    return mul_hi_lo(w, bound)[0]
