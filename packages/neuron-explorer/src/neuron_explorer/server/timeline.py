"""Timeline windows for the UI: rows of each track in a time window, or the track's busy fraction per
pixel bin when the window holds more rows than a browser should draw. Either way the answer is
small, so a million-instruction profile paints as fast as a small one."""

from __future__ import annotations

import numpy as np

from ..ingest.intervals import busy_before, merge_intervals

DETAIL_ROWS = 6000  # rows drawn one by one across all tracks of a window; beyond that, bins


class TimelineIndex:
    """Rows grouped by track, sorted by start (``order`` maps sorted positions to the caller's rows;
    ``columns`` stay in the caller's order: ids, labels, ... are looked up through ``order``)."""

    def __init__(self, track_of_row: np.ndarray, track_names: list, starts: np.ndarray, ends: np.ndarray,
                 columns: dict[str, np.ndarray]):
        self.track_names = list(track_names)
        self.order = _track_then_start_order(track_of_row, starts)
        self.starts = starts[self.order]
        self.ends = ends[self.order]
        self.columns = columns
        bounds = np.searchsorted(track_of_row[self.order], np.arange(len(track_names) + 1))
        self.bounds = bounds
        self.max_duration = np.zeros(len(track_names))
        self.segments = []
        for t in range(len(track_names)):
            lo, hi = bounds[t], bounds[t + 1]
            if hi > lo:
                self.max_duration[t] = float((self.ends[lo:hi] - self.starts[lo:hi]).max())
            seg_starts, seg_ends = merge_intervals(self.starts[lo:hi], self.ends[lo:hi])
            self.segments.append((seg_starts, seg_ends, np.concatenate([[0.0], np.cumsum(seg_ends - seg_starts)])))
        self.start = float(self.starts.min()) if len(self.starts) else 0.0
        self.end = float(self.ends.max()) if len(self.ends) else 0.0

    def column(self, name: str, positions: np.ndarray) -> np.ndarray:
        """Values of a column at sorted positions."""
        return self.columns[name][self.order[positions]]

    def rows(self, t: int) -> int:
        return int(self.bounds[t + 1] - self.bounds[t])

    def _span(self, t: int, a: float, b: float) -> np.ndarray:
        """Indices of the rows of track ``t`` overlapping [a, b)."""
        lo, hi = self.bounds[t], self.bounds[t + 1]
        first = lo + np.searchsorted(self.starts[lo:hi], a - self.max_duration[t], side="left")
        last = lo + np.searchsorted(self.starts[lo:hi], b, side="left")
        idx = np.arange(first, last)
        return idx[self.ends[idx] > a]

    def window(self, a: float, b: float, bins: int, tracks: list[int] | None = None, detail_rows: int | None = None,
               mark: np.ndarray | None = None) -> dict:
        """Per track: ``rows`` (index arrays into the sorted rows) when the window is sparse enough,
        else ``busy`` (fraction of each of ``bins`` bins the track was busy)."""
        tracks = list(range(len(self.track_names))) if tracks is None else tracks
        detail_rows = DETAIL_ROWS if detail_rows is None else detail_rows
        spans = {t: self._span(t, a, b) for t in tracks}
        total = sum(len(s) for s in spans.values())
        out = {"start": a, "end": b, "bins": bins, "tracks": []}
        edges = np.linspace(a, b, bins + 1)
        for t in tracks:
            entry = {"track": t}
            if total <= detail_rows:
                entry["rows"] = spans[t]
            else:
                s, e, cumulative = self.segments[t]
                busy = np.diff(busy_before(s, e, edges, cumulative)) / max((b - a) / bins, 1e-9)
                entry["busy"] = np.clip(busy, 0.0, 1.0)
                if mark is not None:
                    idx = spans[t]
                    hit = idx[mark[self.order[idx]]]
                    entry["marked_bins"] = np.unique(np.clip(((self.starts[hit] - a) / (b - a) * bins).astype(int), 0,
                                                             bins - 1)) if len(hit) else np.zeros(0, int)
            out["tracks"].append(entry)
        out["detail"] = total <= detail_rows
        return out


def _track_then_start_order(tracks: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """argsort by (track, start): one sort of an int64 key when it fits, else a lexsort."""
    if not len(starts):
        return np.zeros(0, np.int64)
    low = float(starts.min())
    span = int(starts.max() - low) + 1
    if span * (int(tracks.max()) + 1) < 2**62:
        return np.argsort(tracks.astype(np.int64) * span + (starts - low).astype(np.int64), kind="stable")
    return np.lexsort((starts, tracks))
