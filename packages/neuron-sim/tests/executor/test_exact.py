"""ExactExecutor: poison and the uninitialized-read policy, error context, program-level checks,
run-time offsets, and whole sample programs against numpy."""

import os
import warnings

import numpy as np
import pytest
from helpers import BF16, TRN2, execute, hb, ps, sb
from neuron_sim import (
    AccessPatternError,
    ExactExecutor,
    ExecutionError,
    NeuronSimError,
    Program,
    ProgramBuilder,
    TensorDecl,
    UninitializedReadError,
    ValidationError,
)
from neuron_sim.executor import semantics
from neuron_sim.isa import Activation, DmaCopy, DmaIndirect, Matmul, TensorCopy, TensorScalar
from neuron_sim.memory.access_pattern import AccessPattern
from neuron_sim.programs import dependent_chain, hbm_to_sbuf_copy, tiled_matmul

HERE = os.path.basename(__file__)


def buffers_for(program, **arrays):
    out = {}
    for t in program.tensors:
        if t.name in arrays:
            out[t.name] = np.ascontiguousarray(arrays[t.name]).reshape(-1).view(np.uint8).copy()
        else:
            out[t.name] = np.full(t.nbytes, 0xFF, dtype=np.uint8)
    return out


def read_back(program, buffers, name):
    from neuron_sim import dtypes

    t = program.tensor(name)
    return buffers[name].view(dtypes.to_numpy(t.dtype)).reshape(t.shape)


def uninitialized_program():
    """Writes partitions 0..15 of a tile, then reads partitions 0..31 of it."""
    b = ProgramBuilder("uninit", TRN2)
    x = b.input("x", (16, 8), "float32")
    y = b.output("y", (32, 8), "float32")
    t = b.sbuf((32, 8), "float32")
    b.emit(DmaCopy(dst=t[0:16, :], src=x[:, :]))
    b.emit(TensorScalar(dst=t[:, :], src=t[:, :], op0="add", operand0=1.0))  # reads unwritten partitions
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    return b.build()


# --- poison and uninitialized reads ---------------------------------------------------------------


def test_never_written_sbuf_and_psum_read_as_nan():
    run = execute(
        [TensorCopy(dst=sb("float32", 4, 4, offset=512), src=sb("bfloat16", 4, 4)), TensorCopy(dst=sb("float32", 4, 4, offset=1024), src=ps("float32", 4, 4))],
        fetch=[sb("float32", 4, 4, offset=512), sb("float32", 4, 4, offset=1024)],
    )
    assert np.isnan(run[0]).all() and np.isnan(run[1]).all()


def test_default_policy_computes_with_nan():
    program = uninitialized_program()
    x = np.ones((16, 8), np.float32)
    bufs = buffers_for(program, x=x)
    ExactExecutor(TRN2).run(program, bufs)
    y = read_back(program, bufs, "y")
    assert (y[:16] == 2.0).all() and np.isnan(y[16:]).all()


def test_error_policy_names_memory_partition_and_source_line():
    program = uninitialized_program()
    with pytest.raises(UninitializedReadError) as info:
        ExactExecutor(TRN2, uninitialized="error").run(program, buffers_for(program, x=np.ones((16, 8), np.float32)))
    err = info.value
    assert isinstance(err, ValidationError) and isinstance(err, NeuronSimError)
    assert err.rule == "memory.uninitialized_read"
    assert err.location == program.instructions[1].location and HERE in err.location
    text = str(err)
    assert "SBUF" in text and "partition 16" in text and "512 byte(s)" in text and HERE in text and "src" in text


def test_error_policy_accepts_fully_written_reads():
    b = ProgramBuilder("ok", TRN2)
    x, y = b.input("x", (16, 8), "float32"), b.output("y", (16, 8), "float32")
    t = b.sbuf((16, 8), "float32")
    b.emit(DmaCopy(dst=t[:, :], src=x[:, :]))
    b.emit(TensorScalar(dst=t[:, :], src=t[:, :], op0="multiply", operand0=2.0))
    b.emit(DmaCopy(dst=y[:, :], src=t[:, :]))
    program = b.build()
    bufs = buffers_for(program, x=np.full((16, 8), 3.0, np.float32))
    ExactExecutor(TRN2, uninitialized="error").run(program, bufs)
    assert (read_back(program, bufs, "y") == 6.0).all()


