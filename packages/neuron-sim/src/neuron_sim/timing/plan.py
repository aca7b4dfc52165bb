"""Lowering a program to a timing plan: what each instruction costs and which memory it touches.

The plan is everything the scheduler needs as flat tuples, so the scheduling loop does no
attribute lookups, isinstance chains or cost formulas. Costs depend only on an
instruction's operand shapes, dtypes and memories, so they are memoized on that signature: a
program that repeats the same tile operations (every tiled kernel does) pays for each formula once.
"""

from __future__ import annotations

from ..arch import Architecture
from ..isa import Barrier, DmaInstruction, Matmul, SemaphoreSignal, SemaphoreWait, Transpose
from ..memory.access_pattern import DEPENDENCY_BLOCK, HBM, PSUM, SBUF, AccessPattern
from ..program import Program
from .costs import compute_cost, tensor_costs
from .dma import efficiency, plan_dma
from .records import COMPUTE, DMA, SYNC, TENSOR

ONCHIP_BLOCK = DEPENDENCY_BLOCK
MAX_HBM_BLOCKS = 256  # HBM dependencies are rare (inputs are read-only); coarse blocks keep scans short
TRACKS = {"tensor": "TensorMatrix", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd", "sync": "Sync"}

_SYNC_TYPES = (SemaphoreSignal, SemaphoreWait, Barrier)
_SYNC_ENTRY = (SYNC,)


class Region:
    """Per-block dependency state of one memory: last write end (and its track), last read end."""

    __slots__ = ("block", "nblocks", "write_end", "write_by", "read_end")

    def __init__(self, nbytes: int, block: int):
        self.block = block
        self.nblocks = max(1, -(-nbytes // block))
        self.write_end = [0.0] * self.nblocks
        self.write_by = [""] * self.nblocks
        self.read_end = [0.0] * self.nblocks


class Lowering:
    """Turns instructions into plan entries; holds the memo of costs and the memory regions."""

    def __init__(self, program: Program, arch: Architecture):
        self.arch = arch
        self.onchip = {SBUF: Region(arch.sbuf_bytes_per_partition, ONCHIP_BLOCK),
                       PSUM: Region(arch.psum_bytes_per_partition, ONCHIP_BLOCK)}
        self.hbm = {
            t.name: Region(t.nbytes, max(ONCHIP_BLOCK, -(-t.nbytes // MAX_HBM_BLOCKS))) for t in program.tensors
        }
        # Nothing writes an input tensor (Program.validate forbids it), so reading one can never
        # wait for anything nor make a later write wait: such reads need no tracking.
        self.read_only = {t.name for t in program.tensors if t.kind == "input"}
        self._memo: dict[tuple, tuple] = {}

    def blocks(self, ap: AccessPattern) -> tuple:
        """(write_end, write_by, read_end, lo, hi) for the blocks the pattern touches."""
        if ap.tensor is None:
            region = self.onchip[ap.memory]
            lo, hi = (0, region.nblocks) if ap.dynamic else ap.dependency_blocks
        else:
            region = self.hbm[ap.tensor]
            if ap.dynamic:  # run-time offset: any block of the tensor may be touched
                lo, hi = 0, region.nblocks
            else:
                lo, hi = ap._span
                b = region.block
                lo, hi = lo // b, min(region.nblocks, (hi - 1) // b + 1)
        return (region.write_end, region.write_by, region.read_end, lo, hi)

    def _memoized(self, key, compute):
        value = self._memo.get(key)
        if value is None:
            value = self._memo[key] = compute()
        return value

    def lower(self, inst) -> tuple:
        """(kind, cost entry, ...dependency blocks) for one instruction.

        COMPUTE: (kind, cost, read_blocks, write_blocks); TENSOR: (kind, cost, stationary_blocks,
        read_blocks, write_blocks); DMA: (kind, cost, read_blocks, write_blocks); SYNC: (kind,).
        Cost entries are shared between instructions with the same signature.
        """
        cls = type(inst)
        if cls in _SYNC_TYPES:
            return _SYNC_ENTRY
        blocks = self.blocks
        reads, writes = inst.reads(), inst.writes()
        sig = [ap.cost_signature for ap in reads]
        sig += [ap.cost_signature for ap in writes]
        wb = [blocks(ap) for ap in writes]
        # An operand both read and written (accumulation) needs only the write checks: they
        # already wait for its last writer (RAW) and readers (WAR).
        read_only = self.read_only
        if len(writes) == 1:
            w0 = writes[0]
            dep_reads = [ap for ap in reads if ap is not w0 and ap.tensor not in read_only]
        else:
            dep_reads = [ap for ap in reads if all(ap is not w for w in writes) and ap.tensor not in read_only]
        memo = self._memo
        if cls is Matmul or (cls is Transpose and inst.engine == "tensor"):
            stationary = inst.stationary if cls is Matmul else inst.src
            key = (cls, getattr(inst, "perf_mode", ""), *sig)
            cost = memo.get(key) or self._memoized(key, lambda: self._tensor_entry(inst, reads, stationary))
            return (TENSOR, cost, [blocks(stationary)], [blocks(ap) for ap in dep_reads if ap is not stationary], wb)
        rb = [blocks(ap) for ap in dep_reads]
        if isinstance(inst, DmaInstruction):
            key = (cls, inst.engine, inst.dge, *sig)
            cost = memo.get(key) or self._memoized(key, lambda: self._dma_entry(inst))
            return (DMA, cost, rb, wb)
        key = (cls, inst.engine, getattr(inst, "op", None), getattr(inst, "reduce_op", None),
               getattr(inst, "value", None), *sig)
        cost = memo.get(key) or self._memoized(key, lambda: self._compute_entry(inst, reads, writes))
        return (COMPUTE, cost, rb, wb)

    # --- cost entries (memoized) ----------------------------------------------------------------
    def _compute_entry(self, inst, reads, writes) -> tuple:
        cost = compute_cost(inst, self.arch)
        sr, pr = _bytes(reads)
        sw, pw = _bytes(writes)
        return (inst.opcode, inst.engine, TRACKS[inst.engine], cost.issue_ns, cost.latency_ns, sr, sw, pr, pw,
                cost.performance_mode)

    def _tensor_entry(self, inst, reads, stationary) -> tuple:
        cost = tensor_costs(inst, self.arch)
        st_bytes = stationary.partition_count * stationary.free_size * stationary.itemsize
        sr, pr = _bytes(reads)
        pw = inst.dst.partition_count * inst.dst.free_size * inst.dst.itemsize
        return (inst.opcode, cost.load_stationary_ns, cost.multiply_ns, st_bytes, sr - st_bytes, pr, pw,
                cost.raw_flops, cost.adjusted_flops, cost.transpose_flops, cost.performance_mode)

    def _dma_entry(self, inst) -> tuple:
        arch = self.arch
        dma = arch.dma
        plan = plan_dma(inst, arch)
        if inst.dge == "hwdge":
            issue = dma.hwdge_issue_ns
        elif inst.dge == "swdge":  # descriptors written by GpSimd software, a few cycles per chunk
            gp = arch.gpsimd
            issue = gp.cycles_to_ns(gp.fixed_cycles + 4 * plan.chunks_per_engine * plan.engines)
        else:
            spec = arch.engine(inst.engine) if inst.engine != "tensor" else arch.sync
            issue = spec.cycles_to_ns(spec.min_initiation_interval)
        return (inst.opcode, inst.engine, issue, plan.first_engine, plan.engines, plan.engine_time_ns(arch, efficiency(inst)),
                plan.hbm_read_bytes, plan.hbm_write_bytes, plan.sbuf_read_bytes, plan.sbuf_write_bytes,
                plan.total_bytes, plan.source, plan.dest)


def _bytes(aps) -> tuple[int, int]:
    sbuf = psum = 0
    for ap in aps:
        n = ap.partition_count * ap.free_size * ap.itemsize
        if ap.memory == SBUF:
            sbuf += n
        elif ap.memory == PSUM:
            psum += n
    return sbuf, psum


__all__ = ["Lowering", "Region", "COMPUTE", "TENSOR", "DMA", "SYNC", "TRACKS", "HBM"]
