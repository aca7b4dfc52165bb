"""Property-based fuzzing of small random programs.

A random program is validated and run on the exact executor. The only acceptable failures are
NeuronSimError subclasses (a rule naming what is wrong); an ExecutionError that wraps anything
else is an internal crash and fails the test, as does any other exception. Valid programs also
survive serialization unchanged, and a differential fuzz checks random fp32/bf16 elementwise
chains against a float64 numpy model.

Programs include register moves, run-time offsets and loops - balanced ones with static or
register bounds and while loops, and unbalanced ones (which must be refused by a rule). A
loop-focused property checks that the executor runs each loop as often as the timing model issues
it (its trip counts replayed by ``issued_stream``).
"""

import json
import warnings
from unittest import mock

import numpy as np
from helpers import TRN2, TRN3, execute, rounded, sb
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from neuron_sim import ExactExecutor, ExecutionError, NeuronSimError, Program, TensorDecl, ValidationError, dtypes, isa
from neuron_sim.executor import exact
from neuron_sim.isa import ops
from neuron_sim.memory.access_pattern import AccessPattern
from neuron_sim.timing import estimate
from neuron_sim.timing.loops import issued_stream

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

ONCHIP_DTYPES = ["float32", "bfloat16", "float16", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float8_e8m0fnu", "int32", "uint32", "int16", "uint8", "int8", "tfloat32", "bool"]
TENSORS = [
    TensorDecl("x", (128, 64), "float32", "input"),
    TensorDecl("h", (64, 32), "bfloat16", "input"),
    TensorDecl("ix", (128, 1), "int32", "input"),
    TensorDecl("y", (128, 64), "float32", "output"),
    TensorDecl("z", (64, 32), "bfloat16", "inout"),
]
ALL_ALU_OPS = sorted(ops.ALL_BINARY_OPS) + ["bogus"]
ARITH_OPS = sorted(ops.ARITHMETIC_OPS)
ACT_FUNCS = sorted(ops.ACTIVATIONS) + ["bogus"]
REDUCE = sorted(ops.REDUCE_OPS) + ["bogus"]
# Registers: "i"/"j" count for loops, "c" is a while condition, "n" a bound, "r" anything; "" is
# not a name. A fuzzed loop may never end (a condition nobody clears, a bound loaded from random
# memory): run_program lowers the executor's iteration guard so that ends in a clean error fast.
REGISTERS = ["i", "j", "c", "n", "r"]
MAX_FUZZ_ITERATIONS = 12


def crash_free(err: BaseException) -> None:
    """Fail unless ``err`` is a clean simulator error (not an internal exception in disguise)."""
    if not isinstance(err, NeuronSimError):
        raise err
    if isinstance(err, ExecutionError) and err.__cause__ is not None and not isinstance(err.__cause__, NeuronSimError):
        raise AssertionError(f"internal error wrapped as ExecutionError: {err!r}") from err.__cause__


# --- strategies -----------------------------------------------------------------------------------


@st.composite
def onchip_ap(draw, memory=None, dtype=None, partitions=None, free=None):
    memory = memory or draw(st.sampled_from(["sbuf", "sbuf", "sbuf", "psum"]))
    dtype = dtype or draw(st.sampled_from(ONCHIP_DTYPES))
    count = partitions or draw(st.sampled_from([1, 4, 16, 32, 64, 128]))
    # Mostly a legal start for the count (quadrant rules), sometimes not.
    legal = [0] if count > 64 else [0, 64] if count > 32 else [0, 32, 64, 96]
    start = draw(st.sampled_from(legal)) if usually(draw, 9) else draw(st.sampled_from([8, 16, 96]))
    if free is None:
        free = draw(st.sampled_from([(1,), (8,), (16,), (4, 4), (2, 3, 4), (6,), (32,), (2,)]))
    size = dtypes.itemsize(dtype)
    region = draw(st.integers(0, 3))
    bank = 2048 if memory == "psum" else 4096
    offset = region * bank + draw(st.sampled_from([0, 0, 4, 1000]))
    strides, acc = [], 1
    for c in reversed(free):
        strides.append(acc)
        acc *= c
    pattern = tuple(zip(reversed(strides), free))
    if draw(st.booleans()) and len(pattern) == 1 and pattern[0][1] > 1:  # reversed or strided walks
        pattern = ((draw(st.sampled_from([-1, 2])), pattern[0][1]),)
        if pattern[0][0] < 0:
            offset += (pattern[0][1] - 1) * size
    return AccessPattern(memory, dtype, start, count, pattern, offset, dynamic=dynamic_offset(draw))


@st.composite
def hbm_ap(draw, rows=None, cols=None):
    t = draw(st.sampled_from(TENSORS))
    rows = rows or draw(st.sampled_from([1, 4, 16, 32, 64, 128]))
    cols = cols or draw(st.sampled_from([1, 8, 16, 32]))
    row0 = draw(st.integers(0, 8))
    row_len = t.shape[1]
    return AccessPattern("hbm", t.dtype, 0, rows, ((1, cols),), offset=row0 * row_len * dtypes.itemsize(t.dtype), tensor=t.name,
                         partition_stride=row_len, dynamic=dynamic_offset(draw, (row_len, 1, -row_len)))


def dynamic_offset(draw, strides=(1, 4, 64, -1)):
    """Now and then a run-time register offset (NKI's scalar_offset)."""
    if usually(draw, 10):
        return ()
    return ((draw(st.sampled_from(REGISTERS)), draw(st.sampled_from(strides))),)


def register_name(draw):
    return draw(st.sampled_from(REGISTERS)) if usually(draw, 12) else draw(st.sampled_from(["", None]))


def register_tile(draw):
    """Mostly one int32 in SBUF, sometimes a tile the register rules refuse."""
    if usually(draw):
        return draw(onchip_ap(memory="sbuf", dtype=draw(st.sampled_from(["int32", "int32", "uint8", "int16", "uint32"])), partitions=1, free=(1,)))
    return draw(onchip_ap(free=draw(st.sampled_from([(1,), (2,)]))))


def loop_bound(draw, low, high):
    """A small int, a register, or (rarely) something the loop rules refuse."""
    return draw(st.sampled_from(["int"] * 4 + ["register"] * 3 + ["bad"]).flatmap(
        lambda kind: {"int": st.integers(low, high), "register": st.sampled_from(REGISTERS),
                      "bad": st.sampled_from([1.5, None, 2**31, ""])}[kind]))


def loop_start(draw, register):
    if usually(draw, 4):
        step = draw(st.sampled_from([1, 1, 2, 3])) if usually(draw, 9) else draw(st.sampled_from([0, -1, 1.0]))
        return isa.LoopStart(register=register, lower=loop_bound(draw, -2, 3), upper=loop_bound(draw, -1, 6), step=step)
    kind = "while" if usually(draw, 9) else "until"
    return isa.LoopStart(register=register, kind=kind)


def scalar_operand(draw, partitions):
    return draw(
        st.sampled_from(["float", "float", "int", "tile", "tile", "none", "any-tile"]).flatmap(
            lambda kind: {
                "float": st.floats(-4, 4, width=32),
                "int": st.integers(-3, 0xFFFFFFFF),
                "tile": onchip_ap(partitions=partitions, free=(1,)),
                "none": st.none(),
                "any-tile": onchip_ap(free=(1,)),
            }[kind]
        )
    )


def usually(draw, weight=6) -> bool:
    """True most of the time (hypothesis draws small integers often, so use a weighted sample)."""
    return draw(st.sampled_from([True] * weight + [False]))


def alu_op(draw):
    return draw(st.sampled_from(ARITH_OPS)) if usually(draw, 4) else draw(st.sampled_from(ALL_ALU_OPS))


def engine_of(draw, cls):
    """Mostly an engine the instruction runs on, sometimes one it does not."""
    return draw(st.sampled_from(list(cls.engines))) if usually(draw, 9) else "sync"


@st.composite
def instruction(draw):
    kind = draw(st.sampled_from(sorted(isa.OPCODES)))
    ap = lambda **kw: draw(onchip_ap(**kw))  # noqa: E731
    P = draw(st.sampled_from([1, 16, 32, 64, 128]))
    free = draw(st.sampled_from([(8,), (4, 4), (16,), (1,)]))
    same = lambda **kw: draw(onchip_ap(partitions=P, free=free, **kw))  # noqa: E731
    eng = lambda cls: engine_of(draw, cls)  # noqa: E731
    if kind == "DMA_COPY":
        src = draw(st.one_of(hbm_ap(), onchip_ap()))
        if usually(draw):
            dst = draw(st.one_of(hbm_ap(rows=src.partition_count, cols=src.free_size), onchip_ap(memory="sbuf", partitions=src.partition_count, free=(src.free_size,))))
        else:
            dst = draw(st.one_of(hbm_ap(), onchip_ap()))
        return isa.DmaCopy(dst=dst, src=src, engine=draw(st.sampled_from(["sync", "scalar", "gpsimd"])), dge=draw(st.sampled_from(["none", "hwdge", "swdge"])))
    if kind == "DMA_TRANSPOSE":
        src = draw(st.one_of(hbm_ap(), onchip_ap()))
        dst = ap(memory="sbuf", dtype=src.dtype, partitions=min(src.free_size, 128), free=(src.partition_count,))
        return isa.DmaTranspose(dst=dst, src=src)
    if kind == "DMA_INDIRECT":
        rows = draw(st.sampled_from([4, 16, 32]))
        table = AccessPattern("hbm", "float32", 0, 64, ((1, 8),), tensor=draw(st.sampled_from(["x", "y"])), partition_stride=64)
        return isa.DmaIndirect(
            direction=draw(st.sampled_from(["gather", "scatter"])),
            onchip=ap(memory="sbuf", partitions=rows, free=(8,)),
            table=table,
            index=ap(memory="sbuf", dtype=draw(st.sampled_from(["int32", "int16", "float32"])), partitions=rows, free=(1,)),
            accumulate=draw(st.booleans()),
            oob_mode=draw(st.sampled_from(["error", "skip"])),
        )
    if kind == "MATMUL":
        k = draw(st.sampled_from([16, 32, 128]))
        m = draw(st.sampled_from([8, 32, 128]))
        n = draw(st.sampled_from([8, 64, 512]))
        dt = draw(st.sampled_from(["bfloat16", "float32", "float8_e4m3", "float8_e5m2", "float8_e4m3fn", "float16", "tfloat32", "int8"]))
        double = draw(st.booleans()) and dt.startswith("float8")
        rows = 2 if double else 1
        return isa.Matmul(
            dst=ap(memory="psum", dtype=draw(st.sampled_from(["float32", "float32", "float32", "bfloat16"])), partitions=m, free=(n,)),
            stationary=ap(memory="sbuf", dtype=dt, partitions=k, free=(rows * m,)),
            moving=ap(memory="sbuf", dtype=dt, partitions=k, free=(rows * n,)),
            accumulate=draw(st.booleans()),
            perf_mode="double_row" if double else "none",
        )
    if kind == "TRANSPOSE":
        src = ap()
        return isa.Transpose(dst=ap(dtype=src.dtype, partitions=min(src.free_size, 128), free=(src.partition_count,)), src=src, engine=eng(isa.Transpose))
    if kind == "TENSOR_TENSOR":
        return isa.TensorTensor(dst=same(), in0=same(), in1=same(), op=alu_op(draw), engine=eng(isa.TensorTensor))
    if kind == "TENSOR_SCALAR":
        op1 = None if draw(st.booleans()) else alu_op(draw)
        return isa.TensorScalar(
            dst=same(), src=same(), op0=alu_op(draw) if usually(draw, 3) else draw(st.sampled_from(sorted(ops.UNARY_ALU_OPS))),
            operand0=scalar_operand(draw, P), reverse0=draw(st.booleans()),
            op1=op1, operand1=(scalar_operand(draw, P) if op1 is not None or not usually(draw) else None), reverse1=draw(st.booleans()),
            engine=eng(isa.TensorScalar),
        )
    if kind == "SCALAR_TENSOR_TENSOR":
        return isa.ScalarTensorTensor(
            dst=same(), src=same(), op0=alu_op(draw), operand0=scalar_operand(draw, P) or 1.0,
            op1=alu_op(draw), in1=same(), reverse0=draw(st.booleans()), reverse1=draw(st.booleans()),
            engine=eng(isa.ScalarTensorTensor),
        )
    if kind == "TENSOR_REDUCE":
        src_free = draw(st.sampled_from([(8,), (4, 4), (2, 3, 4)]))
        src = ap(partitions=P, free=src_free)
        n = len(src_free)
        reduced = draw(st.integers(1, n))
        axes = tuple(range(n - reduced + 1, n + 1)) if usually(draw) else draw(st.sampled_from([(1,), (2,), (), (0,)]))
        kept = int(np.prod(src_free[: n - reduced])) if usually(draw) else draw(st.sampled_from([2, 5]))
        return isa.TensorReduce(dst=ap(partitions=P, free=(kept,)), src=src, op=draw(st.sampled_from(REDUCE)), axes=axes, negate=draw(st.booleans()), engine=eng(isa.TensorReduce))
    if kind == "TENSOR_COPY":
        return isa.TensorCopy(dst=same(), src=same(), engine=eng(isa.TensorCopy))
    if kind == "TENSOR_COPY_PREDICATED":
        return isa.CopyPredicated(dst=same(), src=same(), predicate=same(), reverse=draw(st.booleans()))
    if kind == "SELECT":
        on_false = draw(st.one_of(st.floats(-10, 10, width=32), onchip_ap(partitions=P, free=free)))
        return isa.Select(dst=same(), predicate=same(), on_true=same(), on_false=on_false, engine=eng(isa.Select))
    if kind == "MEMSET":
        value = draw(st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.integers(-(2**40), 2**40)))
        return isa.Memset(dst=ap(), value=value, engine=eng(isa.Memset))
    if kind == "RECIPROCAL":
        return isa.Reciprocal(dst=same(), src=same())
    if kind == "BN_STATS":
        return isa.BnStats(dst=ap(partitions=P, free=(6,), dtype="float32"), src=same())
    if kind == "BN_AGGR":
        return isa.BnAggr(dst=ap(partitions=P, free=(2,)), src=ap(partitions=P, free=draw(st.sampled_from([(6,), (12,), (2, 6), (5,)]))))
    if kind == "STREAM_SHUFFLE":
        if usually(draw):
            mask = tuple(draw(st.lists(st.sampled_from(list(range(32)) + [255]), min_size=32, max_size=32)))
        else:
            mask = tuple(draw(st.lists(st.sampled_from(list(range(32)) + [255, 40]), min_size=31, max_size=33)))
        return isa.StreamShuffle(dst=same(), src=same(), mask=mask)
    if kind == "ACTIVATE":
        reduce = draw(st.sampled_from([None, "add", "maximum", "minimum", "multiply"]))
        return isa.Activation(
            dst=same(), src=same(), func=draw(st.sampled_from(ACT_FUNCS)),
            scale=draw(st.one_of(st.floats(-3, 3, width=32), onchip_ap(partitions=P, free=(1,)))),
            bias=draw(st.one_of(st.none(), st.floats(-3, 3, width=32), onchip_ap(partitions=P, free=(1,)))),
            reduce_op=reduce, reduce_res=ap(partitions=P, free=(1,)) if reduce or draw(st.booleans()) else None,
        )
    if kind in ("IOTA", "AFFINE_SELECT", "RANDOM_WORDS"):
        counts = {(8,): [(8,), (2, 4), (2, 2, 2)], (4, 4): [(16,), (4, 4), (2, 8)], (16,): [(16,), (4, 4)], (1,): [(1,)]}[free]
        if usually(draw):
            pattern = tuple((draw(st.integers(-5, 5)), c) for c in draw(st.sampled_from(counts)))
        else:
            pattern = tuple(draw(st.lists(st.tuples(st.integers(-5, 5), st.sampled_from([1, 2, 4, 8])), min_size=0, max_size=5)))
        dst = ap(memory=draw(st.sampled_from(["sbuf", "sbuf", "psum"])), partitions=P, free=free)
        if kind == "RANDOM_WORDS":
            return isa.RandomWords(
                dst=ap(partitions=P, free=free, dtype=draw(st.sampled_from(["int32", "uint32", "float32"]))),
                key=ap(partitions=draw(st.sampled_from([1, 1, 2])), free=draw(st.sampled_from([(4,), (4,), (1,)])),
                       dtype=draw(st.sampled_from(["int32", "uint32", "float32"]))),
                count=draw(st.integers(-1, 2**12)), pattern=pattern, offset=draw(st.integers(-10, 100)),
                channel_multiplier=draw(st.integers(-3, 8)), engine=eng(isa.RandomWords))
        if kind == "IOTA":
            return isa.Iota(dst=dst, pattern=pattern, offset=draw(st.integers(-100, 100)), channel_multiplier=draw(st.integers(-3, 3)))
        return isa.AffineSelect(
            dst=dst, src=same(), pattern=pattern, on_false_value=draw(st.floats(width=32)), offset=draw(st.integers(-10, 10)),
            channel_multiplier=draw(st.integers(-2, 2)), cmp_op=draw(st.sampled_from(list(ops.COMPARISON_OPS) + ["add"])),
        )
    if kind == "PARTITION_REDUCE":
        return isa.PartitionReduce(dst=ap(partitions=draw(st.sampled_from([1, 2])), free=free), src=same(), op=draw(st.sampled_from(REDUCE)))
    if kind == "LOCAL_GATHER":
        e = draw(st.sampled_from([1, 2, 3]))
        n = draw(st.sampled_from([1, 2, 4]))
        return isa.LocalGather(
            dst=ap(memory="sbuf", partitions=P, free=(n * e,)),
            src=ap(memory="sbuf", partitions=P, free=draw(st.sampled_from([(4,), (8,)]))),
            index=ap(memory="sbuf", dtype=draw(st.sampled_from(["int32", "uint8", "float32"])), partitions=P, free=(n,)),
            num_elem_per_idx=e,
        )
    if kind == "TENSOR_SCALAR_CUMULATIVE":
        return isa.TensorScalarCumulative(
            dst=same(), src=same(), op0=alu_op(draw), imm0=scalar_operand(draw, P) or 1.0,
            op1=draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum", "divide"])),
            imm1=draw(st.one_of(st.none(), st.floats(-3, 3, width=32))), reverse0=draw(st.booleans()),
            reduce_cmd=draw(st.sampled_from(["reset_reduce", "reduce", "load_reduce", "idle"])),
        )
    if kind == "TENSOR_TENSOR_SCAN":
        return isa.TensorTensorScan(dst=same(), data0=same(), data1=same(), initial=scalar_operand(draw, P) or 0.0,
                                    op0=alu_op(draw), op1=alu_op(draw), reverse0=draw(st.booleans()),
                                    reverse1=draw(st.booleans()))
    if kind in ("SELECT_REDUCE", "RANGE_SELECT"):
        cmd = draw(st.sampled_from(["idle", "reset", "reset_reduce", "reduce", "load_reduce"]))
        res = ap(partitions=P, free=(1,)) if draw(st.booleans()) else None
        reduce_op = "maximum" if usually(draw) else "add"
        if kind == "SELECT_REDUCE":
            return isa.SelectReduce(dst=same(), predicate=same(), on_true=same(),
                                    on_false=draw(st.one_of(st.floats(-10, 10, width=32), onchip_ap(partitions=P, free=(1,)))),
                                    reduce_res=res, reduce_cmd=cmd, reduce_op=reduce_op, reverse_pred=draw(st.booleans()))
        return isa.RangeSelect(dst=same(), on_true=same(), comp_op0=draw(st.sampled_from(list(ops.COMPARISON_OPS) + ["add"])),
                               comp_op1=draw(st.sampled_from(list(ops.COMPARISON_OPS))), bound0=ap(partitions=P, free=(1,)),
                               bound1=ap(partitions=P, free=(1,)), on_false_value=draw(st.floats(width=32)),
                               range_start=draw(st.integers(-4, 4)), reduce_res=res, reduce_cmd=cmd, reduce_op=reduce_op)
    if kind in ("MAX8", "FIND_INDEX8", "MATCH_REPLACE8"):
        data = ap(partitions=P, free=draw(st.sampled_from([(8,), (16,), (4,)])))
        eight = lambda **kw: ap(partitions=P, free=(8,), **kw)  # noqa: E731
        if kind == "MAX8":
            return isa.Max8(dst=eight(), src=data)
        if kind == "FIND_INDEX8":
            return isa.FindIndex8(dst=eight(dtype=draw(st.sampled_from(["uint32", "uint16", "float32"]))), data=data, vals=eight())
        return isa.MatchReplace8(dst=ap(partitions=P, free=(data.free_size,)), data=data, vals=eight(),
                                 imm=draw(st.floats(width=32)), dst_idx=eight() if draw(st.booleans()) else None)
    if kind == "SEQUENCE_BOUNDS":
        n = draw(st.sampled_from([1, 4, 8]))
        return isa.SequenceBounds(dst=ap(partitions=1, free=(2 * n,), dtype=draw(st.sampled_from(["int32", "float32"]))),
                                  segment_ids=ap(partitions=draw(st.sampled_from([1, 1, 2])), free=(n,)))
    if kind == "RNG_SEED":
        return isa.SetRngSeed(seed=draw(st.one_of(st.integers(-5, 2**33), onchip_ap(partitions=1, free=(1,)))),
                              engine=eng(isa.SetRngSeed))
    if kind == "RANDOM_FILL":
        return isa.RandomFill(dst=ap(), engine=eng(isa.RandomFill))
    if kind == "DROPOUT":
        return isa.Dropout(dst=same(), src=same(), prob=draw(st.one_of(st.floats(-0.5, 1.5, width=32),
                                                                       onchip_ap(partitions=P, free=(1,)))))
    if kind == "SEM_SIGNAL":
        return isa.SemaphoreSignal(semaphore="s", value=draw(st.integers(-1, 3)), engine=eng(isa.SemaphoreSignal))
    if kind == "SEM_WAIT":
        return isa.SemaphoreWait(semaphore="s", value=draw(st.integers(-1, 3)), engine=eng(isa.SemaphoreWait))
    if kind == "BARRIER":
        return isa.Barrier(engine=draw(st.sampled_from(["sync", "vector"])))
    if kind == "REG_SET":
        value = draw(st.one_of(st.integers(-3, 6), st.sampled_from(REGISTERS))) if usually(draw, 9) else \
            draw(st.sampled_from([2**31, -(2**31) - 1, 1.5, None, ""]))
        return isa.RegisterSet(register=register_name(draw), value=value, engine=eng(isa.RegisterSet))
    if kind == "REG_LOAD":
        return isa.RegisterLoad(register=register_name(draw), src=register_tile(draw), engine=eng(isa.RegisterLoad))
    if kind == "REG_STORE":
        return isa.RegisterStore(dst=register_tile(draw), register=register_name(draw), engine=eng(isa.RegisterStore))
    # A lone loop start or end (balanced loops come from ``block``): these make unbalanced programs.
    if kind == "LOOP_START":
        return loop_start(draw, register_name(draw))
    if kind == "LOOP_END":
        return isa.LoopEnd(register=register_name(draw))
    raise AssertionError(f"no generator for {kind}")


