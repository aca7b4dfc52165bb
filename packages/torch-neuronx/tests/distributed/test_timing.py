"""The ring model of a collective's device time (torch_neuronx.distributed.timing)."""

from __future__ import annotations

import pytest
from torch_neuronx.distributed import timing
from torch_neuronx.distributed.timing import HOP_LATENCY_NS, collective_ns

MIB = 1 << 20


def test_ring_all_reduce_is_two_n_minus_one_over_n_bytes_plus_hops():
    for n in (2, 4, 8, 64):
        want = 2 * (n - 1) * HOP_LATENCY_NS + 2 * (n - 1) / n * 256 * MIB / 1024.0  # NeuronLink-v3: 1,024 GB/s
        assert collective_ns("all_reduce", 256 * MIB, n, arch_name="trn2") == pytest.approx(want, rel=1e-12)


def test_all_gather_and_reduce_scatter_are_half_an_all_reduce_of_bandwidth():
    n, size = 8, 64 * MIB
    ar = collective_ns("all_reduce", size, n) - 2 * (n - 1) * HOP_LATENCY_NS
    for kind in ("all_gather", "reduce_scatter", "all_to_all"):
        assert collective_ns(kind, size, n) - (n - 1) * HOP_LATENCY_NS == pytest.approx(ar / 2)


def test_point_to_point_broadcast_barrier_and_one_rank():
    assert collective_ns("send", 1024, 2) == pytest.approx(HOP_LATENCY_NS + 1.0)
    assert collective_ns("broadcast", 4096, 4) == pytest.approx(3 * HOP_LATENCY_NS + 4.0)
    assert collective_ns("barrier", 0, 4) == pytest.approx(6 * HOP_LATENCY_NS)
    assert collective_ns("all_reduce", 1 << 30, 1) == 0.0


def test_trainium3_links_are_faster():
    assert collective_ns("all_reduce", 256 * MIB, 8, arch_name="trn3") < collective_ns("all_reduce", 256 * MIB, 8, arch_name="trn2")


def test_the_link_figures_can_be_overridden(monkeypatch):
    monkeypatch.setenv(timing.LINK_GBPS_ENV, "512")
    monkeypatch.setenv(timing.HOP_LATENCY_ENV, "0")
    assert collective_ns("all_reduce", 1024, 2) == pytest.approx(1024 / 512)
    monkeypatch.setenv(timing.LINK_GBPS_ENV, "0")
    with pytest.raises(ValueError, match="NEURON_SIM_CC_LINK_GBPS='0' must be a finite number > 0"):
        collective_ns("all_reduce", 1024, 2)
    monkeypatch.setenv(timing.LINK_GBPS_ENV, "fast")
    with pytest.raises(ValueError, match="'fast' is not a number"):
        collective_ns("all_reduce", 1024, 2)


def test_unknown_collective_and_no_ranks_are_errors():
    with pytest.raises(ValueError, match="no time model for collective 'all_scream'"):
        collective_ns("all_scream", 1, 2)
    with pytest.raises(ValueError, match="at least one rank, got 0"):
        collective_ns("all_reduce", 1, 0)
