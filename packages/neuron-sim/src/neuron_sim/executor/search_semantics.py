"""Semantics of the search instructions (``isa/search.py``)."""

from __future__ import annotations

import numpy as np

from .. import dtypes
from ..isa.search import FindIndex8, MatchReplace8, Max8, SequenceBounds
from .semantics import _flat_rows, handles


@handles(Max8)
def _max8(ex, inst: Max8):
    values = _flat_rows(ex.read_f32(inst.src, "src"))
    ex.write(inst.dst, -np.sort(-values, axis=1)[:, :8])


def _all_ones(dtype: str) -> int:
    return int(np.iinfo(dtypes.to_numpy(dtype)).max)


@handles(FindIndex8)
def _find_index8(ex, inst: FindIndex8):
    data = _flat_rows(ex.read_f32(inst.data, "data"))
    vals = _flat_rows(ex.read_f32(inst.vals, "vals"))
    out = np.full(vals.shape, _all_ones(inst.dst.dtype), dtype=np.int64)
    for p in range(data.shape[0]):
        used: dict[float, int] = {}
        for j, v in enumerate(vals[p]):
            hits = np.flatnonzero(data[p] == v)
            k = used.get(float(v), 0)  # duplicate vals take the next occurrence, in ascending order
            if k < len(hits):
                out[p, j] = hits[k]
            used[float(v)] = k + 1
    ex.write(inst.dst, out.astype(dtypes.to_numpy(inst.dst.dtype)))


@handles(MatchReplace8)
def _match_replace8(ex, inst: MatchReplace8):
    data = _flat_rows(ex.read_f32(inst.data, "data")).copy()
    vals = _flat_rows(ex.read_f32(inst.vals, "vals"))
    index = np.full(vals.shape, -1, dtype=np.int64)
    for p in range(data.shape[0]):
        taken = np.zeros(data.shape[1], dtype=bool)
        for j in range(7, -1, -1):  # vals are matched last to first: duplicates pair with matches in reverse
            hits = np.flatnonzero((data[p] == vals[p, j]) & ~taken)
            if hits.size:
                taken[hits[0]] = True
                index[p, j] = hits[0]
        data[p, taken] = np.float32(inst.imm)
    ex.write(inst.dst, data)
    if inst.dst_idx is not None:
        fill = _all_ones(inst.dst_idx.dtype) if dtypes.is_int(inst.dst_idx.dtype) else -1
        ex.write(inst.dst_idx, np.where(index >= 0, index, fill).astype(np.float64))


@handles(SequenceBounds)
def _sequence_bounds(ex, inst: SequenceBounds):
    ids = ex.read_f32(inst.segment_ids, "segment_ids").reshape(-1)
    n = ids.size
    start, end = np.empty(n, dtype=np.float64), np.empty(n, dtype=np.float64)
    for i in range(n):  # a segment is a run of equal ids; id 0 is padding
        start[i] = n if ids[i] == 0 else (start[i - 1] if i and ids[i] == ids[i - 1] else i)
    for i in range(n - 1, -1, -1):
        end[i] = -1 if ids[i] == 0 else (end[i + 1] if i < n - 1 and ids[i] == ids[i + 1] else i + 1)
    ex.write(inst.dst, np.concatenate([start, end]))