def test_accumulating_into_unwritten_psum_is_reported():
    st, mv, dst = sb("bfloat16", 32, 16), sb("bfloat16", 32, 16, offset=256), ps("float32", 16, 16)
    pre = [(st, np.ones((32, 16), BF16)), (mv, np.ones((32, 16), BF16))]
    with pytest.raises(UninitializedReadError) as info:
        execute([Matmul(dst=dst, stationary=st, moving=mv, accumulate=True)], preload=pre, uninitialized="error")
    assert "PSUM" in str(info.value) and "accumulate" in str(info.value)
    run = execute(
        [Matmul(dst=dst, stationary=st, moving=mv), Matmul(dst=dst, stationary=st, moving=mv, accumulate=True)],
        preload=pre,
        fetch=[dst],
        uninitialized="error",
    )
    assert (run[0] == 64.0).all()


def test_warn_policy_warns_once_per_source_line_and_keeps_going():
    b = ProgramBuilder("warn", TRN2)
    y = b.output("y", (4, 4), "float32")
    t = b.sbuf((4, 4), "float32")
    u = b.sbuf((4, 4), "float32")
    for _ in range(5):  # one source line, five instructions
        b.emit(TensorScalar(dst=u[:, :], src=t[:, :], op0="add", operand0=1.0))
    b.emit(TensorCopy(dst=u[:, :], src=t[:, :]))  # another line
    b.emit(DmaCopy(dst=y[:, :], src=u[:, :]))
    program = b.build()
    bufs = buffers_for(program)
    ex = ExactExecutor(TRN2, uninitialized="warn")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ex.run(program, bufs)
        ex.run(program, bufs)  # the same lines again: no new warnings
    messages = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert len(messages) == 2, messages
    assert all("memory.uninitialized_read" in m and HERE in m for m in messages)
    assert "TENSOR_SCALAR" in messages[0] and "TENSOR_COPY" in messages[1]
    assert np.isnan(read_back(program, bufs, "y")).all()


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError, match="'sometimes'"):
        ExactExecutor(TRN2, uninitialized="sometimes")


def test_each_launch_starts_poisoned_unless_reset_is_false():
    t = sb("float32", 2, 2)
    ex = ExactExecutor(TRN2)
    from neuron_sim.isa import Memset

    ex.run(Program("set", [], [Memset(dst=t, value=5.0)]), {})
    assert (ex.view(t) == 5.0).all()
    ex.run(Program("noop", [], []), {}, reset=False)
    assert (ex.view(t) == 5.0).all()
    ex.run(Program("noop", [], []), {})
    assert np.isnan(ex.view(t)).all()


# --- error context --------------------------------------------------------------------------------


def test_unbound_and_undersized_tensors():
    program = uninitialized_program()
    with pytest.raises(ExecutionError) as info:
        ExactExecutor(TRN2).run(program, {"x": np.zeros(512, np.uint8)})
    assert "'y'" in str(info.value) and "uninit" in str(info.value)
    with pytest.raises(ExecutionError) as info:
        ExactExecutor(TRN2).run(program, {"x": np.zeros(100, np.uint8), "y": np.zeros(1024, np.uint8)})
    assert "'x'" in str(info.value) and "100 bytes" in str(info.value) and "512" in str(info.value)


def test_hbm_access_to_a_tensor_outside_the_table():
    ex = ExactExecutor(TRN2)
    inst = DmaCopy(dst=sb("float32", 1, 1), src=hb("ghost", "float32", (1, 1)), location="k.py:1")
    with pytest.raises(ExecutionError) as info:
        ex.run(Program("p", [], [inst]), {})
    assert "'ghost'" in str(info.value) and "DMA_COPY at k.py:1" in str(info.value)


def test_runtime_rule_errors_carry_the_instruction_location():
    b = ProgramBuilder("gather", TRN2)
    table = b.input("table", (4, 8), "float32")
    idx = b.sbuf((2, 1), "int32")
    out = b.sbuf((2, 8), "float32")
    from neuron_sim.isa import Iota

    b.emit(Iota(dst=idx[:, :], pattern=((1, 1),), offset=3, channel_multiplier=1))  # indices 3, 4
    b.emit(DmaIndirect(direction="gather", onchip=out[:, :], table=table[:, :], index=idx[:, :]))
    program = b.build()
    with pytest.raises(AccessPatternError) as info:
        ExactExecutor(TRN2).run(program, buffers_for(program, table=np.zeros((4, 8), np.float32)))
    assert info.value.rule == "dma.index_out_of_bounds" and info.value.location == program.instructions[1].location
    assert HERE in str(info.value)