@st.composite
def block(draw, depth=0):
    """One instruction, or (sometimes) a loop around a few blocks: balanced, with its bound or
    condition usually set just before it, now and then closed on the wrong register."""
    if depth >= 2 or usually(draw, 3):
        return [draw(instruction())]
    register = draw(st.sampled_from(["i", "j"] if depth == 0 else ["j", "i"])) if usually(draw) else "c"
    start = loop_start(draw, register) if register != "c" else isa.LoopStart(register="c", kind="while")
    setup = []
    for bound in (start.lower, start.upper) if start.kind == "for" else ("c",):
        if isinstance(bound, str) and bound and usually(draw, 4):
            setup.append(isa.RegisterSet(register=bound, value=draw(st.integers(0, 4))))
    inner = [inst for b in draw(st.lists(block(depth + 1), max_size=3)) for inst in b]
    if start.kind == "while" and usually(draw, 3):  # usually the condition clears
        inner.append(isa.RegisterSet(register="c", value=draw(st.sampled_from([0, 0, 1]))))
    end = isa.LoopEnd(register=register if usually(draw, 12) else draw(st.sampled_from(REGISTERS)))
    return setup + [start] + inner + [end]


def flat(blocks):
    return [inst for b in blocks for inst in b]


def random_inputs(seed):
    rng = np.random.default_rng(seed)
    return {
        "x": (rng.standard_normal((128, 64)) * 3).astype(np.float32),
        "h": rng.standard_normal((64, 32)).astype(np.float32).astype(dtypes.to_numpy("bfloat16")),
        "ix": rng.integers(-2, 70, size=(128, 1)).astype(np.int32),
        "z": rng.standard_normal((64, 32)).astype(np.float32).astype(dtypes.to_numpy("bfloat16")),
    }


