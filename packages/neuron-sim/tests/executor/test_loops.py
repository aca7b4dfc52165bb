"""ExactExecutor: run-time loops and registers - for loops with static and register bounds, zero-trip
and nested loops (trip counts per activation, in order), while loops on values in SBUF, register
offsets moving DMA windows, and the errors: runaway loops and unset registers."""

import numpy as np
import pytest
from helpers import TRN2, execute, hb, sb
from neuron_sim import AccessPatternError, ExactExecutor, ExecutionError, Program, TensorDecl, UninitializedReadError
from neuron_sim.executor import exact
from neuron_sim.isa import (
    DmaCopy,
    LoopEnd,
    LoopStart,
    RegisterLoad,
    RegisterSet,
    RegisterStore,
    TensorCopy,
    TensorScalar,
)
from neuron_sim.memory.access_pattern import AccessPattern

ACC = sb("float32", 2, 4)  # an accumulator the loop bodies count in
SLOTS = sb("int32", 1, 16, offset=1024)  # where bodies record their counter, one slot per iteration
NSLOT = sb("int32", 1, 1, offset=2048)  # a run-time bound / condition held in SBUF


@pytest.fixture(autouse=True)
def bounded_loops(monkeypatch):
    """A test whose loop never ends fails in milliseconds, not after 10M iterations."""
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 10_000)


def count(**where):
    return TensorScalar(dst=ACC, src=ACC, op0="add", operand0=1.0, **where)


def record(counter, base=0):
    """Store ``counter`` into SLOTS[counter + base] (a window the counter itself moves)."""
    dst = AccessPattern("sbuf", "int32", 0, 1, ((1, 1),), offset=1024 + 4 * base, dynamic=((counter, 1),))
    return RegisterStore(dst=dst, register=counter)


def run(insts, **kw):
    preload = [(ACC, np.zeros((2, 4))), (SLOTS, np.full((1, 16), -7))] + list(kw.pop("preload", []))
    return execute(insts, preload=preload, fetch=[ACC, SLOTS], **kw)


def loop(register, body, **bounds):
    return [LoopStart(register=register, **bounds), *body, LoopEnd(register=register)]


# --- for loops ----------------------------------------------------------------------------------


@pytest.mark.parametrize("lower,upper,step,values", [
    (0, 5, 1, [0, 1, 2, 3, 4]),
    (2, 9, 3, [2, 5, 8]),
    (3, 4, 7, [3]),
    (-2, 2, 1, [-2, -1, 0, 1]),
])
def test_static_for_loop_runs_its_body_once_per_value(lower, upper, step, values):
    r = run(loop("i", [count(), record("i", base=2)], lower=lower, upper=upper, step=step))
    assert r[0][0, 0] == len(values)
    assert r.executor.trip_counts == {0: [len(values)]}
    slots = r[1][0]
    seen = [int(v) for v in slots if v != -7]
    assert seen == values and [int(np.flatnonzero(slots == v)[0]) - 2 for v in values] == values
    # the counter ends one step past its last value, like a C loop
    assert r.executor.registers["i"] == lower + step * len(values)


def test_counter_values_land_in_memory_through_register_offsets():
    r = run(loop("i", [record("i")], lower=3, upper=11, step=2))
    slots = r[1][0]
    assert slots[[3, 5, 7, 9]].tolist() == [3, 5, 7, 9]
    assert (np.delete(slots, [3, 5, 7, 9]) == -7).all()


def test_register_bounds_are_read_when_the_loop_starts():
    insts = [RegisterSet(register="lo", value=2), RegisterSet(register="hi", value=6)]
    insts += loop("i", [count(), record("i"), RegisterSet(register="hi", value=100), RegisterSet(register="lo", value=0)],
                  lower="lo", upper="hi")
    r = run(insts)
    assert r[0][0, 0] == 4 and r.executor.trip_counts == {2: [4]}
    assert r[1][0, 2:6].tolist() == [2, 3, 4, 5] and r[1][0, 6] == -7


def test_bound_loaded_from_sbuf():
    insts = [RegisterLoad(register="n", src=NSLOT)] + loop("i", [count()], upper="n")
    r = run(insts, preload=[(NSLOT, np.array([[13]]))])
    assert r[0][0, 0] == 13 and r.executor.trip_counts == {1: [13]} and r.executor.registers["n"] == 13