def test_unexpected_failures_become_execution_errors_naming_the_instruction(monkeypatch):
    def broken(ex, inst):
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(semantics.HANDLERS, TensorCopy, broken)
    inst = TensorCopy(dst=sb("float32", 1, 1), src=sb("float32", 1, 1, offset=4), location="kernel.py:42")
    with pytest.raises(ExecutionError) as info:
        ExactExecutor(TRN2).run(Program("p", [], [inst]), {})
    assert "TENSOR_COPY" in str(info.value) and "kernel.py:42" in str(info.value) and "boom" in str(info.value)
    assert isinstance(info.value.__cause__, ZeroDivisionError)


# --- run-time (register) offsets ------------------------------------------------------------------


def test_dynamic_offsets_use_register_values():
    x = np.arange(2 * 16, dtype=np.float32).reshape(2, 16)
    base, dst = sb("float32", 2, 16), sb("float32", 2, 4, offset=1024)
    dyn = AccessPattern("sbuf", "float32", 0, 2, ((1, 4),), offset=4, dynamic=(("r0", 4),))
    ex = ExactExecutor(TRN2)
    ex.view(base)[...] = x
    ex.registers["r0"] = 2
    ex.run(Program("p", [], [TensorCopy(dst=dst, src=dyn)]), {}, reset=False)
    np.testing.assert_array_equal(ex.view(dst), x[:, 9:13])  # element 1 + 2 * 4


def test_missing_register_and_out_of_partition_offsets_are_clean_errors():
    dyn = AccessPattern("sbuf", "float32", 0, 2, ((1, 4),), offset=0, dynamic=(("r0", 1),))
    program = Program("p", [], [TensorCopy(dst=sb("float32", 2, 4, offset=1024), src=dyn, location="loop.py:5")])
    with pytest.raises(ExecutionError) as info:
        ExactExecutor(TRN2).run(program, {})
    assert "'r0'" in str(info.value) and "TENSOR_COPY at loop.py:5" in str(info.value)
    ex = ExactExecutor(TRN2, uninitialized="error")
    ex.registers["r0"] = TRN2.sbuf_bytes_per_partition // 4 - 2  # last two elements + two past the end
    with pytest.raises(AccessPatternError) as info:
        ex.run(program, {})
    assert info.value.rule == "ap.free_bounds" and str(TRN2.sbuf_bytes_per_partition) in str(info.value)
    ex.registers["r0"] = -1
    with pytest.raises(AccessPatternError, match="-4"):
        ex.run(program, {})


# --- program-level validation ---------------------------------------------------------------------


def _program(tensors, instructions):
    return Program("p", tensors, instructions)


def test_program_rules():
    x = TensorDecl("x", (4, 8), "float32")
    load = DmaCopy(dst=sb("float32", 4, 8), src=hb("x", "float32", (4, 8)), location="k.py:7")
    cases = [
        (_program([x], [DmaCopy(dst=sb("float32", 4, 8), src=hb("nope", "float32", (4, 8)), location="k.py:9")]), "program.unknown_tensor", "'nope'"),
        (_program([x], [DmaCopy(dst=hb("x", "float32", (4, 8)), src=sb("float32", 4, 8), location="k.py:9")]), "program.write_to_input", "'x'"),
        (_program([x, TensorDecl("x", (2,), "int32", "output")], [load]), "program.duplicate_tensor", "['x']"),
        (_program([x], [load, "DMA x"]), "program.not_an_instruction", "str"),
        (_program([x], [DmaCopy(dst=sb("float32", 4, 9), src=hb("x", "float32", (4, 9)), location="k.py:9")]), "ap.tensor_bounds", "144"),
    ]
    for program, rule, value in cases:
        with pytest.raises(ValidationError) as info:
            program.validate(TRN2)
        assert info.value.rule == rule, (rule, info.value)
        assert value in str(info.value)
        if rule in ("program.unknown_tensor", "program.write_to_input", "ap.tensor_bounds"):
            assert info.value.location == "k.py:9" and "k.py:9" in str(info.value)
    _program([x], [load]).validate(TRN2)
    _program([TensorDecl("x", (4, 8), "float32", "inout")], [load, DmaCopy(dst=hb("x", "float32", (4, 8)), src=sb("float32", 4, 8))]).validate(TRN2)