def bind(inputs):
    buffers = {}
    for t in TENSORS:
        if t.name in inputs:
            buffers[t.name] = np.ascontiguousarray(inputs[t.name]).reshape(-1).view(np.uint8).copy()
        else:
            buffers[t.name] = np.full(t.nbytes, 0xFF, dtype=np.uint8)
    return buffers


def run_program(program, arch, uninitialized, seed, executor=None):
    buffers = bind(random_inputs(seed))
    ex = executor or ExactExecutor(arch, uninitialized=uninitialized)
    with warnings.catch_warnings(), mock.patch.object(exact, "MAX_LOOP_ITERATIONS", MAX_FUZZ_ITERATIONS):
        warnings.simplefilter("ignore")
        ex.run(program, buffers)
    return buffers


def check_trip_counts(program, trip_counts):
    """The timing model's issue stream replays exactly the loop activations and passes that ran:
    each LOOP_START once per activation, each LOOP_END once per pass."""
    pairs = isa.loop_structure(program.instructions)
    stream, indices = issued_stream(program.instructions, trip_counts)
    assert [program.instructions[i] for i in indices] == stream
    for start, counts in trip_counts.items():
        assert indices.count(start) == len(counts), (start, counts)
        assert indices.count(pairs[start]) == sum(counts), (start, counts)


