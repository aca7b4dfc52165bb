"""Semantics of the random number instructions (``isa/rng.py``)."""

from __future__ import annotations

import numpy as np

from ..errors import ValidationError
from ..isa import philox
from ..isa.rng import Dropout, RandomFill, RandomWords, SetRngSeed
from ..memory.access_pattern import AccessPattern
from .semantics import _affine_values, _flat_rows, handles


@handles(SetRngSeed)
def _set_rng_seed(ex, inst: SetRngSeed):
    seed = ex.read(inst.seed, "seed").reshape(-1)[0] if isinstance(inst.seed, AccessPattern) else inst.seed
    if not np.isfinite(seed):  # a float tile's value: truncated to an integer, which NaN and inf have not
        raise ValidationError("rng.seed", f"a seed read from {inst.seed.describe()} is an integer, got {seed}")
    ex.engine_state.seed(int(seed))


@handles(RandomFill)
def _random_fill(ex, inst: RandomFill):
    ex.write(inst.dst, ex.engine_state.rng.random(inst.dst.partition_count * inst.dst.free_size, dtype=np.float32))


@handles(Dropout)
def _dropout(ex, inst: Dropout):
    data = _flat_rows(ex.read(inst.src, "src"))
    if isinstance(inst.prob, AccessPattern):
        prob = ex.read_f32(inst.prob, "prob").reshape(-1, 1)
    else:
        prob = np.float32(inst.prob)
    keep = ex.engine_state.rng.random(data.shape, dtype=np.float32) >= prob
    ex.write(inst.dst, np.where(keep, data, np.zeros((), dtype=data.dtype)))


@handles(RandomWords)
def _random_words(ex, inst: RandomWords):
    state = ex.read(inst.key, "key").reshape(-1)
    index = _affine_values(inst.dst.shape, inst.pattern, inst.offset, inst.channel_multiplier)
    bits = philox.words(state, index, inst.count)
    ex.write(inst.dst, bits.view(np.int32) if inst.dst.dtype == "int32" else bits)
