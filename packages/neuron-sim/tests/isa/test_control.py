"""Run-time control instructions: registers (set, load, store) and loops - their validation rules
(each with the offending value in the message), loop nesting, engines and operands."""

import numpy as np
import pytest
from helpers import TRN2, TRN3, hb, ps, sb
from neuron_sim import Program, TensorDecl, ValidationError
from neuron_sim.isa import LoopEnd, LoopStart, RegisterLoad, RegisterSet, RegisterStore, TensorScalar, loop_structure

ONE = sb("int32", 1, 1, offset=64)
TILE = sb("float32", 4, 8)


def rule_of(inst, arch=TRN2):
    with pytest.raises(ValidationError) as info:
        inst.validate(arch)
    return info.value


# --- registers ----------------------------------------------------------------------------------


@pytest.mark.parametrize("make,role", [
    (lambda name: RegisterSet(register=name, value=1), "register"),
    (lambda name: RegisterSet(register="r", value=name), "value"),
    (lambda name: RegisterLoad(register=name, src=ONE), "register"),
    (lambda name: RegisterStore(dst=ONE, register=name), "register"),
    (lambda name: LoopStart(register=name, upper=4), "register"),
    (lambda name: LoopStart(register="i", lower=name), "lower"),
    (lambda name: LoopEnd(register=name), "register"),
], ids=["set", "set-value", "load", "store", "loop-start", "loop-lower", "loop-end"])
@pytest.mark.parametrize("name", ["", None, 3.0])
def test_register_names_are_nonempty_strings(make, role, name):
    inst = make(name)
    if role in ("value", "lower") and name != "":
        return  # a non-string there is an immediate (register.value / loop.bound, tested below)
    err = rule_of(inst)
    assert err.rule == "register.name" and err.detail.startswith(role) and repr(name) in str(err), err


def test_register_set_values_are_32_bit_integers():
    for value in (0, -(2**31), 2**31 - 1, np.int64(7), "other"):
        RegisterSet(register="r", value=value).validate(TRN2)
    for value in (2**31, -(2**31) - 1, 1.5, True, None, float("nan")):
        err = rule_of(RegisterSet(register="r", value=value))
        assert err.rule == "register.value" and "32-bit" in err.detail and repr(value) in str(err), err


@pytest.mark.parametrize("tile,what", [
    (sb("int32", 1, 2), "two elements"),
    (sb("int32", 2, 1), "two partitions"),
    (sb("float32", 1, 1), "a float"),
    (sb("uint32", 1, 1), None),  # 32-bit unsigned is fine
    (sb("int8", 1, 1), None),
    (ps("int32", 1, 1), "PSUM"),
])
@pytest.mark.parametrize("cls", [RegisterLoad, RegisterStore])
def test_register_tiles_are_one_narrow_integer_in_sbuf(tile, what, cls):
    inst = RegisterLoad(register="r", src=tile) if cls is RegisterLoad else RegisterStore(dst=tile, register="r")
    if what is None:
        inst.validate(TRN2)
        return
    err = rule_of(inst)
    assert err.rule == "register.tile" and "32-bit-or-narrower integer in SBUF" in err.detail, err
    assert tile.describe() in str(err) and ("src" if cls is RegisterLoad else "dst") in err.detail


def test_register_tiles_must_be_on_chip_and_inside_sbuf():
    err = rule_of(RegisterLoad(register="r", src=hb("x", "int32", (1, 1))))
    assert err.rule == "engine.memory_access" and "src" in err.detail
    err = rule_of(RegisterStore(dst=sb("int32", 1, 1, offset=TRN2.sbuf_bytes_per_partition), register="r"))
    assert err.rule == "ap.free_bounds"


def test_register_operands_and_engines():
    load, store = RegisterLoad(register="r", src=ONE), RegisterStore(dst=ONE, register="r")
    assert load.reads() == [ONE] and load.writes() == []
    assert store.writes() == [ONE] and store.reads() == []
    # they run on every engine's sequencer; by default on sync's, with the loops
    for cls in (RegisterSet, RegisterLoad, RegisterStore):
        assert cls.engines[0] == "sync" and set(cls.engines) == {"sync", "tensor", "vector", "scalar", "gpsimd"}
    assert RegisterSet(register="r").engine == "sync"
    RegisterSet(register="r", engine="gpsimd").validate(TRN3)
    err = rule_of(RegisterSet(register="r", engine="dma"))
    assert err.rule == "engine.unsupported"


# --- loops --------------------------------------------------------------------------------------


