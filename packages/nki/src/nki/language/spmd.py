"""SPMD launch grid queries: which program instance is being traced."""

from __future__ import annotations

import math

from .. import tracing


def program_id(axis: int = 0) -> int:
    ctx = tracing.current()
    if not 0 <= axis < len(ctx.grid):
        raise ctx.error("spmd.axis", f"program_id axis {axis} is outside the {len(ctx.grid)}-d launch grid {list(ctx.grid)}")
    return ctx.program_id[axis]


def num_programs(axes=None) -> int:
    ctx = tracing.current()
    if axes is None:
        return math.prod(ctx.grid)
    axes = axes if isinstance(axes, (tuple, list)) else (axes,)
    for a in axes:
        if not 0 <= a < len(ctx.grid):
            raise ctx.error("spmd.axis", f"num_programs axis {a} is outside the launch grid {list(ctx.grid)}")
    return math.prod(ctx.grid[a] for a in axes)


def program_ndim() -> int:
    ctx = tracing.current()
    return 0 if ctx.grid == (1,) else len(ctx.grid)
