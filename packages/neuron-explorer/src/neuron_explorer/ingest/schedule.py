"""Everything derived from one program schedule, computed once and shifted onto each execution.

A schedule (one device-trace entry of the session) is shared by every execution of its program:
the rows, their dependency edges, the merged busy intervals of each engine, the HBM throughput
series and the roll-ups are computed here once, in the schedule's relative time, and an execution
only adds its start time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import ProfileFormatError
from .intervals import grouped_busy, merge_intervals, throughput_series

ENGINES = ("tensor", "vector", "scalar", "gpsimd", "sync")
ONCHIP = ("SBUF", "PSUM")
# Flow dependency types, in the codes the edges carry.
DEPENDENCY_TYPES = ("FLOW_DEPENDENCE", "ANTI_DEPENDENCE", "SEMAPHORE", "DMA_TRIGGER")
FLOW_DEPENDENCE, ANTI_DEPENDENCE, SEMAPHORE, DMA_TRIGGER = range(4)


@dataclass
class Edges:
    producer: np.ndarray  # row index within the schedule
    consumer: np.ndarray
    kind: np.ndarray  # DEPENDENCY_TYPES code
    gap: np.ndarray  # float ns


@dataclass
class ScheduleView:
    key: str
    neff: str
    total_ns: float
    # instruction rows (relative times; strings as Arrow arrays, ready to concatenate)
    start: np.ndarray
    end: np.ndarray
    wait: np.ndarray
    numbers: dict[str, np.ndarray]  # pc, byte counts, flops
    strings: dict[str, pa.Array]  # opcode, engine, timeline_track, waited_on, performance_mode, operands, ...
    dma: dict  # columns of the DMA transfers, plus "row": the triggering instruction's row
    semaphores: dict  # columns of the semaphore updates, plus "row": the updating instruction's row
    edges: Edges
    dma_edges: Edges  # instruction row -> DMA transfer index
    active: dict[str, tuple[np.ndarray, np.ndarray]]  # engine -> merged (starts, ends)
    hbm: tuple[np.ndarray, np.ndarray, np.ndarray]  # change times, rate (bytes/ns) from then, cumulative bytes
    rollup: dict = field(default_factory=dict)  # per-execution totals (see _rollup)
    opcodes: dict = field(default_factory=dict)  # (engine, opcode) -> [count, instruction ns, active ns]

    @property
    def rows(self) -> int:
        return len(self.start)


def build_view(key: str, neff_name: str, tables: dict[str, pa.Table], total_ns: float, per_pc: dict[str, pa.Array],
               program_length: int) -> ScheduleView:
    """``per_pc``: Arrow string arrays indexed by program counter (operands, source location, stack frames)."""
    ins = tables["instructions"]
    pcs = ins.column("pc").to_numpy()
    if len(pcs) and (pcs.min() < 0 or pcs.max() >= program_length):
        raise ProfileFormatError(f"device trace {key} refers to instruction {int(pcs.max())}, but NEFF {neff_name} has "
                                 f"{program_length} instructions: the trace belongs to another NEFF")
    start = ins.column("start").to_numpy()
    end = ins.column("end").to_numpy()
    wait = ins.column("wait").to_numpy()
    numbers = {name: ins.column(name).to_numpy() for name in (
        "pc", "hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
        "psum_write_bytes", "raw_flops", "transpose_flops")}
    numbers["adjusted_flops"] = np.rint(ins.column("adjusted_flops").to_numpy()).astype(np.int64)
    indices = pa.array(pcs)
    strings = {name: _plain(ins.column(name)) for name in ("opcode", "engine", "timeline_track", "waited_on", "performance_mode")}
    strings.update({name: array.take(indices) for name, array in per_pc.items()})
    engine = np.asarray(strings["engine"].to_numpy(zero_copy_only=False), dtype=object)
    track = np.asarray(strings["timeline_track"].to_numpy(zero_copy_only=False), dtype=object)
    waited_on = np.asarray(strings["waited_on"].to_numpy(zero_copy_only=False), dtype=object)

    dma_table = tables["dma"]
    dma = {name: dma_table.column(name) for name in dma_table.column_names}
    dma_rows = np.flatnonzero(engine == "dma")
    if len(dma_rows) != dma_table.num_rows:
        raise ProfileFormatError(f"device trace {key}: {len(dma_rows)} DMA instructions but {dma_table.num_rows} DMA "
                                 f"transfers; the trace is inconsistent")
    dma["row"] = dma_rows
    source = dma_table.column("source")
    dest = dma_table.column("dest")
    on_hbm_src = pc.invert(pc.is_in(source, pa.array(ONCHIP)))
    on_hbm_dst = pc.invert(pc.is_in(dest, pa.array(ONCHIP)))
    dma["variable"] = pc.if_else(on_hbm_src, source, pc.if_else(on_hbm_dst, dest, pa.scalar(None, pa.string())))
    dma_start = dma_table.column("start").to_numpy()
    dma_end = dma_table.column("end").to_numpy()

    sem_table = tables["semaphores"]
    semaphores = {name: sem_table.column(name) for name in sem_table.column_names}
    semaphores["row"] = _rows_by_occurrence(pcs, sem_table.column("pc").to_numpy())

    edges = _dependencies(start, end, wait, track, waited_on, semaphores)
    # A DMA row spans trigger to completion; the gap is the trigger's latency to the first byte moving.
    dma_edges = Edges(dma_rows, np.arange(len(dma_rows)), np.full(len(dma_rows), DMA_TRIGGER, np.int8),
                      dma_start - start[dma_rows])

    active = {e: merge_intervals(start[engine == e], end[engine == e]) for e in ENGINES}
    active["dma"] = merge_intervals(dma_start, dma_end)
    hbm_mask = (on_hbm_src.to_numpy(zero_copy_only=False) | on_hbm_dst.to_numpy(zero_copy_only=False)) if len(dma_start) \
        else np.zeros(0, bool)
    hbm = throughput_series(dma_start[hbm_mask], dma_end[hbm_mask], dma_table.column("transfer_bytes").to_numpy()[hbm_mask])

    view = ScheduleView(key, neff_name, float(total_ns), start, end, wait, numbers, strings, dma, semaphores, edges, dma_edges,
                        active, hbm)
    _rollup(view, engine, dma_start, dma_end)
    return view


def _plain(column) -> pa.Array:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def as_dictionary(array) -> pa.DictionaryArray:
    """``array`` dictionary-encoded (int32 indices), as the profile tables store repeated strings."""
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    if not pa.types.is_dictionary(array.type):
        array = array.dictionary_encode()
    if array.type.index_type != pa.int32():
        array = pa.DictionaryArray.from_arrays(array.indices.cast(pa.int32()), array.dictionary)
    return array


def _rows_by_occurrence(row_pcs: np.ndarray, update_pcs: np.ndarray) -> np.ndarray:
    """For each update (in order), the row that made it: the j-th update of a pc is the j-th row of that pc
    (every DMA row and every semaphore signal makes exactly one update)."""
    rows = np.full(len(update_pcs), -1, np.int64)
    if not len(update_pcs):
        return rows
    order = np.argsort(row_pcs, kind="stable")
    sorted_pcs = row_pcs[order]
    first = np.searchsorted(sorted_pcs, update_pcs, side="left")
    occurrence = _occurrence_index(update_pcs)
    candidate = first + occurrence
    ok = (candidate < len(sorted_pcs))
    ok[ok] = sorted_pcs[candidate[ok]] == update_pcs[ok]
    rows[ok] = order[candidate[ok]]
    return rows


def _occurrence_index(values: np.ndarray) -> np.ndarray:
    """0 for the first occurrence of each value, 1 for its second, ... (in array order)."""
    order = np.argsort(values, kind="stable")
    sorted_values = values[order]
    starts = np.r_[0, np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1]
    run = np.arange(len(values)) - np.repeat(starts, np.diff(np.r_[starts, len(values)]))
    result = np.empty(len(values), np.int64)
    result[order] = run
    return result


def _latest_ending_before(ends: np.ndarray, idx: np.ndarray, times: np.ndarray) -> np.ndarray:
    """For each time, the row (from ``idx``, whose end times are ``ends``) that ended last at or before it; -1 if none."""
    order = np.argsort(ends, kind="stable")
    pos = np.searchsorted(ends[order], times, side="right") - 1
    found = np.full(len(times), -1, np.int64)
    ok = pos >= 0
    found[ok] = idx[order[pos[ok]]]
    return found


def _dependencies(start, end, wait, track, waited_on, semaphores) -> Edges:
    """What each waiting row waited for. The timing model records the binding producer's track (or WAR, a
    semaphore, a barrier); the producer is the row on that track that finished last before the wait ended,
    which is the one that released it (a track runs its rows in order)."""
    producers, consumers, kinds = [], [], []
    waiting = np.flatnonzero((wait > 0) & (waited_on != ""))
    if len(waiting):
        tracks = set(track.tolist())
        names = waited_on[waiting]
        for name in set(names.tolist()):
            consumers_of = waiting[names == name]
            if name in tracks:
                on_track = np.flatnonzero(track == name)
                found = _latest_ending_before(end[on_track], on_track, start[consumers_of])
                kind = FLOW_DEPENDENCE
            elif name == "WAR":
                found = np.array([_latest_other_track(end, track, start[c], track[c]) for c in consumers_of], np.int64)
                kind = ANTI_DEPENDENCE
            else:
                sem_names = semaphores["semaphore"].to_numpy(zero_copy_only=False)
                mine = np.flatnonzero(sem_names == name)
                if not len(mine):
                    continue  # a barrier, or a name no row carries
                times = semaphores["timestamp"].to_numpy()[mine]
                updates = _latest_ending_before(times, mine, start[consumers_of])
                rows = semaphores["row"]
                found = np.where(updates >= 0, rows[np.maximum(updates, 0)], -1)
                kind = SEMAPHORE
            ok = found >= 0
            producers.append(found[ok])
            consumers.append(consumers_of[ok])
            kinds.append(np.full(int(ok.sum()), kind, np.int8))
    if not producers:
        empty = np.zeros(0, np.int64)
        return Edges(empty, empty, np.zeros(0, np.int8), np.zeros(0))
    producer = np.concatenate(producers)
    consumer = np.concatenate(consumers)
    order = np.argsort(consumer, kind="stable")
    producer, consumer = producer[order], consumer[order]
    return Edges(producer, consumer, np.concatenate(kinds)[order], start[consumer] - end[producer])


def _latest_other_track(end, track, time, own_track) -> int:
    candidates = np.flatnonzero((end <= time) & (track != own_track))
    return int(candidates[np.argmax(end[candidates])]) if len(candidates) else -1


def _rollup(view: ScheduleView, engine: np.ndarray, dma_start: np.ndarray, dma_end: np.ndarray) -> None:
    n = view.numbers
    duration = view.end - view.start
    opcode = np.asarray(view.strings["opcode"].to_numpy(zero_copy_only=False), dtype=object)
    roll = {
        "instruction_count": view.rows,
        "model_flops": int(n["raw_flops"].sum()),
        "transpose_flops": int(n["transpose_flops"].sum()),
        "adjusted_hardware_flops": int(n["adjusted_flops"].sum()),
        "matmul_instruction_count": int((opcode == "MATMUL").sum()),
        "dma_transfer_count": len(dma_start),
        "dma_transfer_total_bytes": int(view.dma["transfer_bytes"].to_numpy().sum()) if len(dma_start) else 0,
        "dma_active_ns": float((view.active["dma"][1] - view.active["dma"][0]).sum()),
    }
    roll["hardware_flops"] = roll["model_flops"] + roll["transpose_flops"]
    for name in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes", "psum_read_bytes",
                 "psum_write_bytes"):
        roll[name] = int(n[name].sum())
    for e in ENGINES:
        mine = engine == e
        starts, ends = view.active[e]
        roll[f"{e}_engine_instruction_count"] = int(mine.sum())
        roll[f"{e}_engine_instruction_ns"] = float(duration[mine].sum())
        roll[f"{e}_engine_active_ns"] = float((ends - starts).sum())
        roll[f"{e}_first_start"] = float(view.start[mine].min()) if mine.any() else None
        roll[f"{e}_last_end"] = float(view.end[mine].max()) if mine.any() else None
    every = merge_intervals(np.concatenate([view.start[engine != "dma"], dma_start]),
                            np.concatenate([view.end[engine != "dma"], dma_end]))
    roll["total_active_ns"] = float((every[1] - every[0]).sum())
    view.rollup = roll
    joined = pc.binary_join_element_wise(view.strings["engine"], view.strings["opcode"], "\x1f").dictionary_encode()
    codes = joined.indices.to_numpy().astype(np.int64)
    keys = [tuple(k.split("\x1f")) for k in joined.dictionary.to_pylist()]
    counts = np.bincount(codes, minlength=len(keys))
    times = np.bincount(codes, weights=duration, minlength=len(keys))
    busy = grouped_busy(codes, view.start, view.end, len(keys))
    for i, k in enumerate(keys):
        view.opcodes[k] = [int(counts[i]), float(times[i]), float(busy[i])]
