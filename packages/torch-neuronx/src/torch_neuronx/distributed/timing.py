"""The simulated device time of a collective: ring algorithms over NeuronLink.

A collective among ``n`` ranks moves its bytes around a ring, one neighbour to the next. Each of
its steps costs one hop's latency, and the bytes each rank sends cost ``bytes / link bandwidth``
(the usual alpha-beta model of ring collectives):

* all_reduce: reduce-scatter then all-gather, ``2(n-1)`` steps sending ``2(n-1)/n * bytes``;
* all_gather, reduce_scatter, all_to_all, gather, scatter: ``n-1`` steps,
  ``(n-1)/n * bytes`` of the whole (gathered / scattered) buffer;
* broadcast, reduce: a pipelined chain, ``n-1`` hops, ``bytes`` through each link;
* send / recv: one hop, ``bytes``;
* barrier: an all_reduce of nothing, ``2(n-1)`` hop latencies.

Link bandwidth (``nki_and_hardware.md`` 5.1 / 5.7): NeuronLink-v3 between the Trainium2 chips of a
trn2.48xlarge carries 1,024 GB/s per chip (``trn2-arch.rst``, the 4x4 2-D torus); NeuronLink-v4
on Trainium3 2.56 TB/s per chip (``trainium3.rst``). The model gives one rank its chip's figure.
Per-hop latency is a modelling assumption (no published figure): 2 us, a collective-engine
semaphore round trip plus a DMA descriptor chain (the DMA fixed cost alone is ~1.3 us,
``nki-dma-overview.rst``). Both can be overridden (``NEURON_SIM_CC_LINK_GBPS``,
``NEURON_SIM_CC_HOP_LATENCY_NS``; docs/distributed.md).

Limits: one ring whatever the topology or group (no tree, no torus dimensions, no EFA between
instances), no contention with other traffic. (The process group starts each collective at the
latest rank's arrival: ``checks``.)
"""

from __future__ import annotations

import os

LINK_GBPS_ENV = "NEURON_SIM_CC_LINK_GBPS"
HOP_LATENCY_ENV = "NEURON_SIM_CC_HOP_LATENCY_NS"

# GB/s == bytes/ns. Per chip, nki_and_hardware.md 5.7 (trn2-arch.rst) and 5.1 (trainium3.rst).
LINK_BYTES_PER_NS = {"trn2": 1024.0, "trn3": 2560.0}
DEFAULT_LINK_BYTES_PER_NS = LINK_BYTES_PER_NS["trn2"]
HOP_LATENCY_NS = 2_000.0  # assumption, see the module docstring

# collective -> (number of ring steps, fraction of the bytes each rank sends) as functions of n
_RING = {
    "all_reduce": (lambda n: 2 * (n - 1), lambda n: 2 * (n - 1) / n),
    "all_gather": (lambda n: n - 1, lambda n: (n - 1) / n),
    "reduce_scatter": (lambda n: n - 1, lambda n: (n - 1) / n),
    "all_to_all": (lambda n: n - 1, lambda n: (n - 1) / n),
    "gather": (lambda n: n - 1, lambda n: (n - 1) / n),
    "scatter": (lambda n: n - 1, lambda n: (n - 1) / n),
    "broadcast": (lambda n: n - 1, lambda n: 1.0),
    "reduce": (lambda n: n - 1, lambda n: 1.0),
    "send": (lambda n: 1, lambda n: 1.0),
    "recv": (lambda n: 1, lambda n: 1.0),
    "barrier": (lambda n: 2 * (n - 1), lambda n: 0.0),
}

ALGORITHMS = tuple(_RING)


def _env_float(name: str, default: float, *, zero_ok: bool) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not a number") from None
    if not (value >= 0 if zero_ok else value > 0) or value == float("inf"):
        raise ValueError(f"{name}={raw!r} must be a finite number {'>= 0' if zero_ok else '> 0'}")
    return value


def link_bytes_per_ns(arch_name: str | None = None) -> float:
    """One rank's ring link bandwidth in bytes/ns (GB/s) for architecture ``arch_name``."""
    default = LINK_BYTES_PER_NS.get(arch_name or "", DEFAULT_LINK_BYTES_PER_NS)
    return _env_float(LINK_GBPS_ENV, default, zero_ok=False)


def hop_latency_ns() -> float:
    return _env_float(HOP_LATENCY_ENV, HOP_LATENCY_NS, zero_ok=True)


def collective_ns(kind: str, nbytes: int, ranks: int, *, arch_name: str | None = None) -> float:
    """Simulated time of collective ``kind`` (one of ``ALGORITHMS``) moving ``nbytes`` (the
    buffer the module docstring names for it) among ``ranks`` ranks. One rank: no time."""
    if kind not in _RING:
        raise ValueError(f"no time model for collective {kind!r}; known: {list(_RING)}")
    if ranks < 1:
        raise ValueError(f"a collective needs at least one rank, got {ranks}")
    if ranks == 1:
        return 0.0
    steps, fraction = _RING[kind]
    return steps(ranks) * hop_latency_ns() + fraction(ranks) * nbytes / link_bytes_per_ns(arch_name)
