"""nki.isa.constants: the enums instructions take (engines, DMA and matmul modes, reduce commands)."""

from __future__ import annotations

from enum import Enum


class engine(Enum):  # noqa: N801 - NKI's names
    unknown = 0
    tensor = 1
    scalar = 2
    gpsimd = 3
    dma = 4
    vector = 5
    sync = 6


tensor_engine, scalar_engine, gpsimd_engine, vector_engine, unknown_engine = (
    engine.tensor, engine.scalar, engine.gpsimd, engine.vector, engine.unknown)


class dge_mode(Enum):  # noqa: N801
    unknown = 0
    swdge = 1
    hwdge = 2
    none = 3


class oob_mode(Enum):  # noqa: N801
    error = 0
    skip = 1


class matmul_perf_mode(Enum):  # noqa: N801
    none = "none"
    double_row = "double_row"


class nc_version(Enum):  # noqa: N801
    """NeuronCore generations, ordered: kernels branch on ``nisa.get_nc_version() >= nc_version.gen3``."""

    gen2 = 2
    gen3 = 3
    gen4 = 4

    def _order(self, other):
        if not isinstance(other, nc_version):
            return NotImplemented
        return self.value - other.value

    def __lt__(self, other):
        d = self._order(other)
        return d if d is NotImplemented else d < 0

    def __le__(self, other):
        d = self._order(other)
        return d if d is NotImplemented else d <= 0

    def __gt__(self, other):
        d = self._order(other)
        return d if d is NotImplemented else d > 0

    def __ge__(self, other):
        d = self._order(other)
        return d if d is NotImplemented else d >= 0


class reduce_cmd(Enum):  # noqa: N801
    idle = 0
    reset = 1
    reduce = 2
    reset_reduce = 3
    load_reduce = 4


class dma_engine(Enum):  # noqa: N801
    """Which DMA hardware moves the data of a ``sendrecv`` / DMA: the core's DMA engines or GpSimd's."""

    dma = 0
    gpsimd_dma = 1
