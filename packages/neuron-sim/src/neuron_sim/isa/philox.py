"""The simulator's counter-based generator: Philox4x32-10 (Salmon et al., "Parallel random
numbers: as easy as 1, 2, 3", SC 2011), the bits ``RandomWords`` writes and the graph op
``random_words`` computes.

A draw is named by a 4-word state: key = (seed low, seed high), counter base = (offset low,
offset high). A draw of ``count`` words runs ``b = ceil(count / 4)`` blocks with counters
(offset low, offset high, block, 0); word ``i`` is lane ``i // b`` of block ``i % b`` (each lane's
words contiguous), so any word is computed from its index alone and draws at different offsets
never share a block.
"""

from __future__ import annotations

import numpy as np

M0, M1 = 0xD2511F53, 0xCD9E8D57  # round multipliers
W0, W1 = 0x9E3779B9, 0xBB67AE85  # Weyl key increments
ROUNDS = 10
MAX_COUNT = 4 << 32  # the block index is one 32-bit counter word
_LOW32 = np.uint64(0xFFFFFFFF)


def blocks(c0, c1, c2, c3, k0: int, k1: int) -> tuple[np.ndarray, ...]:
    """Philox4x32-10 of counters (c0..c3: uint32 arrays) under key (k0, k1): the 4 output lanes."""
    c0, c1, c2, c3 = (np.asarray(c, dtype=np.uint64) for c in (c0, c1, c2, c3))
    for r in range(ROUNDS):
        p0, p1 = c0 * np.uint64(M0), c2 * np.uint64(M1)  # < 2**64: exact in uint64
        c0, c1, c2, c3 = (p1 >> np.uint64(32)) ^ c1 ^ np.uint64(k0), p1 & _LOW32, (p0 >> np.uint64(32)) ^ c3 ^ np.uint64(k1), p0 & _LOW32
        if r < ROUNDS - 1:
            k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return tuple(c.astype(np.uint32) for c in (c0, c1, c2, c3))


def words(state, index, count: int) -> np.ndarray:
    """Words ``index`` (an int array, each in [0, count)) of the draw ``state`` (4 words: seed low,
    seed high, offset low, offset high; any integer dtype, read as its low 32 bits), as uint32."""
    k0, k1, o0, o1 = (int(w) & 0xFFFFFFFF for w in np.asarray(state).reshape(-1)[:4])
    index = np.asarray(index, dtype=np.int64)
    b = -(-count // 4)
    block, lane = index % b, index // b
    out = blocks(np.full(index.shape, o0, np.uint32), np.full(index.shape, o1, np.uint32), block.astype(np.uint32),
                 np.zeros(index.shape, np.uint32), k0, k1)
    return np.choose(lane, out) if index.size else np.zeros(index.shape, np.uint32)


__all__ = ["words", "blocks", "MAX_COUNT"]
