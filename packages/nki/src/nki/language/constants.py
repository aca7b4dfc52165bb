"""nki.language.constants: sizes kernels compute layouts with."""

from __future__ import annotations

from neuron_sim import dtypes as _dtypes

# Alignment of a manual allocation's byte address (``address=`` / ``ncc.sbuf.alloc``), in bytes;
# the same values as ``nl.tile_size.sbuf_min_align`` / ``psum_min_align``.
sbuf_min_align = 1
psum_min_align = 4


def sizeinbytes(dtype) -> int:
    """Bytes of one element of ``dtype``."""
    return _dtypes.itemsize(dtype)