@pytest.mark.parametrize("bounds", [dict(lower=4, upper=4), dict(lower=9, upper=2), dict(lower=0, upper="z")])
def test_zero_trip_loops_skip_their_body(bounds):
    insts = [RegisterSet(register="z", value=-5)] + loop("i", [count(), record("i")], **bounds) + [count(), count()]
    r = run(insts)
    assert r[0][0, 0] == 2  # only the two counts after the loop
    assert (r[1] == -7).all()
    assert r.executor.trip_counts == {1: [0]}
    assert r.executor.registers["i"] == (bounds["lower"])  # set to lower, never stepped


def test_nested_loops_record_every_activation_in_order():
    # for i in range(4): n = i; for j in range(n): count
    insts = loop("i", [RegisterSet(register="n", value="i"), *loop("j", [count()], upper="n")], upper=4)
    r = run(insts)
    assert r[0][0, 0] == 0 + 1 + 2 + 3
    assert r.executor.trip_counts == {2: [0, 1, 2, 3], 0: [4]}


def test_nested_loops_three_deep_with_static_and_register_bounds():
    inner = loop("k", [count()], lower=1, upper="m", step=2)
    insts = [RegisterSet(register="m", value=6)] + loop("i", loop("j", inner, upper=3), upper=2)
    r = run(insts)
    assert r[0][0, 0] == 2 * 3 * 3
    assert r.executor.trip_counts == {3: [3] * 6, 2: [3, 3], 1: [2]}


def test_loop_counter_rewritten_by_its_body_changes_the_iteration():
    # the counter is an ordinary register: setting it inside the body moves the loop on
    r = run(loop("i", [count(), RegisterSet(register="i", value=9)], upper=10))
    assert r[0][0, 0] == 1 and r.executor.trip_counts == {0: [1]}  # i = 0, set to 9, stepped to 10: done
    assert r.executor.registers["i"] == 10


# --- while loops --------------------------------------------------------------------------------


def test_while_loop_counts_down_a_value_held_in_sbuf():
    # c = mem; while c: acc += 1; mem -= 1; c = mem
    dec = TensorScalar(dst=NSLOT, src=NSLOT, op0="subtract", operand0=1.0, engine="vector")
    insts = [RegisterLoad(register="c", src=NSLOT)]
    insts += loop("c", [count(), dec, RegisterLoad(register="c", src=NSLOT)], kind="while")
    r = execute(insts, preload=[(ACC, np.zeros((2, 4))), (NSLOT, np.array([[5]]))], fetch=[ACC, NSLOT])
    assert r[0][0, 0] == 5 and r[1][0, 0] == 0
    assert r.executor.trip_counts == {1: [5]} and r.executor.registers["c"] == 0


def test_while_loop_condition_written_back_through_register_store():
    # the condition goes register -> SBUF -> engine arithmetic -> SBUF -> register each pass
    work = sb("int32", 1, 1, offset=2100)
    dec = TensorScalar(dst=work, src=work, op0="subtract", operand0=1.0)
    insts = [RegisterSet(register="c", value=3)]
    insts += loop("c", [count(), RegisterStore(dst=work, register="c"), dec, RegisterLoad(register="c", src=work)], kind="while")
    r = run(insts)
    assert r[0][0, 0] == 3 and r.executor.trip_counts == {1: [3]}


def test_while_loop_that_starts_false_never_runs():
    insts = [RegisterSet(register="c", value=0)] + loop("c", [count()], kind="while")
    r = run(insts)
    assert r[0][0, 0] == 0 and r.executor.trip_counts == {1: [0]}


def test_while_loop_nested_in_a_for_loop():
    # for i in 0..3: c = i; while c: count; c = 0  -> runs for i = 1, 2
    insts = loop("i", [RegisterSet(register="c", value="i"),
                       *loop("c", [count(), RegisterSet(register="c", value=0)], kind="while")], upper=3)
    r = run(insts)
    assert r[0][0, 0] == 2 and r.executor.trip_counts == {2: [0, 1, 1], 0: [3]}


# --- register offsets moving DMA windows ---------------------------------------------------------


def test_register_offsets_move_dma_windows_through_hbm():
    # reverse the rows of x: row i of x -> SBUF partition 0 -> row (5 - i) of y, one row per pass
    x = np.arange(6 * 8, dtype=np.float32).reshape(6, 8)
    row = sb("float32", 1, 8)
    src = AccessPattern("hbm", "float32", 0, 1, ((1, 8),), tensor="x", partition_stride=8, dynamic=(("i", 8),))
    dst = AccessPattern("hbm", "float32", 0, 1, ((1, 8),), offset=5 * 8 * 4, tensor="y", partition_stride=8,
                        dynamic=(("i", -8),))
    insts = loop("i", [DmaCopy(dst=row, src=src), DmaCopy(dst=dst, src=row)], upper=6)
    r = execute(insts, hbm_inputs={"x": x}, hbm_outputs={"y": ((6, 8), "float32")})
    np.testing.assert_array_equal(r.hbm["y"], x[::-1])


