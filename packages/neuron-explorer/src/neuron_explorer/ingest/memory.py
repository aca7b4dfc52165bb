"""SBUF and PSUM occupancy over one program schedule.

On-chip memory is divided into blocks (per partition, ``BLOCK`` bytes - the timing model's own
dependency granularity); a block is occupied from the end of the first instruction that writes it
to the end of the last instruction that accesses it. Occupancy over time is the sum of occupied
blocks, reported as SBUF fullness per partition quadrant (0-31, 32-63, 64-95, 96-127) and PSUM
fullness per bank, as Neuron Explorer's SbufUsage and PsumUsage tables do.
"""

from __future__ import annotations

import numpy as np
from neuron_sim.memory.access_pattern import DEPENDENCY_BLOCK, PSUM, SBUF

BLOCK = DEPENDENCY_BLOCK
QUADRANT = 32
MAX_ROWS = 200_000  # larger schedules get no occupancy series (a Warning says so)


def occupancy(program, arch, pcs: np.ndarray, ends: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """{"SBUF": (change times, percent full per group at and after each), "PSUM": ...}; groups are
    the 4 partition quadrants for SBUF and the banks for PSUM. ``pcs``/``ends``: the schedule's rows."""
    partitions = arch.num_partitions
    sizes = {SBUF: arch.sbuf_bytes_per_partition, PSUM: arch.psum_bytes_per_partition}
    first = {m: np.full((partitions, -(-size // BLOCK)), np.inf) for m, size in sizes.items()}
    last = {m: np.full((partitions, -(-size // BLOCK)), -np.inf) for m, size in sizes.items()}
    instructions = program.instructions
    for pc, end in zip(pcs.tolist(), ends.tolist()):
        inst = instructions[pc]
        for ap, written in [(ap, False) for ap in inst.reads()] + [(ap, True) for ap in inst.writes()]:
            if ap.memory not in sizes or ap.dynamic:
                continue
            lo, hi = ap.free_byte_span()
            rows = slice(ap.partition_start, ap.partition_start + ap.partition_count)
            cols = slice(lo // BLOCK, -(-hi // BLOCK))
            if written:
                np.minimum(first[ap.memory][rows, cols], end, out=first[ap.memory][rows, cols])
            np.maximum(last[ap.memory][rows, cols], end, out=last[ap.memory][rows, cols])
    out = {}
    for memory, size in sizes.items():
        fw, la = first[memory], last[memory]
        live = np.isfinite(fw) & (la >= fw)
        if memory == SBUF:
            group = np.repeat(np.arange(partitions) // QUADRANT, fw.shape[1]).reshape(fw.shape)
            capacity = QUADRANT * size
            groups = -(-partitions // QUADRANT)
        else:
            group = np.tile(np.arange(fw.shape[1]) * BLOCK // arch.psum_bank_bytes, (partitions, 1))
            capacity = partitions * arch.psum_bank_bytes
            groups = arch.psum_banks
        out["SBUF" if memory == SBUF else "PSUM"] = _steps(fw[live], la[live], group[live], groups, capacity)
    return out


def _steps(starts, ends, group, groups: int, capacity: float) -> tuple[np.ndarray, np.ndarray]:
    """Percent of ``capacity`` occupied per group, at each time the occupancy changes."""
    if not len(starts):
        return np.zeros(0), np.zeros((0, groups))
    times = np.concatenate([starts, ends])
    delta = np.concatenate([np.full(len(starts), float(BLOCK)), np.full(len(ends), -float(BLOCK))])
    owners = np.concatenate([group, group])
    change, where = np.unique(times, return_inverse=True)
    steps = np.zeros((len(change), groups))
    np.add.at(steps, (where.reshape(-1), owners), delta)
    return change, 100.0 * np.cumsum(steps, axis=0) / capacity
