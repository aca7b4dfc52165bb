"""Simulated device time of work that is not a compiled NEFF: CPU fallback and copies.

A CPU-fallback op on a real NeuronCore copies its operands to the host over the host link, runs
there, and copies the results back; the device timeline shows that round trip. Host-link figures
are modelling assumptions (documented in docs/environment.md's neighbour, docs/fallback.md):
PCIe Gen5 x16 at a practical 32 GB/s per direction and a fixed 20 us runtime round trip.
"""

from __future__ import annotations

HOST_LINK_BYTES_PER_NS = 32.0  # assumption: practical PCIe Gen5 x16 per direction
FALLBACK_ROUND_TRIP_NS = 20_000.0  # assumption: runtime copy-out / dispatch / copy-in overhead
COPY_FIXED_NS = 2_000.0  # assumption: one DMA descriptor chain to or from the host


def fallback_ns(bytes_in: int, bytes_out: int) -> float:
    return FALLBACK_ROUND_TRIP_NS + (bytes_in + bytes_out) / HOST_LINK_BYTES_PER_NS


def host_copy_ns(nbytes: int) -> float:
    """Host <-> device copy over the host link."""
    return COPY_FIXED_NS + nbytes / HOST_LINK_BYTES_PER_NS


def device_copy_ns(nbytes: int, dma_bytes_per_ns: float) -> float:
    """Device-to-device copy on the core's DMA engines (read + write of every byte)."""
    return COPY_FIXED_NS + 2 * nbytes / dma_bytes_per_ns