# --- properties -----------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(block(), min_size=1, max_size=8).map(flat), st.sampled_from([TRN2, TRN3]), st.sampled_from([None, "warn", "error"]), st.integers(0, 3))
def test_random_programs_give_a_result_or_a_clean_error(instructions, arch, uninitialized, seed):
    valid = []
    for inst in instructions:
        try:
            inst.validate(arch)
        except ValidationError as err:
            assert err.rule and err.detail, err
            continue
        except Exception as err:  # noqa: BLE001 - validate may only raise rule errors
            crash_free(err)
            raise AssertionError(f"validate raised a non-validation error: {err!r}") from err
        valid.append(inst)
        event(f"valid {inst.opcode}")  # --hypothesis-show-statistics shows what the fuzz reaches
    program = Program("fuzz", list(TENSORS), valid, arch.name)
    try:
        program.validate(arch)
    except ValidationError:
        return
    except Exception as err:  # noqa: BLE001
        crash_free(err)
        raise
    ex = ExactExecutor(arch, uninitialized=uninitialized)
    try:
        first = run_program(program, arch, uninitialized, seed, ex)
    except Exception as err:  # noqa: BLE001
        crash_free(err)
        event(f"run refused: {getattr(err, 'rule', type(err).__name__)}")
        return
    event(f"ran {len(valid)} instruction(s)")
    if ex.trip_counts:
        event("ran a loop")
        check_trip_counts(program, ex.trip_counts)
    # a valid program survives serialization and runs to the same bits
    back = Program.from_dict(json.loads(json.dumps(program.to_dict(), allow_nan=False)))
    back.validate(arch)
    second = run_program(back, arch, uninitialized, seed)
    for name in first:
        assert np.array_equal(first[name], second[name]), name


