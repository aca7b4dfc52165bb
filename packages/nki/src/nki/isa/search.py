"""nisa search instructions: max8, nc_find_index8, nc_match_replace8, sequence_bounds (NKI 0.6
signatures; the legacy keyword forms return new tiles)."""

from __future__ import annotations

from neuron_sim import isa as sim

from ..language.memory_ops import ndarray
from ..tensor import NkiTensor
from .common import _ap, _emit, _legacy_form


@_legacy_form("src")
def max8(dst: NkiTensor = None, src: NkiTensor = None, name=None, dtype=None):
    """The 8 largest values of each partition, descending (VectorE): ``dst`` is [P, 8]."""
    out = dst if dst is not None else ndarray((src.shape[0], 8), dtype or src.dtype, "sbuf")
    _emit(sim.Max8(dst=_ap(out, "dst"), src=_ap(src, "src")), name)
    return out


@_legacy_form("data", "vals", masked=("data",))  # the SDK: a mask applies to data only
def nc_find_index8(dst: NkiTensor = None, data: NkiTensor = None, vals: NkiTensor = None, name=None, dtype=None):
    """Where each of the 8 ``vals`` first occurs in each partition of ``data`` (uint32 by default;
    all ones when absent)."""
    out = dst if dst is not None else ndarray((data.shape[0], 8), dtype or "uint32", "sbuf")
    _emit(sim.FindIndex8(dst=_ap(out, "dst"), data=_ap(data, "data"), vals=_ap(vals, "vals")), name)
    return out


@_legacy_form("data", "vals", masked=("data",))
def nc_match_replace8(dst: NkiTensor = None, data: NkiTensor = None, vals: NkiTensor = None, imm=None,
                      dst_idx: NkiTensor | None = None, name=None, dtype=None):
    """``data`` with the first occurrence of each of the 8 ``vals`` replaced by ``imm``; their
    positions into ``dst_idx`` if given."""
    out = dst if dst is not None else ndarray(data.shape, dtype or data.dtype, "sbuf")
    _emit(sim.MatchReplace8(dst=_ap(out, "dst"), data=_ap(data, "data"), vals=_ap(vals, "vals"), imm=float(imm),
                            dst_idx=None if dst_idx is None else _ap(dst_idx, "dst_idx")), name)
    return out


@_legacy_form("segment_ids")
def sequence_bounds(dst: NkiTensor = None, segment_ids: NkiTensor = None, name=None, dtype=None):
    """(start, end) of the segment of each id (GpSimd): ``dst`` is [1, 2, n] for ids [1, n]."""
    n = segment_ids.size // segment_ids.shape[0]
    out = dst if dst is not None else ndarray((segment_ids.shape[0], 2, n), dtype or segment_ids.dtype, "sbuf")
    _emit(sim.SequenceBounds(dst=_ap(out, "dst"), segment_ids=_ap(segment_ids, "segment_ids")), name)
    return out
