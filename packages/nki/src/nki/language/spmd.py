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


class nc:  # noqa: N801 - NKI's name
    """A launch-grid dim spread over physical NeuronCores (legacy): ``kernel[nl.nc(2), 2]`` runs
    instances ``[0, *]`` on core 0 and ``[1, *]`` on core 1; ``nl.nc(2) * 2`` is
    ``nl.spmd_dim(nl.nc(2), 2)``."""

    def __init__(self, size: int):
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise ValueError(f"nl.nc takes a positive int number of physical cores, got {size!r}")
        self.size = size

    def __mul__(self, other) -> spmd_dim:
        return spmd_dim(self, other)

    def __rmul__(self, other) -> spmd_dim:
        return spmd_dim(other, self)

    def __repr__(self) -> str:
        return f"nl.nc({self.size})"


class spmd_dim:  # noqa: N801 - NKI's name
    """A launch-grid dim made of sub-dims, outermost first, one of which may be ``nl.nc(n)``:
    ``nl.spmd_dim(nl.nc(2), 2)`` (size 4) puts instances 0-1 on core 0 and 2-3 on core 1,
    ``nl.spmd_dim(2, nl.nc(2))`` puts the even instances on core 0 and the odd on core 1."""

    def __init__(self, *parts):
        if not parts or any(not isinstance(p, nc) and (isinstance(p, bool) or not isinstance(p, int) or p <= 0)
                            for p in parts):
            raise ValueError(f"nl.spmd_dim takes positive ints and at most one nl.nc, got {parts!r}")
        cores = [i for i, p in enumerate(parts) if isinstance(p, nc)]
        if len(cores) > 1:
            raise ValueError(f"nl.spmd_dim takes at most one nl.nc, got {parts!r}")
        self.parts = tuple(p.size if isinstance(p, nc) else p for p in parts)
        self.nc_index = cores[0] if cores else None
        self.size = math.prod(self.parts)

    def core_of(self, index: int) -> int:
        """The physical core instance ``index`` of this dim runs on (0 without an nl.nc)."""
        if self.nc_index is None:
            return 0
        digits = []
        for part in reversed(self.parts):
            index, digit = divmod(index, part)
            digits.append(digit)
        return digits[::-1][self.nc_index]

    def key(self) -> tuple:
        return (self.parts, self.nc_index)

    def __repr__(self) -> str:
        return f"nl.spmd_dim({', '.join(str(p) for p in self.parts)}; nc at {self.nc_index})"


def grid_layout(key) -> tuple[tuple[int, ...], tuple]:
    """(sizes, per-dim spmd_dim or None) of a launch grid ``kernel[...]``."""
    dims = key if isinstance(key, tuple) else (key,)
    sizes, layout = [], []
    for d in dims:
        if isinstance(d, nc):
            d = spmd_dim(d)
        if isinstance(d, spmd_dim):
            sizes.append(d.size)
            layout.append(d)
        elif isinstance(d, int) and not isinstance(d, bool) and d > 0:
            sizes.append(d)
            layout.append(None)
        else:
            raise ValueError(f"a launch grid is positive ints (or nl.nc / nl.spmd_dim dims), got {key!r}")
    return tuple(sizes), tuple(layout)


def physical_core(program_id: tuple[int, ...], layout: tuple) -> int:
    """The physical core an SPMD instance runs on: the nl.nc digits of its grid position."""
    core = 0
    for index, dim in zip(program_id, layout):
        if dim is not None and dim.nc_index is not None:
            core = core * dim.parts[dim.nc_index] + dim.core_of(index)
    return core
