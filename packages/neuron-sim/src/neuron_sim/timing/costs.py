"""Per-instruction costs, from the documented engine cost formulas.

Compute instructions cost ``max(MIN_II, cycles(N))`` engine cycles of issue time (N = elements per
partition; the partition count is free because the 128 lanes work in parallel) plus a fixed
pipeline latency (the static SBUF/PSUM access overhead) before their results are visible.
Sources: legacy ISA docstrings (SDK v2.26, NC-v2 cycle counts) and the NC-v3/v4 perf-mode rules in
trainium2_arch.rst / trainium3_arch.rst; see ../shared/reference/nki_and_hardware.md §5.4-5.5.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..arch import Architecture
from ..isa import (
    Activation,
    AffineSelect,
    BnAggr,
    BnStats,
    CopyPredicated,
    Dropout,
    FindIndex8,
    Iota,
    LocalGather,
    MatchReplace8,
    Matmul,
    Max8,
    Memset,
    PartitionReduce,
    RandomFill,
    RandomWords,
    RangeSelect,
    Reciprocal,
    ScalarTensorTensor,
    Select,
    SelectReduce,
    SequenceBounds,
    SetRngSeed,
    StreamShuffle,
    TensorCopy,
    TensorReduce,
    TensorScalar,
    TensorScalarCumulative,
    TensorTensor,
    TensorTensorScan,
    Transpose,
)
from ..isa.control import LoopEnd, LoopStart, RegisterLoad, RegisterSet, RegisterStore
from ..isa.rng import WORDS_PER_CYCLE
from ..memory.access_pattern import PSUM, SBUF, AccessPattern

CONTROL = (RegisterSet, RegisterLoad, RegisterStore, LoopStart, LoopEnd)

_HALF = ("bfloat16", "float16")
_FP8 = ("float8_e4m3", "float8_e4m3fn", "float8_e5m2")


@dataclass(slots=True)
class ComputeCost:
    issue_ns: float  # time the engine is occupied (its initiation interval for this instruction)
    latency_ns: float  # extra time until results are visible to dependents
    performance_mode: str = ""


def _all_sbuf_half(*aps: AccessPattern) -> bool:
    return all(ap.memory == SBUF and ap.dtype in _HALF for ap in aps)


def _vector_mode(arch: Architecture, engine: str, aps: list[AccessPattern], fast_kind: bool) -> tuple[float, str]:
    """NC-v3+ VectorE performance modes: 4x for contiguous half-precision SBUF->SBUF copies and
    tensor_scalar, 2x when non-contiguous or touching PSUM (still half precision)."""
    if engine != "vector" or arch.nc_version == "gen2" or not fast_kind:
        return 1.0, ""
    if not all(ap.dtype in _HALF + _FP8 for ap in aps):
        return 1.0, ""
    if all(ap.memory == SBUF and ap.is_contiguous() for ap in aps):
        return 4.0, "4x"
    return 2.0, "2x"


def compute_cost(inst, arch: Architecture) -> ComputeCost:
    """Cost of a non-DMA, non-sync instruction on its engine."""
    if isinstance(inst, CONTROL):  # sequencer work: register moves and loop branches
        spec = arch.engine(inst.engine) if inst.engine != "tensor" else arch.sync
        return ComputeCost(spec.cycles_to_ns(spec.min_initiation_interval), 0.0)
    if isinstance(inst, Matmul):
        raise TypeError("matmuls are costed by tensor_costs()")
    spec = arch.engine(inst.engine) if inst.engine != "tensor" else None
    mode = ""
    if isinstance(inst, Transpose) and inst.engine == "tensor":
        raise TypeError("TensorE transposes are costed by tensor_costs()")

    n = max([ap.free_size for ap in inst.reads() + inst.writes()] or [1])
    if isinstance(inst, TensorTensor):
        in0, in1 = inst.in0, inst.in1
        if (in0.memory == PSUM) != (in1.memory == PSUM):
            cycles = n
        elif _all_sbuf_half(in0, in1, inst.dst) and inst.engine == "vector" and arch.nc_version != "gen2":
            cycles, mode = n / 2, "2x"
        elif _all_sbuf_half(in0, in1) and inst.op in ("add", "multiply", "subtract"):
            cycles = n
        else:
            # Two SBUF reads per element. GpSimd's integer ALU mode (int32/uint32 tiles) streams at
            # the same rate: 8 cores x 512-bit SIMD = 16 32-bit lanes per core, each core serving 16
            # partitions, so one element per partition per cycle and operand.
            cycles = 2 * n
    elif isinstance(inst, (TensorScalar, TensorCopy)):
        factor, mode = _vector_mode(arch, inst.engine, [inst.src, inst.dst], True)
        if inst.engine == "scalar" and arch.nc_version == "gen4" and inst.dst.dtype in _HALF + _FP8:
            factor, mode = 2.0, "2x"
        cycles = n / factor
    elif isinstance(inst, ScalarTensorTensor):
        cycles = 2 * n
    elif isinstance(inst, Activation):
        factor = 2.0 if arch.nc_version == "gen4" and inst.dst.dtype in _HALF + _FP8 else 1.0
        mode = "2x" if factor == 2.0 else ""
        cycles = n / factor
        if inst.reduce_op is not None:
            cycles += spec.min_initiation_interval
    elif isinstance(inst, TensorReduce):
        n = inst.src.free_size
        cycles = n / 2 if inst.src.dtype in _HALF and inst.op in ("add", "maximum") else n
    elif isinstance(inst, Reciprocal):
        cycles = 8 * n
    elif isinstance(inst, Memset):
        cycles = n / 2 if inst.dst.dtype in _HALF and inst.value == 0 else n
    elif isinstance(inst, BnStats):
        cycles = inst.src.free_size
    elif isinstance(inst, BnAggr):
        cycles = 13 * (inst.src.free_size / 3)
    elif isinstance(inst, (CopyPredicated, Select, StreamShuffle, Transpose)):
        cycles = n
    elif isinstance(inst, PartitionReduce):
        # Cross-partition: the 8 GpSimd cores (16 partitions each) combine partials in log steps.
        cycles = n * 4
    elif isinstance(inst, LocalGather):
        # SDK local_gather docs: (num_valid_indices * e) / C cycles after the fixed GpSimd cost, with
        # C = ((28 + t*e) / (t*e)) / min(4 / dtype size, e) and t = 4.
        e, t = inst.num_elem_per_idx, 4
        c = ((28 + t * e) / (t * e)) / min(4 / inst.src.itemsize, e)
        cycles = inst.valid_indices * e / c
    elif isinstance(inst, (Iota, AffineSelect, SequenceBounds)):
        cycles = n
    elif isinstance(inst, TensorTensorScan):
        cycles = 2 * n  # legacy cost model: a scan reads two inputs per element
    elif isinstance(inst, (TensorScalarCumulative, SelectReduce, RangeSelect, Max8, FindIndex8, MatchReplace8, RandomFill,
                           Dropout)):
        cycles = n  # one element per partition per cycle (the SDK's max(MIN_II, N) for these)
    elif isinstance(inst, RandomWords):
        cycles = n / WORDS_PER_CYCLE  # the hardware generator's rate (4 x 32-bit words per lane per cycle)
    elif isinstance(inst, SetRngSeed):
        cycles = 1
    else:
        raise TypeError(f"no cost formula for {inst.opcode}")

    if spec.fixed_cycles:  # GpSimd runs a software loop per instruction
        cycles += spec.fixed_cycles
    issue = max(spec.min_initiation_interval, cycles)
    return ComputeCost(spec.cycles_to_ns(issue), spec.cycles_to_ns(spec.static_overhead_cycles), mode)


@dataclass(slots=True)
class TensorCost:
    load_stationary_ns: float
    multiply_ns: float
    raw_flops: int
    adjusted_flops: float
    transpose_flops: int = 0
    performance_mode: str = ""


def tensor_costs(inst, arch: Architecture) -> TensorCost:
    """LoadStationary + MultiplyMoving of a matmul or a TensorE transpose.

    MultiplyMoving streams the moving tile one column per cycle: ``max(N, 64)`` cycles for
    bf16/fp16/tf32/fp8, 4x for fp32; FP8 double-row contracts K=256 in that same time. LoadStationary is up to 4x faster
    than a MultiplyMoving of the same size and runs in the background of the previous one.
    """
    te = arch.tensor
    if isinstance(inst, Matmul):
        k, m, n = inst.k, inst.m, inst.n
        dtype = inst.moving.dtype
        mode = ""
        factor = 1.0
        if dtype == "float32":
            factor = te.fp32_slowdown
        elif inst.perf_mode == "double_row":
            # Two contraction rows per partition (K=256) in the time of one bf16 pass (K=128).
            mode = "double_row"
        raw = 2 * k * m * n
        adjusted = raw * (4.0 if dtype == "float32" else 0.5 if dtype in _FP8 else 1.0)
    else:  # Transpose on TensorE: a pass of the tile against an identity matrix
        k, m, n = inst.src.partition_count, inst.src.free_size, inst.src.partition_count
        factor = 2.0 if inst.src.itemsize == 4 else 1.0
        mode = "transpose"
        raw, adjusted = 0, 0.0
    mm_cycles = max(n, te.min_moving_cycles) * factor
    ls_cycles = max(m, te.min_moving_cycles) / te.load_stationary_speedup
    transpose_flops = 0 if isinstance(inst, Matmul) else 2 * k * m * n
    return TensorCost(te.cycles_to_ns(ls_cycles), te.cycles_to_ns(mm_cycles), raw, adjusted, transpose_flops, mode)