# --- loops: the executor's passes against the timing model's issue stream ----------------------

ACC = AccessPattern("sbuf", "float32", 0, 4, ((1, 2),))  # counts executions of the COUNT instruction
SLOT = AccessPattern("sbuf", "int32", 0, 1, ((1, 1),), offset=64)  # an integer registers go through
ROW = AccessPattern("sbuf", "float32", 0, 1, ((1, 64),), offset=128)


def counter():
    return isa.TensorScalar(dst=ACC, src=ACC, op0="add", operand0=1.0, name="count")


@st.composite
def loop_body(draw, depth):
    """Instructions that are valid on their own: counts, register moves through SBUF, a DMA whose
    window a register moves (possibly off the tensor: a clean error), and nested loops."""
    insts = []
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["count", "count", "count", "set", "store", "load", "dma", "loop"]))
        reg = draw(st.sampled_from(REGISTERS))
        if kind == "count":
            insts.append(counter())
        elif kind == "set":
            insts.append(isa.RegisterSet(register=reg, value=draw(st.one_of(st.integers(-1, 4), st.sampled_from(REGISTERS)))))
        elif kind == "store":
            insts.append(isa.RegisterStore(dst=SLOT, register=reg))
        elif kind == "load":
            insts.append(isa.RegisterLoad(register=reg, src=SLOT))
        elif kind == "dma":
            src = AccessPattern("hbm", "float32", 0, 1, ((1, 64),), tensor="x", partition_stride=64, dynamic=((reg, 64),))
            insts.append(isa.DmaCopy(dst=ROW, src=src, engine=draw(st.sampled_from(["sync", "scalar"]))))
        elif depth < 3:
            insts.extend(draw(a_loop(depth + 1)))
    return insts


