"""DMA costs: fixed latency, per-engine bandwidth, small-transfer overhead, queue order."""

from __future__ import annotations

import pytest
from helpers import TRN2, hb, sb
from neuron_sim import Program, TensorDecl
from neuron_sim.isa import DmaCopy
from neuron_sim.timing import estimate


def _copy_program(copies, tensors):
    return Program("dma", tensors, copies, "trn2")


def test_a_lone_dma_pays_the_fixed_latency():
    x = TensorDecl("x", (128, 4), "float32", "input")
    prog = _copy_program([DmaCopy(dst=sb("float32", 128, 4), src=hb("x", "float32", (128, 4)))], [x])
    timing = estimate(prog, TRN2)
    assert timing.total_ns >= TRN2.dma.fixed_latency_ns
    assert timing.total_ns < TRN2.dma.fixed_latency_ns + 200


def test_small_fragmented_transfers_are_slower_per_byte_than_large_ones():
    # The same bytes as 64-byte runs (a column slice of a wide tensor) vs. 8 KiB runs.
    wide = TensorDecl("w", (128, 2048 * 16), "float32", "input")
    narrow_runs = [DmaCopy(dst=sb("float32", 128, 16, offset=64 * i), src=hb("w", "float32", (128, 16), offset_elements=16 * i, row_stride=2048 * 16), queue="qSyncIO0") for i in range(128)]
    slow = estimate(_copy_program(narrow_runs, [wide]), TRN2)
    big = [DmaCopy(dst=sb("float32", 128, 2048), src=hb("w", "float32", (128, 2048), row_stride=2048 * 16))]
    fast = estimate(_copy_program(big, [wide]), TRN2)
    assert slow.total_ns > 3 * fast.total_ns


def test_transfers_on_one_queue_complete_in_order():
    x = TensorDecl("x", (128, 4096), "float32", "input")
    copies = [
        DmaCopy(dst=sb("float32", 128, 1024, offset=4096 * i), src=hb("x", "float32", (128, 1024), offset_elements=1024 * i, row_stride=4096), queue="qSyncIO0")
        for i in range(4)
    ]
    timing = estimate(_copy_program(copies, [x]), TRN2)
    ends = [d.end_ts for d in timing.dma]
    assert ends == sorted(ends)


def test_summary_counts_hbm_bytes_of_every_transfer():
    x = TensorDecl("x", (128, 1024), "bfloat16", "input")
    y = TensorDecl("y", (128, 1024), "bfloat16", "output")
    t = sb("bfloat16", 128, 1024)
    prog = _copy_program([DmaCopy(dst=t, src=hb("x", "bfloat16", (128, 1024))), DmaCopy(dst=hb("y", "bfloat16", (128, 1024)), src=t)], [x, y])
    s = estimate(prog, TRN2).summary
    assert s["hbm_read_bytes"] == 128 * 1024 * 2
    assert s["hbm_write_bytes"] == 128 * 1024 * 2
    assert s["dma_instruction_count"] == 2
    assert s["dma_transfer_average_bytes"] == pytest.approx(128 * 1024 * 2)
