"""nisa random instructions: dropout and set_rng_seed."""

from __future__ import annotations

from neuron_sim import isa as sim

from ..tensor import NkiTensor
from .common import _ap, _dst_or_new, _emit, _legacy_form, _operand


@_legacy_form("data")
def dropout(dst: NkiTensor = None, data: NkiTensor = None, prob=None, name=None, dtype=None):
    """``data`` with each element zeroed with probability ``prob`` (VectorE)."""
    out = _dst_or_new(dst, data, dtype)
    _emit(sim.Dropout(dst=_ap(out, "dst"), src=_ap(data, "data"), prob=_operand(prob)), name)
    return out


def set_rng_seed(src_seeds: NkiTensor, name=None):
    """Seed the generator from a [1, 1] tile."""
    return _emit(sim.SetRngSeed(seed=_ap(src_seeds, "src_seeds")), name)