def test_register_offsets_move_on_chip_windows_with_several_terms():
    # SBUF column block (i, j) of a 2 x 3 grid of 4-wide blocks gets 10 * i + j
    grid = sb("float32", 2, 24, offset=4096)
    cell = AccessPattern("sbuf", "float32", 0, 2, ((1, 4),), offset=4096, dynamic=(("i", 12), ("j", 4)))
    value = sb("float32", 2, 4, offset=8192)
    body = [TensorScalar(dst=cell, src=value, op0="add", operand0=0.0)]
    insts = loop("i", loop("j", [*body, TensorScalar(dst=value, src=value, op0="add", operand0=1.0)], upper=3)
                 + [TensorScalar(dst=value, src=value, op0="add", operand0=7.0)], upper=2)
    r = execute(insts, preload=[(value, np.zeros((2, 4)))], fetch=[grid])
    expect = np.repeat([0, 1, 2, 10, 11, 12], 4).astype(np.float32)
    np.testing.assert_array_equal(r[0], np.stack([expect, expect]))


def test_run_time_offsets_must_stay_inside_the_declared_tensor():
    # the buffer bound for x is larger than x: the executor still refuses to read past x's end
    x = np.arange(32, dtype=np.float32)
    src = AccessPattern("hbm", "float32", 0, 1, ((1, 8),), tensor="x", partition_stride=8, dynamic=(("r", 8),))
    program = Program("p", [TensorDecl("x", (4, 8), "float32")], [RegisterSet(register="r", value=0),
                      *loop("i", [DmaCopy(dst=sb("float32", 1, 8), src=src, location="k.py:8"),
                                  RegisterSet(register="r", value="i")], lower=1, upper=6)])
    program.validate(TRN2)
    big = np.zeros(4096, np.uint8)
    big[:128] = x.view(np.uint8)
    ex = ExactExecutor(TRN2)
    with pytest.raises(AccessPatternError) as info:
        ex.run(program, {"x": big})
    err = info.value
    assert err.rule == "ap.tensor_bounds" and "run-time offset 128 bytes" in str(err) and "'x'" in str(err)
    assert err.location == "k.py:8"
    assert (ex.registers["i"], ex.registers["r"]) == (5, 4)  # rows 0..3 were fine; the pass reading row 4 failed


def test_uninitialized_tracking_follows_run_time_windows():
    cell = AccessPattern("sbuf", "float32", 0, 2, ((1, 4),), offset=4096, dynamic=(("i", 4),))
    write = loop("i", [TensorCopy(dst=cell, src=ACC)], upper=3)
    read = [RegisterSet(register="i", value=3), TensorCopy(dst=ACC, src=cell, location="k.py:12")]
    run(write + [RegisterSet(register="i", value=2), TensorCopy(dst=ACC, src=cell)], uninitialized="error")
    with pytest.raises(UninitializedReadError) as info:
        run(write + read, uninitialized="error")
    assert info.value.rule == "memory.uninitialized_read" and info.value.location == "k.py:12"


# --- errors -------------------------------------------------------------------------------------


def test_runaway_while_loop_names_the_loop(monkeypatch):
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 50)
    insts = [RegisterSet(register="c", value=1), LoopStart(register="c", kind="while", location="k.py:21"), count(),
             LoopEnd(register="c", location="k.py:23")]
    with pytest.raises(ExecutionError) as info:
        run(insts)
    text = str(info.value)
    assert "loop on 'c' at k.py:21" in text and "50 iterations" in text and "condition" in text


def test_runaway_guard_applies_to_huge_for_loops_too(monkeypatch):
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 20)
    run([RegisterSet(register="n", value=20)] + loop("i", [count()], upper="n"))  # exactly the limit is fine
    with pytest.raises(ExecutionError) as info:
        run([RegisterSet(register="n", value=2**31 - 1)] + loop("i", [count()], upper="n", location="k.py:3"))
    assert "loop on 'i' at k.py:3" in str(info.value)


def test_guard_counts_each_activation_separately(monkeypatch):
    monkeypatch.setattr(exact, "MAX_LOOP_ITERATIONS", 5)
    r = run(loop("i", loop("j", [count()], upper=5), upper=5))
    assert r[0][0, 0] == 25


