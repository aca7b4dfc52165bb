"""Instruction.to_dict/from_dict (through JSON) for every opcode, and Program round trips."""

import dataclasses
import json

import numpy as np
import pytest
from helpers import TRN2, execute, hb, ps, sb
from neuron_sim import Program, TensorDecl, ValidationError, isa
from neuron_sim.isa import OPCODES, Instruction
from neuron_sim.memory.access_pattern import AccessPattern

A = sb("float32", 32, 8)
B = sb("float32", 32, 8, offset=256)
C = sb("bfloat16", 32, 8, offset=512)
COL = sb("float32", 32, 1, offset=1024)
IDX = sb("int32", 32, 1, offset=1100)
DYN = AccessPattern("sbuf", "float32", 0, 32, ((1, 8),), offset=64, dynamic=(("r0", 8),))

SAMPLES = [
    isa.DmaCopy(dst=A, src=hb("x", "float32", (32, 8)), queue="qSyncIO3", dge="hwdge", name="load", location="k.py:3"),
    isa.DmaCopy(dst=DYN, src=hb("x", "float32", (32, 8), row_stride=16), engine="scalar"),
    isa.DmaIndirect(direction="scatter", onchip=A, table=hb("t", "float32", (64, 8)), index=IDX, accumulate=True, oob_mode="skip"),
    isa.DmaTranspose(dst=sb("bfloat16", 8, 32), src=hb("x", "bfloat16", (32, 8)), engine="scalar", queue="qAct"),
    isa.Matmul(dst=ps("float32", 8, 8), stationary=sb("bfloat16", 32, 8), moving=sb("bfloat16", 32, 8, offset=64), accumulate=True),
    isa.Matmul(dst=ps("float32", 8, 8), stationary=sb("float8_e4m3", 32, 16), moving=sb("float8_e4m3", 32, 16, offset=64), perf_mode="double_row"),
    isa.Transpose(dst=sb("float32", 8, 32, offset=2048), src=A, engine="vector"),
    isa.TensorTensor(dst=C, in0=A, in1=B, op="divide", engine="gpsimd"),
    isa.TensorScalar(dst=C, src=A, op0="multiply", operand0=COL, reverse0=True, op1="add", operand1=float("-inf"), reverse1=False),
    isa.TensorScalar(dst=C, src=A, op0="rsqrt"),
    isa.ScalarTensorTensor(dst=C, src=A, op0="subtract", operand0=float("nan"), op1="maximum", in1=B, reverse0=True, reverse1=True),
    isa.TensorReduce(dst=sb("float32", 32, 1, offset=2048), src=sb("float32", 32, (2, 4)), op="maximum", axes=(1, 2), negate=True),
    isa.TensorCopy(dst=C, src=ps("float32", 32, 8), engine="scalar"),
    isa.CopyPredicated(dst=A, src=B, predicate=C, reverse=True),
    isa.Select(dst=A, predicate=B, on_true=C, on_false=-1.5),
    isa.Select(dst=A, predicate=B, on_true=C, on_false=COL),
    isa.Memset(dst=sb("int32", 32, 8), value=7, engine="gpsimd"),
    isa.Reciprocal(dst=A, src=B),
    isa.BnStats(dst=sb("float32", 32, 6, offset=2048), src=A),
    isa.BnAggr(dst=sb("float32", 32, 2, offset=2048), src=sb("float32", 32, 12)),
    isa.StreamShuffle(dst=A, src=B, mask=tuple(range(31, -1, -1))),
    isa.Activation(dst=C, src=A, func="gelu", scale=COL, bias=0.5, reduce_op="add", reduce_res=sb("float32", 32, 1, offset=4096)),
    isa.Activation(dst=C, src=A, func="exp"),
    isa.Iota(dst=sb("int32", 32, 12), pattern=((1, 3), (-4, 4)), offset=-2, channel_multiplier=12),
    isa.AffineSelect(dst=A, src=B, pattern=((-1, 8),), on_false_value=float("-inf"), offset=3, channel_multiplier=1, cmp_op="less"),
    isa.PartitionReduce(dst=sb("float32", 1, 8), src=A, op="minimum"),
    isa.LocalGather(dst=sb("float32", 32, 4), src=A, index=sb("int16", 32, 2, offset=4096), num_elem_per_idx=2),
    isa.LocalGather(dst=sb("float32", 32, 6), src=A, index=sb("int16", 32, 2, offset=4096), num_valid_indices=6),
    isa.TensorScalarCumulative(dst=C, src=A, op0="multiply", imm0=COL, op1="add", imm1=2.0, reverse0=True,
                               reduce_cmd="load_reduce"),
    isa.TensorTensorScan(dst=C, data0=A, data1=B, initial=COL, op0="multiply", op1="add", reverse1=True),
    isa.SelectReduce(dst=A, predicate=sb("uint8", 32, 8, offset=4096), on_true=B, on_false=float("-inf"),
                     reduce_res=COL, reduce_cmd="reset_reduce", reverse_pred=True),
    isa.RangeSelect(dst=A, on_true=B, comp_op0="greater_equal", comp_op1="less", bound0=COL,
                    bound1=sb("float32", 32, 1, offset=4096), on_false_value=-3.5e38, range_start=4),
    isa.Max8(dst=A, src=B),
    isa.FindIndex8(dst=sb("uint32", 32, 8, offset=4096), data=A, vals=B),
    isa.MatchReplace8(dst=C, data=A, vals=B, imm=float("-inf"), dst_idx=sb("int32", 32, 8, offset=4096)),
    isa.SequenceBounds(dst=sb("int32", 1, 16, offset=4096), segment_ids=sb("int32", 1, 8, offset=8192)),
    isa.SetRngSeed(seed=7),
    isa.SetRngSeed(seed=sb("int32", 1, 1, offset=8192), engine="gpsimd"),
    isa.RandomFill(dst=C),
    isa.RandomWords(dst=sb("uint32", 4, 6), key=sb("int32", 1, 4, offset=64), count=100, pattern=((1, 2), (2, 3)), offset=3,
                    channel_multiplier=6),
    isa.Dropout(dst=A, src=B, prob=COL),
    isa.SemaphoreSignal(semaphore="sem", value=3, engine="gpsimd"),
    isa.SemaphoreWait(semaphore="sem", value=3, engine="vector"),
    isa.Barrier(name="b0"),
    isa.RegisterSet(register="r0", value=-(2**31)),
    isa.RegisterSet(register="r1", value="r0", engine="vector"),
    isa.RegisterLoad(register="n", src=sb("int32", 1, 1, offset=4096)),
    isa.RegisterStore(dst=sb("uint8", 1, 1, start=32, offset=8), register="n", engine="gpsimd"),
    isa.LoopStart(register="i", lower="r0", upper=17, step=3, location="k.py:9"),
    isa.LoopStart(register="c", kind="while"),
    isa.LoopEnd(register="i", name="end_i"),
]


