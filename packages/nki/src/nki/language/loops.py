"""Loops. Python loops and the range helpers unroll at trace time (NKI's specialization stage);
``fori_loop`` is a run-time loop."""

from __future__ import annotations

from contextlib import contextmanager


def affine_range(start, stop=None, step=1):
    """Iterations without loop-carried dependencies (unrolled; independent iterations overlap)."""
    return range(start, stop, step) if stop is not None else range(start)


def sequential_range(start, stop=None, step=1):
    """Iterations that depend on each other (unrolled in program order)."""
    return range(start, stop, step) if stop is not None else range(start)


def static_range(start, stop=None, step=1):
    """Fully unrolled at trace time."""
    return range(start, stop, step) if stop is not None else range(start)


@contextmanager
def no_reorder():
    """Program order is already the schedule order of each engine here; kept for compatibility."""
    yield