@st.composite
def a_loop(draw, depth=0):
    register = draw(st.sampled_from(["i", "j", "c"]))
    if register == "c":
        start = isa.LoopStart(register="c", kind="while")
    else:
        bound = st.one_of(st.integers(-1, 5), st.sampled_from(["n", "r"]))
        start = isa.LoopStart(register=register, lower=draw(st.one_of(st.integers(-1, 2), st.sampled_from(["n", "r"]))),
                              upper=draw(bound), step=draw(st.sampled_from([1, 1, 2, 3])))
    body = draw(loop_body(depth))
    if register == "c" and usually(draw, 3):
        body.append(isa.RegisterSet(register="c", value=draw(st.sampled_from([0, 0, 1, "n"]))))
    return [start, *body, isa.LoopEnd(register=register)]


@SETTINGS
@given(st.lists(st.integers(0, 4), min_size=len(REGISTERS), max_size=len(REGISTERS)), st.lists(a_loop(), min_size=1, max_size=3).map(flat),
       st.integers(0, 3))
def test_loops_run_as_often_as_the_timing_model_issues_them(initial, loops, seed):
    setup = [isa.Memset(dst=ACC, value=0.0), isa.Memset(dst=SLOT, value=2, engine="gpsimd")]
    setup += [isa.RegisterSet(register=r, value=v) for r, v in zip(REGISTERS, initial)]
    program = Program("loops", list(TENSORS), setup + loops, "trn2")
    program.validate(TRN2)
    ex = ExactExecutor(TRN2)
    try:
        run_program(program, TRN2, None, seed, ex)
    except Exception as err:  # noqa: BLE001
        crash_free(err)
        event(f"run refused: {getattr(err, 'rule', None) or str(err).split(':')[0][:40]}")
        return
    counted = float(ex.sbuf.view(ACC)[0, 0])
    event(f"counted {min(int(counted), 10)}{'+' if counted >= 10 else ''}")
    check_trip_counts(program, ex.trip_counts)
    stream, indices = issued_stream(program.instructions, ex.trip_counts)
    assert sum(inst.name == "count" for inst in stream) == counted
    timing = estimate(program, TRN2, trip_counts=ex.trip_counts)
    assert sum(r.opcode == "TENSOR_SCALAR" and program.instructions[r.index].name == "count" for r in timing.instructions) == counted


