"""Lowering a program to a timing plan: what each instruction costs and which memory it touches.

The plan is everything the scheduler needs as flat tuples, so the scheduling loop does no
attribute lookups, isinstance chains or cost formulas. Costs depend only on an
instruction's operand shapes, dtypes and memories, so they are memoized on that signature: a
program that repeats the same tile operations (every tiled kernel does) pays for each formula once.
Operands become footprints in the dependency state (``footprints.py``); the whole program is
lowered before scheduling, because the state's layout depends on every footprint.
"""

from __future__ import annotations

from ..arch import Architecture
from ..isa import Barrier, DmaInstruction, Matmul, SemaphoreSignal, SemaphoreWait, Transpose
from ..memory.access_pattern import DEPENDENCY_BLOCK, HBM, PSUM, SBUF, AccessPattern
from ..program import Program
from .costs import compute_cost, tensor_costs
from .dma import efficiency, plan_dma
from .footprints import Region
from .records import COMPUTE, DMA, SYNC, TENSOR

ONCHIP_BLOCK = DEPENDENCY_BLOCK
MAX_HBM_BLOCKS = 256  # HBM dependencies are rare (inputs are read-only); coarse blocks keep scans short
TRACKS = {"tensor": "TensorMatrix", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd", "sync": "Sync"}

_SYNC_TYPES = (SemaphoreSignal, SemaphoreWait, Barrier)
_SYNC_ENTRY = (SYNC,)


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
        self._memo: dict[tuple, tuple] = {}  # cost entries by signature
        self._footprints: dict[int, list] = {}  # AccessPattern.location_key -> footprint

    def lower_all(self, instructions) -> tuple[list[tuple], Exception | None]:
        """Plan entries for the program, with footprints ready for scheduling.

        If an instruction cannot be lowered (no cost formula, unknown tensor...), the entries stop
        before it and its error is returned for the scheduler to raise on reaching it, so that
        errors still surface in program order (e.g. after an earlier semaphore deadlock).
        """
        entries = []
        append, lower = entries.append, self.lower
        error = None
        try:
            for inst in instructions:
                append(lower(inst))
        except Exception as err:  # re-raised by the scheduler, in program order
            error = err
        for region in (*self.onchip.values(), *self.hbm.values()):
            region.compress()
        return entries, error

    def footprint(self, ap: AccessPattern) -> list:
        fp = self._footprints.get(ap.location_key)
        if fp is None:
            fp = self._footprints[ap.location_key] = self._locate(ap)
        return fp

    def _locate(self, ap: AccessPattern) -> list:
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
        return region.footprint(lo, hi)

    def lower(self, inst) -> tuple:
        """(kind, cost entry, ...footprints) for one instruction.

        COMPUTE and DMA: (kind, cost, read_footprints, write_footprints); TENSOR: (kind, cost,
        stationary_footprint, other_read_footprints, all_read_footprints, write_footprints);
        SYNC: (kind,). Cost entries are shared between instructions with the same signature;
        footprints are shared too, and usable once ``lower_all`` has compressed the regions.
        """
        cls = type(inst)
        if cls in _SYNC_TYPES:
            return _SYNC_ENTRY
        if cls is Matmul or (cls is Transpose and inst.engine == "tensor"):
            kind, stationary = TENSOR, inst.stationary if cls is Matmul else inst.src
        else:
            kind, stationary = DMA if isinstance(inst, DmaInstruction) else COMPUTE, None
        reads, writes = inst.reads(), inst.writes()
        known, footprint, read_only = self._footprints.get, self.footprint, self.read_only
        # Plain loops rather than comprehensions: this runs once per instruction, and each
        # comprehension is a function call.
        sig = []
        rb = []
        w0 = writes[0] if writes else None
        several = len(writes) > 1
        for ap in reads:
            sig.append(ap.cost_signature)
            # An operand both read and written (accumulation) needs only the write checks: they
            # already wait for its last writer (RAW) and readers (WAR). The stationary tile is
            # checked on its own (LoadStationary).
            if ap is w0 or ap is stationary or ap.tensor in read_only or (several and any(ap is w for w in writes)):
                continue
            rb.append(known(ap.location_key) or footprint(ap))
        wb = []
        for ap in writes:
            sig.append(ap.cost_signature)
            wb.append(known(ap.location_key) or footprint(ap))
        if kind == TENSOR:
            key = (cls, getattr(inst, "perf_mode", ""), *sig)
        elif kind == DMA:
            key = (cls, inst.engine, inst.dge, *sig)
        else:
            key = (cls, inst.engine, getattr(inst, "op", None), getattr(inst, "reduce_op", None),
                   getattr(inst, "value", None), *sig)
        cost = self._memo.get(key)
        if cost is None:
            cost = self._memo[key] = self._cost_entry(kind, inst, reads, writes, stationary)
        if kind == TENSOR:
            st = known(stationary.location_key) or footprint(stationary)
            return (TENSOR, cost, st, rb, [st, *rb], wb)
        return (kind, cost, rb, wb)

    # --- cost entries (memoized) ----------------------------------------------------------------
    def _cost_entry(self, kind, inst, reads, writes, stationary) -> tuple:
        if kind == TENSOR:
            return self._tensor_entry(inst, reads, stationary)
        if kind == DMA:
            return self._dma_entry(inst)
        return self._compute_entry(inst, reads, writes)

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
        # Tensor names are not part of the memo key, so they are not part of the entry either.
        return (inst.opcode, inst.engine, issue, plan.first_engine, plan.engines, plan.engine_time_ns(arch, efficiency(inst)),
                plan.hbm_read_bytes, plan.hbm_write_bytes, plan.sbuf_read_bytes, plan.sbuf_write_bytes,
                plan.total_bytes)


def _bytes(aps) -> tuple[int, int]:
    sbuf = psum = 0
    for ap in aps:
        n = ap.partition_count * ap.free_size * ap.itemsize
        if ap.memory == SBUF:
            sbuf += n
        elif ap.memory == PSUM:
            psum += n
    return sbuf, psum


__all__ = ["Lowering", "COMPUTE", "TENSOR", "DMA", "SYNC", "TRACKS", "HBM"]