@pytest.mark.parametrize("kwargs, rule, value", [(dict(kind="scratch"), "program.tensor_kind", "'scratch'"), (dict(shape=(4, -1)), "program.tensor_shape", "-1")])
def test_tensor_decl_rules(kwargs, rule, value):
    base = dict(name="t", shape=(4, 4), dtype="float32")
    base.update(kwargs)
    with pytest.raises(ValidationError) as info:
        TensorDecl(**base)
    assert info.value.rule == rule and value in str(info.value)


def test_instruction_validation_errors_carry_location():
    inst = TensorScalar(dst=sb("float32", 4, 4), src=sb("float32", 4, 5), op0="add", operand0=1.0, location="kern.py:12")
    with pytest.raises(ValidationError) as info:
        inst.validate(TRN2)
    assert info.value.location == "kern.py:12" and str(info.value).endswith("(at kern.py:12)")


# --- whole programs -------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype, out_dtype", [("bfloat16", "bfloat16"), ("float32", "float32"), ("bfloat16", "float32")])
def test_tiled_matmul_sample(dtype, out_dtype):
    m, k, n = 256, 256, 1024
    program = tiled_matmul(m, k, n, dtype=dtype, out_dtype=out_dtype, arch=TRN2, block_n=1)
    from neuron_sim import dtypes

    rng = np.random.default_rng(7)
    lhsT = rng.standard_normal((k, m)).astype(np.float32).astype(dtypes.to_numpy(dtype))
    rhs = rng.standard_normal((k, n)).astype(np.float32).astype(dtypes.to_numpy(dtype))
    bufs = buffers_for(program, lhsT=lhsT, rhs=rhs)
    ExactExecutor(TRN2, uninitialized="error").run(program, bufs)
    out = read_back(program, bufs, "out").astype(np.float64)
    exact = lhsT.astype(np.float64).T @ rhs.astype(np.float64)
    tol = 2.0**-8 if out_dtype == "bfloat16" else 1e-5
    np.testing.assert_allclose(out, exact, rtol=tol, atol=tol * np.abs(exact).max())


def test_copy_and_chain_samples():
    program = hbm_to_sbuf_copy(nbytes_per_partition=1024, chunks=4, arch=TRN2)
    bufs = buffers_for(program, src=np.ones((128, 256), np.float32))
    ExactExecutor(TRN2, uninitialized="error").run(program, bufs)
    program = dependent_chain(10, arch=TRN2)
    bufs = buffers_for(program, x=np.array([[1.5]], np.float32))
    ExactExecutor(TRN2, uninitialized="error").run(program, bufs)
    assert read_back(program, bufs, "x").tolist() == [[11.5]]


def test_activation_evacuating_psum_end_to_end():
    b = ProgramBuilder("act", TRN2)
    x = b.input("x", (8, 16), "bfloat16")
    y = b.output("y", (16, 16), "float32")
    xt = b.sbuf((8, 16), "bfloat16")
    acc = b.psum((16, 16), "float32")
    res = b.sbuf((16, 16), "float32")
    b.emit(DmaCopy(dst=xt[:, :], src=x[:, :]))
    b.emit(Matmul(dst=acc[:, :], stationary=xt[:, :], moving=xt[:, :]))
    b.emit(Activation(dst=res[:, :], src=acc[:, :], func="relu", bias=-1.0))
    b.emit(DmaCopy(dst=y[:, :], src=res[:, :]))
    program = b.build()
    xs = np.random.default_rng(8).standard_normal((8, 16)).astype(np.float32).astype(BF16)
    bufs = buffers_for(program, x=xs)
    ExactExecutor(TRN2, uninitialized="error").run(program, bufs)
    gram = xs.astype(np.float64).T @ xs.astype(np.float64)
    np.testing.assert_allclose(read_back(program, bufs, "y"), np.maximum(gram - 1.0, 0.0), rtol=1e-6, atol=1e-6)
