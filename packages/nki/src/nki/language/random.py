"""Random numbers in kernels: nl.rand, nl.random_seed, nl.dropout (see neuron_sim.isa.rng for
the generator: deterministic per seed, not the hardware's bits)."""

from __future__ import annotations

from neuron_sim.isa import Dropout, RandomFill, SetRngSeed

from .. import tracing
from ..indexing import folds_constant_mask
from ..tensor import NkiTensor
from .memory_ops import apply_mask, inherit_window, ndarray


def rand(shape, dtype="float32", buffer="sbuf", name: str = "") -> NkiTensor:
    """A new tile of values drawn uniformly from [0, 1)."""
    out = ndarray(shape, dtype, buffer, name)
    tracing.current().emit(RandomFill(dst=out.access_pattern()))
    return out


def random_seed(seed, mask=None) -> None:
    """Seed the generator: the same seed gives the same values from nl.rand / dropout after it."""
    ctx = tracing.current()
    if mask is not None:
        raise ctx.error("random_seed.mask", "nl.random_seed seeds the one generator of the engines: it takes no mask")
    if isinstance(seed, NkiTensor):
        ctx.emit(SetRngSeed(seed=seed.access_pattern()))
    else:
        ctx.emit(SetRngSeed(seed=seed))


@folds_constant_mask
def dropout(x: NkiTensor, rate, dtype=None, mask=None) -> NkiTensor:
    """``x`` with each element zeroed with probability ``rate`` (a number or a [P, 1] tile)."""
    (x,) = apply_mask(mask, x)
    out = ndarray(x.shape, dtype or x.dtype, "sbuf")
    prob = rate.reshape((rate.shape[0], 1)).access_pattern() if isinstance(rate, NkiTensor) else float(rate)
    tracing.current().emit(Dropout(dst=out.access_pattern(), src=x.access_pattern(), prob=prob))
    inherit_window(out, x)  # a masked result covers the window its input covers
    return out
