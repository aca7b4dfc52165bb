"""Shared timing helpers for the benchmarks: best-of-N wall time, and a results line format."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeats: int = 5, warmup: int = 1) -> float:
    """Minimum wall time in seconds over ``repeats`` runs (after ``warmup`` untimed runs)."""
    for _ in range(warmup):
        fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def report(name: str, figure: str, ratio: float, baseline: str, target: str) -> None:
    print(f"{name:48s} {figure:>22s}   ratio {ratio:7.2f}x vs {baseline}   target: {target}")
