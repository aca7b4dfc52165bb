"""Timing of loops: a loop issues its body once per iteration followed by its branch (LOOP_END), so a
static loop times like the unrolled program plus a sequencer MIN_II per branch; loops with
run-time bounds need the trip counts of a run and then scale with them. Records name the
program index of the instruction they issued, in every iteration."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import TRN2, TRN3, hb, sb
from neuron_sim import ExactExecutor, Program, TensorDecl, ValidationError
from neuron_sim.executor import exact
from neuron_sim.isa import (
    Activation,
    DmaCopy,
    LoopEnd,
    LoopStart,
    RegisterLoad,
    RegisterSet,
    RegisterStore,
    TensorScalar,
)
from neuron_sim.memory.access_pattern import AccessPattern
from neuron_sim.timing import estimate
from neuron_sim.timing.loops import issued_stream

TENSORS = [TensorDecl("x", (128, 256), "float32", "input"), TensorDecl("y", (128, 256), "float32", "output"),
           TensorDecl("n", (1, 1), "int32", "input")]
TILE = sb("float32", 128, 256)
OUT = sb("float32", 128, 256, offset=2048)
NSLOT = sb("int32", 1, 1, offset=8192)


@pytest.fixture(autouse=True)
def bounded_loops(monkeypatch):
    """A loop that never ends fails fast instead of running 10M iterations."""
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 10_000)


def body():
    """Load, compute, store: a DMA triggered from sync (where the branches run) and two engines."""
    return [
        DmaCopy(dst=TILE, src=hb("x", "float32", (128, 256)), location="k.py:10"),
        Activation(dst=OUT, src=TILE, func="exp", location="k.py:11"),
        TensorScalar(dst=OUT, src=OUT, op0="multiply", operand0=2.0, location="k.py:12"),
        DmaCopy(dst=hb("y", "float32", (128, 256)), src=OUT, engine="scalar", location="k.py:13"),
    ]


def branch_ns(arch=TRN2, engine="sync"):
    spec = arch.engine(engine)
    return spec.cycles_to_ns(spec.min_initiation_interval)


def program(insts, name="p"):
    return Program(name, list(TENSORS), list(insts), "trn2")


def static_loop(n):
    return program([LoopStart(register="i", upper=n, location="k.py:9"), *body(), LoopEnd(register="i", location="k.py:14")])


def timeline(result):
    return [(r.index, r.opcode, r.timeline_track, r.start_ts, r.end_ts) for r in result.instructions]


@pytest.mark.parametrize("n", [1, 3, 8])
def test_static_loop_times_like_the_unrolled_program_plus_its_branches(n):
    looped = estimate(static_loop(n), TRN2)
    # The same issue order with each branch replaced by another sync-sequencer instruction of the
    # same cost: identical timeline.
    stand_in = [RegisterSet(register="t", value=0)]
    unrolled_with_branches = program(stand_in + [inst for _ in range(n) for inst in body() + [RegisterSet(register="t", value=0)]])
    twin = estimate(unrolled_with_branches, TRN2)
    assert looped.total_ns == twin.total_ns
    assert [t[3:] for t in timeline(looped)] == [t[3:] for t in timeline(twin)]
    # Against the plain unrolled body: the branches cost at most one sync MIN_II each (they sit
    # on the sync queue in front of the loads it triggers) and never make the program faster.
    plain = estimate(program([inst for _ in range(n) for inst in body()]), TRN2)
    assert plain.total_ns <= looped.total_ns <= plain.total_ns + (n + 1) * branch_ns() + 1e-6
    loads = [r for r in looped.instructions if r.index == 1]
    plain_loads = [r for r in plain.instructions if r.opcode == "DMA_COPY" and r.timeline_track == "qSyncIO0"]
    assert len(loads) == len(plain_loads) == n
    assert loads[0].start_ts == pytest.approx(plain_loads[0].start_ts + branch_ns())


def test_loop_branches_are_sequencer_work_on_sync():
    recs = estimate(static_loop(4), TRN2).instructions
    control = [r for r in recs if r.opcode in ("LOOP_START", "LOOP_END")]
    assert [r.opcode for r in control] == ["LOOP_START"] + ["LOOP_END"] * 4
    for r in control:
        assert r.engine == "sync" and r.timeline_track == "Sync"
        assert r.duration_ns == pytest.approx(branch_ns())
    assert branch_ns(TRN3) == pytest.approx(16 / 1.2)  # 16 sequencer cycles at 1.2 GHz


@pytest.mark.parametrize("engine,track", [("sync", "Sync"), ("vector", "Vector"), ("scalar", "Scalar"), ("gpsimd", "GpSimd")])
def test_register_moves_cost_min_ii_on_their_engine(engine, track):
    prog = program([RegisterSet(register="r", value=1, engine=engine),
                    RegisterStore(dst=NSLOT, register="r", engine=engine),
                    RegisterLoad(register="r", src=NSLOT, engine=engine)])
    recs = estimate(prog, TRN2).instructions
    assert [r.timeline_track for r in recs] == [track] * 3
    for r in recs:
        assert r.duration_ns == pytest.approx(branch_ns(TRN2, engine))


def test_register_moves_default_to_the_sync_sequencer():
    recs = estimate(program([RegisterSet(register="r", value=1), RegisterLoad(register="r", src=NSLOT)]), TRN2).instructions
    assert [r.timeline_track for r in recs] == ["Sync", "Sync"]


def test_register_load_waits_for_the_dma_that_fills_its_tile():
    prog = program([DmaCopy(dst=NSLOT, src=hb("n", "int32", (1, 1)), engine="scalar"), RegisterLoad(register="n", src=NSLOT)])
    dma, load = estimate(prog, TRN2).instructions
    assert load.start_ts >= dma.end_ts and load.waited_on == "qScalarIO0"


def test_records_carry_the_program_index_in_every_iteration():
    prog = static_loop(3)
    result = estimate(prog, TRN2)
    assert [r.index for r in result.instructions] == [0] + [1, 2, 3, 4, 5] * 3
    assert [r.nki_source_location for r in result.instructions][:6] == ["k.py:9", "k.py:10", "k.py:11", "k.py:12", "k.py:13", "k.py:14"]
    dma_indices = [d.instruction_index for d in result.dma]
    assert set(dma_indices) == {1, 4} and dma_indices.count(1) == dma_indices.count(4)
    # operands are filled from the program instruction the record names
    result.with_operands(prog)
    assert [r.operands for r in result.instructions] == [prog.instructions[r.index].describe() for r in result.instructions]


def test_zero_trip_static_loop_issues_only_its_start():
    result = estimate(program([LoopStart(register="i", lower=5, upper=5), *body(), LoopEnd(register="i")]), TRN2)
    assert [r.opcode for r in result.instructions] == ["LOOP_START"]
    assert result.total_ns == pytest.approx(branch_ns())


# --- run-time bounds ------------------------------------------------------------------------------


def register_loop(location="k.py:9"):
    return program([
        DmaCopy(dst=NSLOT, src=hb("n", "int32", (1, 1)), engine="scalar"),
        RegisterLoad(register="n", src=NSLOT),
        LoopStart(register="i", upper="n", location=location), *body(), LoopEnd(register="i"),
    ])


def run_counts(prog, n):
    ex = ExactExecutor(TRN2)
    buffers = {"x": np.zeros((128, 256), np.float32).view(np.uint8).reshape(-1),
               "y": np.zeros((128, 256), np.float32).view(np.uint8).reshape(-1),
               "n": np.array([[n]], np.int32).view(np.uint8).reshape(-1)}
    ex.run(prog, buffers)
    return ex.trip_counts


def test_run_time_bounds_need_trip_counts():
    with pytest.raises(ValidationError) as info:
        estimate(register_loop("k.py:31"), TRN2)
    err = info.value
    assert err.rule == "timing.trip_count_unknown" and "'i'" in str(err) and err.location == "k.py:31"
    assert "trip_counts" in str(err)


def test_while_loops_need_trip_counts_too():
    prog = program([RegisterSet(register="c", value=0), LoopStart(register="c", kind="while", location="k.py:2"),
                    LoopEnd(register="c")])
    with pytest.raises(ValidationError) as info:
        estimate(prog, TRN2)
    assert info.value.rule == "timing.trip_count_unknown" and info.value.location == "k.py:2"
    assert [r.opcode for r in estimate(prog, TRN2, trip_counts={1: [0]}).instructions] == ["REG_SET", "LOOP_START"]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_register_bounded_loop_times_like_the_static_loop_of_its_trip_count(n):
    prog = register_loop()
    counts = run_counts(prog, n)
    assert counts == {2: [n]}
    timed = estimate(prog, TRN2, trip_counts=counts)
    static = program(prog.instructions[:2] + [LoopStart(register="i", upper=n)] + prog.instructions[3:])
    assert timeline(timed) == timeline(estimate(static, TRN2))
    assert sum(r.index == 4 for r in timed.instructions) == n  # the Activation ran n times


def test_register_bounded_loop_scales_with_its_trip_count():
    prog = register_loop()
    totals = [estimate(prog, TRN2, trip_counts={2: [n]}).total_ns for n in (2, 4, 8, 16)]
    assert totals == sorted(totals) and len(set(totals)) == 4
    steps = np.diff(totals)
    # steady state: each extra iteration costs about the same
    assert steps[2] == pytest.approx(2 * steps[1], rel=0.05)


def test_nested_run_time_loops_use_each_activation_in_order():
    # for i in range(3): for j in range(m_i): body, with m_i = 1, 0, 2 given per activation
    prog = program([LoopStart(register="i", upper=3), RegisterSet(register="m", value="i"),
                    LoopStart(register="j", upper="m"), *body(), LoopEnd(register="j"), LoopEnd(register="i")])
    result = estimate(prog, TRN2, trip_counts={2: [1, 0, 2]})
    assert [r.index for r in result.instructions if r.opcode in ("LOOP_START", "LOOP_END", "ACTIVATE")] == \
        [0, 2, 4, 7, 8, 2, 8, 2, 4, 7, 4, 7, 8]
    stream, indices = issued_stream(prog.instructions, {2: [1, 0, 2]})
    assert [prog.instructions[i] for i in indices] == stream
    with pytest.raises(ValidationError) as info:  # one activation short
        estimate(prog, TRN2, trip_counts={2: [1, 0]})
    assert info.value.rule == "timing.trip_count_unknown"


def test_executor_trip_counts_feed_the_timing_of_nested_loops():
    # the executor's own counts (inner loop m = i) time the program it ran
    prog = program([LoopStart(register="i", upper=4), RegisterSet(register="m", value="i"),
                    LoopStart(register="j", upper="m"), *body(), LoopEnd(register="j"), LoopEnd(register="i")])
    counts = run_counts(prog, 0)
    assert counts == {2: [0, 1, 2, 3], 0: [4]}
    result = estimate(prog, TRN2, trip_counts=counts)
    assert sum(r.opcode == "ACTIVATE" for r in result.instructions) == 6
    assert sum(r.opcode == "LOOP_END" and r.index == 7 for r in result.instructions) == 6


def test_a_runs_counts_win_over_static_bounds():
    # a body that rewrites its counter ends a static loop early: the timing follows what ran
    prog = program([LoopStart(register="i", upper=10), *body(), RegisterSet(register="i", value=9), LoopEnd(register="i")])
    counts = run_counts(prog, 0)
    assert counts == {0: [1]}
    result = estimate(prog, TRN2, trip_counts=counts)
    assert sum(r.opcode == "ACTIVATE" for r in result.instructions) == 1
    assert sum(r.opcode == "ACTIVATE" for r in estimate(prog, TRN2).instructions) == 10  # static guess without a run
    # counts for other activations than recorded fall back to the static bound
    assert sum(r.opcode == "ACTIVATE" for r in estimate(static_loop(3), TRN2, trip_counts={0: []}).instructions) == 3


def test_straight_line_programs_issue_as_written():
    straight = program(body())
    stream, indices = issued_stream(straight.instructions, {})
    assert stream is straight.instructions and indices == [0, 1, 2, 3]


def test_dynamic_offsets_depend_on_the_whole_tensor():
    # a run-time window may land anywhere: a later static write of the tensor waits for it
    dyn = AccessPattern("hbm", "float32", 0, 1, ((1, 256),), tensor="y", partition_stride=256, dynamic=(("i", 256),))
    row = sb("float32", 1, 256, offset=4096)
    prog = program([LoopStart(register="i", upper=2), DmaCopy(dst=dyn, src=row, engine="scalar"), LoopEnd(register="i"),
                    DmaCopy(dst=hb("y", "float32", (1, 256), offset_elements=127 * 256), src=row, engine="gpsimd")])
    recs = estimate(prog, TRN2).instructions
    stores = [r for r in recs if r.opcode == "DMA_COPY"]
    assert len(stores) == 3 and stores[2].start_ts >= stores[1].end_ts
