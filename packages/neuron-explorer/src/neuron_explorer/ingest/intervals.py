"""Interval arithmetic on numpy arrays: unions of busy intervals and throughput step functions."""

from __future__ import annotations

import numpy as np


def merge_intervals(starts, ends) -> tuple[np.ndarray, np.ndarray]:
    """The union of [starts[i], ends[i]) as sorted, disjoint (starts, ends)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.size == 0:
        return starts.copy(), ends.copy()
    order = np.argsort(starts, kind="stable")
    s, reach = starts[order], np.maximum.accumulate(ends[order])
    opens = np.empty(s.size, dtype=bool)
    opens[0] = True
    opens[1:] = s[1:] > reach[:-1]  # a gap before this interval starts a new segment
    closes = np.append(opens[1:], True)
    return s[opens], reach[closes]


def grouped_busy(groups, starts, ends, ngroups: int) -> np.ndarray:
    """Length of the union of each group's intervals. Groups are moved apart in time (by more than the
    whole span) so that one merge handles them all without mixing them."""
    groups = np.asarray(groups, dtype=np.int64)
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    if starts.size == 0:
        return np.zeros(ngroups)
    origin = starts.min()
    spread = float(ends.max() - origin) + 1.0
    offset = groups * spread - origin
    s, e = merge_intervals(starts + offset, ends + offset)
    owner = np.floor(s / spread).astype(np.int64)
    return np.bincount(owner, weights=e - s, minlength=ngroups)


def throughput_series(starts, ends, nbytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The summed transfer rate of overlapping transfers as a step function: (change times, rate in
    bytes/ns from each change on, bytes moved up to each change)."""
    starts = np.asarray(starts, dtype=np.float64)
    ends = np.asarray(ends, dtype=np.float64)
    nbytes = np.asarray(nbytes, dtype=np.float64)
    if starts.size == 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    rate = nbytes / np.maximum(ends - starts, 1e-9)
    times = np.concatenate([starts, ends])
    delta = np.concatenate([rate, -rate])
    order = np.argsort(times, kind="stable")
    times, delta = times[order], delta[order]
    last = np.append(times[1:] != times[:-1], True)  # keep one sample per distinct time
    level = np.cumsum(delta)[last]
    times = times[last]
    level[np.abs(level) < 1e-9 * max(1.0, float(rate.max()))] = 0.0  # rounding residue after the last transfer ends
    moved = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))])
    return times, level, moved


def busy_before(seg_starts: np.ndarray, seg_ends: np.ndarray, times, cumulative: np.ndarray | None = None) -> np.ndarray:
    """Busy time of disjoint sorted segments before each of ``times`` (for binning a track).
    ``cumulative`` (the running sum of segment lengths, from 0) may be given precomputed."""
    times = np.asarray(times, dtype=np.float64)
    lengths = seg_ends - seg_starts
    if cumulative is None:
        cumulative = np.concatenate([[0.0], np.cumsum(lengths)])
    k = np.searchsorted(seg_starts, times, side="right")  # segments starting at or before t
    partial = np.where(k > 0, np.minimum(times - seg_starts[np.maximum(k - 1, 0)], lengths[np.maximum(k - 1, 0)]), 0.0)
    return cumulative[np.maximum(k - 1, 0)] * (k > 0) + np.maximum(partial, 0.0)