@pytest.mark.parametrize("insts,name,where", [
    (loop("i", [count()], upper="n", location="k.py:1"), "n", "k.py:1"),
    (loop("i", [count()], lower="m", upper=3, location="k.py:2"), "m", "k.py:2"),
    (loop("c", [count()], kind="while", location="k.py:3"), "c", "k.py:3"),
    ([RegisterSet(register="a", value="b", location="k.py:4")], "b", "k.py:4"),
    ([RegisterStore(dst=NSLOT, register="q", location="k.py:5")], "q", "k.py:5"),
], ids=["upper", "lower", "while", "set", "store"])
def test_reading_an_unset_register_is_an_execution_error(insts, name, where):
    with pytest.raises(ExecutionError) as info:
        run(insts)
    text = str(info.value)
    assert f"register {name!r} is read before it is set" in text and where in text


def test_unset_register_in_an_offset_names_the_instruction():
    dyn = AccessPattern("sbuf", "float32", 0, 2, ((1, 4),), dynamic=(("k", 4),))
    with pytest.raises(ExecutionError) as info:
        run([TensorCopy(dst=ACC, src=dyn, location="k.py:6")])
    assert "TENSOR_COPY at k.py:6" in str(info.value) and "['k']" in str(info.value)


def test_registers_persist_across_launches_but_trip_counts_do_not():
    ex = ExactExecutor(TRN2)
    with_loop = Program("a", [], [RegisterSet(register="r", value=4), *loop("i", [], upper="r")])
    ex.run(with_loop, {})
    assert ex.trip_counts == {1: [4]}
    ex.run(Program("b", [], [RegisterSet(register="s", value=1)]), {})
    assert ex.trip_counts == {} and ex.registers["r"] == 4
    with pytest.raises(ExecutionError):
        ex.run(Program("c", [], [*loop("i", [], upper="unset")]), {})
    assert ex.trip_counts == {}


def test_register_load_reads_the_integer_exactly():
    for dtype, value in (("int32", -(2**31)), ("int32", 16_777_217), ("int8", -3), ("uint8", 200), ("int16", -300)):
        tile = sb(dtype, 1, 1, offset=3000)
        out = sb("int32", 1, 1, offset=3100)
        r = execute([RegisterLoad(register="r", src=tile), RegisterStore(dst=out, register="r")],
                    preload=[(tile, np.array([[value]]))], fetch=[out])
        assert r.executor.registers["r"] == value and r[0][0, 0] == value


def test_register_store_saturates_to_a_narrow_destination():
    tile = sb("int8", 1, 1, offset=3000)
    r = execute([RegisterSet(register="r", value=1000), RegisterStore(dst=tile, register="r")], fetch=[tile])
    assert r[0][0, 0] == 127


def test_loops_need_balanced_structure_even_unvalidated():
    ex = ExactExecutor(TRN2)
    with pytest.raises(Exception) as info:
        ex.run(Program("p", [], [LoopStart(register="i", upper=2)]), {})
    assert getattr(info.value, "rule", None) == "loop.unbalanced"


def test_hbm_round_trip_in_a_loop_with_register_bound_from_hbm():
    # the k2 pattern: a bound read from HBM, then rows 0..n-1 scaled by 2
    x = np.arange(10 * 4, dtype=np.float32).reshape(10, 4)
    n = np.array([[7]], np.int32)
    row = sb("float32", 1, 4)
    src = AccessPattern("hbm", "float32", 0, 1, ((1, 4),), tensor="x", partition_stride=4, dynamic=(("i", 4),))
    dst = AccessPattern("hbm", "float32", 0, 1, ((1, 4),), tensor="y", partition_stride=4, dynamic=(("i", 4),))
    insts = [DmaCopy(dst=NSLOT, src=hb("n", "int32", (1, 1))), RegisterLoad(register="ub", src=NSLOT),
             *loop("i", [DmaCopy(dst=row, src=src), TensorScalar(dst=row, src=row, op0="multiply", operand0=2.0),
                         DmaCopy(dst=dst, src=row)], upper="ub")]
    r = execute(insts, hbm_inputs={"x": x, "n": n}, hbm_outputs={"y": ((10, 4), "float32")})
    np.testing.assert_array_equal(r.hbm["y"][:7], 2 * x[:7])
    assert np.isnan(r.hbm["y"][7:]).all()
    assert r.executor.trip_counts == {2: [7]}