# --- differential fuzz: elementwise chains vs a float64 model -------------------------------------

P, F = 4, 8
SLOTS = 3


@st.composite
def elementwise_chain(draw):
    slot_dtypes = [draw(st.sampled_from(["float32", "bfloat16", "float16"])) for _ in range(SLOTS)]
    steps = []
    for _ in range(draw(st.integers(1, 10))):
        kind = draw(st.sampled_from(["tt", "ts", "copy", "stt"]))
        op = draw(st.sampled_from(["add", "subtract", "multiply", "maximum", "minimum"]))
        steps.append(
            (kind, op, draw(st.integers(0, SLOTS - 1)), draw(st.integers(0, SLOTS - 1)), draw(st.integers(0, SLOTS - 1)),
             draw(st.floats(-4, 4, width=32)), draw(st.booleans()), draw(st.sampled_from(["vector", "gpsimd"])))
        )
    return slot_dtypes, steps


MODEL = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "maximum": np.maximum, "minimum": np.minimum}


@SETTINGS
@given(elementwise_chain(), st.integers(0, 2**31 - 1))
def test_elementwise_chains_match_a_float64_model(chain, seed):
    slot_dtypes, steps = chain
    rng = np.random.default_rng(seed)
    slots = [sb(dt, P, F, offset=256 * i) for i, dt in enumerate(slot_dtypes)]
    init = [rounded(rng.standard_normal((P, F)) * 2, dt) for dt in slot_dtypes]
    model = [x.astype(np.float64) for x in init]

    def f32(v):
        return np.asarray(v, np.float64).astype(np.float32).astype(np.float64)

    insts = []
    for kind, op, d, a, b, imm, rev, engine in steps:
        fn = MODEL[op]
        imm64 = float(np.float32(imm))
        if kind == "tt":
            insts.append(isa.TensorTensor(dst=slots[d], in0=slots[a], in1=slots[b], op=op, engine=engine))
            value = f32(fn(model[a], model[b]))
        elif kind == "ts":
            insts.append(isa.TensorScalar(dst=slots[d], src=slots[a], op0=op, operand0=imm, reverse0=rev, engine=engine))
            value = f32(fn(imm64, model[a]) if rev else fn(model[a], imm64))
        elif kind == "stt":
            insts.append(isa.ScalarTensorTensor(dst=slots[d], src=slots[a], op0=op, operand0=imm, op1="add", in1=slots[b], reverse1=rev, engine=engine))
            first = f32(fn(model[a], imm64))
            value = f32(model[b] + first)
        else:
            insts.append(isa.TensorCopy(dst=slots[d], src=slots[a], engine=engine))
            value = model[a]
        model[d] = rounded(value, slot_dtypes[d]).astype(np.float64)
    run = execute(insts, preload=list(zip(slots, init)), fetch=slots)
    for got, want, dt in zip(run.fetched, model, slot_dtypes):
        np.testing.assert_array_equal(got.astype(np.float64), want, err_msg=dt)
