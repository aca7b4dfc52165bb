"""The issue's timing sanity checks against first-principles figures of one NeuronCore-v3."""

from __future__ import annotations

import pytest
from neuron_sim import get_architecture
from neuron_sim.programs import dependent_chain, hbm_to_sbuf_copy, tiled_matmul
from neuron_sim.timing import estimate

TRN2 = get_architecture("trn2")


@pytest.fixture(scope="module")
def big_matmul():
    program = tiled_matmul(4096, 4096, 4096, dtype="bfloat16", arch=TRN2)
    return program, estimate(program, TRN2)


def test_tiled_4096_matmul_is_within_10_percent_of_tensor_engine_roofline(big_matmul):
    _, timing = big_matmul
    roofline_ns = 2 * 4096**3 / 79e12 * 1e9
    assert timing.total_ns == pytest.approx(roofline_ns, rel=0.10)
    assert timing.summary["mfu_estimated_percent"] >= 90.0


def test_mfu_follows_the_explorer_formula(big_matmul):
    _, timing = big_matmul
    s = timing.summary
    assert s["model_flops"] == 2 * 4096**3
    expected = 100 * s["model_flops"] / (2 * 128 * 128 * 2.4e9 * s["total_time"])
    assert s["mfu_estimated_percent"] == pytest.approx(expected)
    hbm = s["hbm_read_bytes"] + s["hbm_write_bytes"]
    assert s["mbu_estimated_percent"] == pytest.approx(100 * hbm / s["total_time_ns"] / TRN2.hbm_bytes_per_ns_per_core)


def test_large_hbm_to_sbuf_copy_reaches_modeled_dma_bandwidth():
    program = hbm_to_sbuf_copy(nbytes_per_partition=64 * 1024, chunks=4, arch=TRN2)
    timing = estimate(program, TRN2)
    achieved = program.metadata["bytes"] / timing.total_ns  # bytes per ns
    modeled = TRN2.dma.engines * TRN2.dma.bytes_per_ns_per_engine
    assert achieved == pytest.approx(modeled, rel=0.15)
    assert achieved <= modeled


def test_chain_of_tiny_dependent_instructions_is_dominated_by_fixed_overheads():
    n = 200
    timing = estimate(dependent_chain(n, arch=TRN2), TRN2)
    vec = TRN2.vector
    per_instruction = timing.summary["vector_active_time_ns"] / n
    one_element_work = vec.cycles_to_ns(1)
    assert per_instruction >= vec.cycles_to_ns(vec.min_initiation_interval)
    assert one_element_work < 0.05 * per_instruction
    # Each link waits for the previous one's pipeline latency: the chain is slower than back-to-back issue.
    assert timing.total_ns > n * vec.cycles_to_ns(vec.min_initiation_interval + vec.static_overhead_cycles)


def test_trn3_moves_data_faster_than_trn2():
    trn3 = get_architecture("trn3")
    t2 = estimate(hbm_to_sbuf_copy(arch=TRN2), TRN2).total_ns
    t3 = estimate(hbm_to_sbuf_copy(arch=trn3), trn3).total_ns
    assert t3 < t2
