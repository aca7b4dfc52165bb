"""State the engines keep between instructions, besides SBUF and PSUM: VectorE's accumulator
registers (one fp32 value per partition) and the random number generator."""

from __future__ import annotations

import numpy as np

DEFAULT_RNG_SEED = 0


class EngineState:
    def __init__(self, partitions: int):
        self.vector_acc = np.full(partitions, np.nan, dtype=np.float32)
        self.rng = np.random.Generator(np.random.PCG64(DEFAULT_RNG_SEED))

    def reset(self) -> None:
        """Launch start: the accumulators hold nothing defined, the generator its default seed."""
        self.vector_acc.fill(np.nan)
        self.seed(DEFAULT_RNG_SEED)

    def seed(self, value: int) -> None:
        self.rng = np.random.Generator(np.random.PCG64(int(value) & 0xFFFFFFFF))
