"""Random numbers: a seed, uniform [0, 1) fills and dropout.

The hardware's generator (XORWOW on NC-v4) is not reproduced bit for bit: the simulator's is
numpy's PCG64, seeded by the last ``SetRngSeed`` (0 at the start of each launch), so a seed gives
the same stream on every run, and the statistics (uniform values, the drop rate) are right.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import ValidationError
from ..memory.access_pattern import AccessPattern
from .base import Instruction, check_memory, check_onchip, check_scalar_operand
from .vector import _Elementwise


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


__all__ = ["SetRngSeed", "RandomFill", "Dropout"]