def test_loop_kind():
    LoopStart(register="c", kind="while").validate(TRN2)
    err = rule_of(LoopStart(register="c", kind="until", location="k.py:4"))
    assert err.rule == "loop.kind" and "'until'" in str(err) and err.location == "k.py:4"


@pytest.mark.parametrize("step", [0, -1, 1.0, "s", True])
def test_loop_step_is_a_positive_compile_time_int(step):
    err = rule_of(LoopStart(register="i", upper=8, step=step))
    assert err.rule == "loop.step" and repr(step) in str(err), err


def test_while_loops_ignore_step_and_bounds():
    LoopStart(register="c", kind="while", step=0, lower=1.5).validate(TRN2)


@pytest.mark.parametrize("field", ["lower", "upper"])
@pytest.mark.parametrize("bound", [1.5, None, 2**31, -(2**31) - 1, False])
def test_loop_bounds_are_32_bit_ints_or_registers(field, bound):
    err = rule_of(LoopStart(register="i", **{field: bound}))
    assert err.rule == "loop.bound" and field in err.detail and repr(bound) in str(err), err


def test_loop_bound_registers_are_checked_as_names():
    LoopStart(register="i", lower="lo", upper="hi").validate(TRN2)
    err = rule_of(LoopStart(register="i", upper=""))
    assert err.rule == "register.name" and "upper" in err.detail


def test_loops_run_on_sync_only():
    for cls in (LoopStart, LoopEnd):
        assert cls.engines == ("sync",)
        err = rule_of(cls(register="i", engine="vector"))
        assert err.rule == "engine.unsupported"
    assert LoopStart(register="i").reads() == [] and LoopEnd(register="i").writes() == []


@pytest.mark.parametrize("lower,upper,step,count", [
    (0, 8, 1, 8), (0, 8, 3, 3), (2, 3, 5, 1), (5, 5, 1, 0), (7, 2, 1, 0), (-4, 4, 2, 4), ("r", 4, 1, None),
    (0, "n", 1, None),
])
def test_static_trip_count(lower, upper, step, count):
    assert LoopStart(register="i", lower=lower, upper=upper, step=step).static_trip_count() == count
    assert LoopStart(register="c", kind="while").static_trip_count() is None


# --- nesting ------------------------------------------------------------------------------------


def body():
    return TensorScalar(dst=TILE, src=TILE, op0="add", operand0=1.0)


def test_loop_structure_pairs_starts_and_ends():
    insts = [body(), LoopStart(register="i", upper=2), LoopStart(register="j", upper=3), body(),
             LoopEnd(register="j"), LoopStart(register="k", upper=1), LoopEnd(register="k"), LoopEnd(register="i")]
    assert loop_structure(insts) == {1: 7, 7: 1, 2: 4, 4: 2, 5: 6, 6: 5}
    assert loop_structure([body()]) == {}


@pytest.mark.parametrize("insts,message,where", [
    ([LoopEnd(register="i", location="k.py:9")], "LOOP_END for 'i' has no open loop", "k.py:9"),
    ([LoopStart(register="i", upper=2, location="k.py:3"), body()], "loop on 'i' is never closed", "k.py:3"),
    ([LoopStart(register="i", upper=2), LoopStart(register="j", upper=2), LoopEnd(register="i", location="k.py:7"),
      LoopEnd(register="j")], "LOOP_END for 'i' closes the loop on 'j'", "k.py:7"),
    ([LoopStart(register="i", upper=2), LoopEnd(register="i"), LoopEnd(register="i", location="k.py:5")],
     "LOOP_END for 'i' has no open loop", "k.py:5"),
], ids=["end-without-start", "never-closed", "crossed", "extra-end"])
def test_unbalanced_loops(insts, message, where):
    with pytest.raises(ValidationError) as info:
        loop_structure(insts)
    assert info.value.rule == "loop.unbalanced" and message in str(info.value) and info.value.location == where
    # Program.validate refuses them too
    with pytest.raises(ValidationError) as info:
        Program("p", [TensorDecl("x", (4, 8), "float32")], insts).validate(TRN2)
    assert info.value.rule == "loop.unbalanced"


def test_program_validate_accepts_balanced_loops_and_checks_their_instructions():
    good = [LoopStart(register="i", upper=2), body(), LoopEnd(register="i")]
    Program("p", [], good).validate(TRN2)
    bad = [LoopStart(register="i", upper=2, step=0, location="k.py:2"), body(), LoopEnd(register="i")]
    with pytest.raises(ValidationError) as info:
        Program("p", [], bad).validate(TRN2)
    assert info.value.rule == "loop.step" and info.value.location == "k.py:2"