def fields(inst):
    return {f.name: getattr(inst, f.name) for f in dataclasses.fields(inst)}


def same(a, b):
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b and type(a) is type(b)


def test_samples_cover_every_opcode():
    assert {type(i).opcode for i in SAMPLES} == set(OPCODES)


@pytest.mark.parametrize("inst", SAMPLES, ids=lambda i: f"{i.opcode}")
def test_round_trip_through_json(inst):
    text = json.dumps(inst.to_dict(), allow_nan=False)  # non-finite floats are encoded, not NaN tokens
    back = Instruction.from_dict(json.loads(text))
    assert type(back) is type(inst)
    original, restored = fields(inst), fields(back)
    assert original.keys() == restored.keys()
    for name in original:
        assert same(original[name], restored[name]), (name, original[name], restored[name])
    assert back.to_dict() == json.loads(text)


def test_defaults_are_left_out():
    d = isa.TensorCopy(dst=A, src=B).to_dict()
    assert d["opcode"] == "TENSOR_COPY" and "engine" not in d and "name" not in d and "location" not in d
    assert isa.TensorCopy(dst=A, src=B, engine="gpsimd").to_dict()["engine"] == "gpsimd"


def test_unknown_opcode():
    with pytest.raises(ValidationError) as info:
        Instruction.from_dict({"op": "WARP_DRIVE"})
    assert info.value.rule == "isa.unknown_opcode" and "'WARP_DRIVE'" in str(info.value)


def test_describe_names_opcode_and_operands():
    text = SAMPLES[7].describe()
    assert text.startswith("TENSOR_TENSOR ") and "op=divide" in text and "bfloat16@SBUF+512[0:32]" in text


def test_program_round_trip_runs_the_same():
    x = np.arange(32 * 8, dtype=np.float32).reshape(32, 8)
    insts = [
        isa.DmaCopy(dst=A, src=hb("x", "float32", (32, 8))),
        isa.TensorScalar(dst=B, src=A, op0="multiply", operand0=0.5, op1="add", operand1=float("inf")),
        isa.Activation(dst=C, src=A, func="sqrt", scale=2.0),
        isa.DmaCopy(dst=hb("y", "bfloat16", (32, 8)), src=C),
    ]
    program = Program("p", [TensorDecl("x", (32, 8), "float32"), TensorDecl("y", (32, 8), "bfloat16", "output")], insts, "trn2", {"g": 1}, {"m": [1, 2]})
    back = Program.from_dict(json.loads(json.dumps(program.to_dict())))
    back.validate(TRN2)
    assert back.to_dict() == program.to_dict()
    assert back.tensors == program.tensors and back.graph == {"g": 1} and back.metadata == {"m": [1, 2]}
    r1 = execute(program.instructions, hbm_inputs={"x": x}, hbm_outputs={"y": ((32, 8), "bfloat16")})
    r2 = execute(back.instructions, hbm_inputs={"x": x}, hbm_outputs={"y": ((32, 8), "bfloat16")})
    np.testing.assert_array_equal(r1.hbm["y"].astype(np.float32), r2.hbm["y"].astype(np.float32))


def test_instructions_with_an_op_field_keep_their_opcode():
    d = isa.TensorTensor(dst=A, in0=A, in1=B, op="add").to_dict()
    assert d["opcode"] == "TENSOR_TENSOR" and d["op"] == "add"


def test_legacy_op_key_is_still_read():
    d = isa.TensorCopy(dst=A, src=B).to_dict()
    legacy = {"op": d.pop("opcode"), **d}
    assert isinstance(Instruction.from_dict(legacy), isa.TensorCopy)
