"""Random numbers: a seed, uniform [0, 1) fills, dropout, and counter-based random words.

The hardware's generator (XORWOW on NC-v4: 4 x 32-bit words per lane per cycle, its state loaded
from a tile by ``rand_set_state``) is not reproduced bit for bit. The simulator has two:

* ``RandomWords`` writes the words of a counter-based generator whose state (key and counter base)
  it reads from a tile: Philox4x32-10 (``philox.py``). A word depends only on the state and its
  index, so the same draw gives the same bits on any engine, executor or tiling, and a framework
  can compute the identical words on the host. It is timed as the hardware generator runs.
* ``SetRngSeed`` / ``RandomFill`` / ``Dropout`` use a seeded stream: numpy's PCG64, seeded by the
  last ``SetRngSeed`` (0 at the start of each launch), so a seed gives the same stream on every
  run, and the statistics (uniform values, the drop rate) are right.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from . import philox
from .base import Instruction, check_memory, check_onchip, check_scalar_operand
from .gpsimd import Pattern, _check_pattern
from .vector import _Elementwise

# The hardware generator's rate (NC-v4): 4 x 32-bit words per lane per cycle.
WORDS_PER_CYCLE = 4


@dataclass(kw_only=True, eq=False)
class SetRngSeed(Instruction):
    """Seed the engines' random number generator (an immediate or a [1, 1] tile read at run time)."""

    opcode = "RNG_SEED"
    engines = ("vector", "gpsimd")
    seed: int | AccessPattern

    def reads(self):
        return [self.seed] if isinstance(self.seed, AccessPattern) else []

    def _validate(self, arch):
        if isinstance(self.seed, AccessPattern):
            check_onchip(self.seed, arch, "seed")
            check_memory(self.seed, self.engine, "seed", writing=False)
            if self.seed.partition_count * self.seed.free_size != 1:
                raise ValidationError("rng.seed", f"a seed tile holds one value, got {self.seed.describe()}")
        elif isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValidationError("rng.seed", f"a seed is a 32-bit integer, got {self.seed!r}")


@dataclass(kw_only=True, eq=False)
class RandomFill(_Elementwise):
    """``dst`` = values drawn uniformly from [0, 1), rounded to ``dst.dtype``."""

    opcode = "RANDOM_FILL"
    engines = ("vector", "gpsimd")
    dst: AccessPattern

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst)
        if not dtypes.is_float(self.dst.dtype):
            raise ValidationError("rng.dtype", f"random values fill a float tile, got {self.dst.dtype}")


@dataclass(kw_only=True, eq=False)
class Dropout(_Elementwise):
    """``dst = src`` with each element replaced by 0 with probability ``prob`` (an immediate, or a
    [P, 1] tile of one probability per partition)."""

    opcode = "DROPOUT"
    engines = ("vector",)
    dst: AccessPattern
    src: AccessPattern
    prob: float | AccessPattern

    def reads(self):
        return [self.src] + ([self.prob] if isinstance(self.prob, AccessPattern) else [])

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        self._check_io(arch, self.dst, (self.src, "src"))
        if dtypes.dtype_name(self.dst.dtype) != dtypes.dtype_name(self.src.dtype):
            raise ValidationError("dropout.dtype", f"dropout keeps the dtype: src {self.src.dtype}, dst {self.dst.dtype}")
        check_scalar_operand(self.prob, self.src, arch, "prob", self.engine)
        if isinstance(self.prob, AccessPattern) and dtypes.is_int(self.src.dtype) and dtypes.dtype_name(self.prob.dtype) != "float32":
            raise ValidationError("dropout.prob_dtype", f"the probability of integer data is float32, got {self.prob.dtype}")
        if not isinstance(self.prob, AccessPattern) and not 0.0 <= float(self.prob) <= 1.0:
            raise ValidationError("dropout.prob", f"a drop probability is in [0, 1], got {self.prob}")


@dataclass(kw_only=True, eq=False)
class RandomWords(Instruction):
    """``dst[p, i...]`` = word ``k`` of the draw whose state is the ``key`` tile, with ``k`` =
    ``offset + p * channel_multiplier + sum(step_j * i_j)`` (Iota's index) and ``count`` the
    draw's word count (it fixes the counter layout, ``philox.py``).

    ``key`` is a [1, 4] tile of 32-bit integers (seed low, seed high, counter offset low, high),
    the state every lane's generator is loaded with; ``dst`` is int32 or uint32 (the words' bits).
    """

    opcode = "RANDOM_WORDS"
    engines = ("vector", "gpsimd")
    dst: AccessPattern
    key: AccessPattern
    count: int
    pattern: Pattern
    offset: int = 0
    channel_multiplier: int = 0

    def reads(self):
        return [self.key]

    def writes(self):
        return [self.dst]

    def _validate(self, arch):
        check_onchip(self.dst, arch, "dst")
        check_memory(self.dst, self.engine, "dst", writing=True)
        check_onchip(self.key, arch, "key")
        check_memory(self.key, self.engine, "key", writing=False)
        for ap, role in ((self.dst, "dst"), (self.key, "key")):
            if dtypes.dtype_name(ap.dtype) not in ("int32", "uint32"):
                raise ValidationError("rng.words_dtype", f"random words' {role} is an int32 or uint32 tile (the bits), got {ap.dtype}")
        if self.key.partition_count != 1 or self.key.free_size != 4:
            raise ValidationError("rng.key", f"a generator state is a [1, 4] tile (seed lo, hi, offset lo, hi), got {self.key.describe()}")
        if isinstance(self.count, bool) or not isinstance(self.count, int) or not 1 <= self.count <= philox.MAX_COUNT:
            raise ValidationError("rng.count", f"a draw's word count is an integer in [1, {philox.MAX_COUNT}], got {self.count!r}")
        _check_pattern(self.pattern, self.dst, "random_words")
        lo, hi = self._index_bounds()
        if lo < 0 or hi >= self.count:
            raise ValidationError("rng.index", f"word indices {lo}..{hi} are outside the draw's {self.count} words")

    def _index_bounds(self) -> tuple[int, int]:
        lo = hi = self.offset
        for step, n in ((self.channel_multiplier, self.dst.partition_count), *self.pattern):
            reach = step * (n - 1)
            lo, hi = lo + min(0, reach), hi + max(0, reach)
        return lo, hi


__all__ = ["SetRngSeed", "RandomFill", "Dropout", "RandomWords", "WORDS_PER_CYCLE"]
