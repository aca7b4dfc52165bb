"""Emitting the device tables of executions: each execution gets its ids when it is seen (in trace
order), and executions of the same schedule are written together, their rows built with one
vectorized operation per column instead of one per execution - a run's rows cost the same whether
it made ten long launches or ten thousand short ones."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from ..output.parquet import TableWriter, constant
from .lookups import int_ns
from .schedule import as_dictionary

PENDING_ROWS = 1 << 17  # instruction rows held before writing them out


class DeviceEmitter:
    def __init__(self, writers: dict[str, TableWriter]):
        self.w = writers
        self.next_instruction = 0
        self.next_dma = 0
        self.hbm_moved: dict[int, float] = {}  # per NeuronCore: HBM bytes moved so far
        self._pending: dict[str, tuple[object, list]] = {}  # view key -> (view, [execution tuples])
        self._rows = 0

    def add(self, view, launch_id: int, nc: int, start_ns: float, name: str, node_id: int,
            call_site: tuple[str, str] | None = None) -> None:
        """``call_site``: (location, stack frame ids) every instruction row of this execution points
        at instead of the program's own locations (an eager op's user line)."""
        moved = self.hbm_moved.get(nc, 0.0)
        entry = (launch_id, nc, float(start_ns), name, node_id, self.next_instruction, self.next_dma, moved, call_site)
        self.next_instruction += view.rows
        self.next_dma += len(view.dma_start)
        if len(view.hbm[2]):
            self.hbm_moved[nc] = moved + float(view.hbm[2][-1])
        group = self._pending.get(view.key)
        if group is None or group[0] is not view:
            if group is not None:
                self._emit(*self._pending.pop(view.key))
            group = self._pending[view.key] = (view, [])
        group[1].append(entry)
        self._rows += view.rows
        if self._rows >= PENDING_ROWS:
            self.flush()

    def flush(self) -> None:
        for view, executions in self._pending.values():
            self._emit(view, executions)
        self._pending.clear()
        self._rows = 0

    def _emit(self, view, executions: list) -> None:
        m = len(executions)
        launch, nc, base, names, node, first, dma_first, hbm_base, sites = (np.asarray(c) if i not in (3, 8) else list(c)
                                                                           for i, c in enumerate(zip(*executions)))
        base = base.astype(np.float64)
        n = view.rows
        if n:
            self._instructions(view, m, n, launch, nc, base, names, node, first, sites)
        if len(view.dma_start):
            self._dma(view, m, launch, nc, base, first, dma_first)
        if len(view.sem_ts):
            ns = len(view.sem_ts)
            rows = view.semaphores["row"]
            self.w["SemaphoreUpdate"].append(
                m * ns, launch_id=np.repeat(launch, ns), nc_idx=np.repeat(nc, ns), pcore_idx=constant(0, m * ns),
                timestamp=_shifted(view.sem_ts, base), id=_tiled(view.semaphores["semaphore"], m),
                value=np.tile(view.sem_value, m), update_source=_tiled(view.semaphores["update_source"], m),
                pc=np.tile(view.semaphores["pc"].to_numpy(), m),
                instruction_id=np.where(np.tile(rows, m) >= 0, np.add.outer(first, rows).ravel(), -1))
        na = len(view.active_starts)
        if na:
            a_s, a_e = _shifted(view.active_starts, base), _shifted(view.active_ends, base)
            self.w["ActiveTime"].append(m * na, launch_id=np.repeat(launch, na), nc_idx=np.repeat(nc, na),
                                        pcore_idx=constant(0, m * na), start_ts=a_s, end_ts=a_e, duration_ns=a_e - a_s,
                                        engine=_tiled(view.active_engine, m))
        times, rate, moved = view.hbm
        nh = len(times)
        if nh:
            self.w["HbmUsage"].append(m * nh, launch_id=np.repeat(launch, nh), nc_idx=np.repeat(nc, nh),
                                      pcore_idx=constant(0, m * nh), timestamp=_shifted(times, base),
                                      current_throughput=np.tile(rate * 1e9, m),
                                      total_transfer_bytes=int_ns(np.add.outer(hbm_base, moved).ravel()))
        if view.occupancy is not None:
            self._occupancy(view, m, launch, nc, base)
        nf = len(view.flow_gap)
        if nf:
            producers = np.concatenate([view.edges.producer, view.dma_edges.producer])
            consumers_instruction = view.edges.consumer
            out_ids = np.concatenate([np.add.outer(first, consumers_instruction),
                                      np.add.outer(dma_first, view.dma_edges.consumer)], axis=1).ravel()
            self.w["Flow"].append(m * nf, in_id=np.add.outer(first, producers).ravel(), out_id=out_ids,
                                  in_table=constant("Instruction", m * nf), out_table=_tiled(view.flow_out_table, m),
                                  dependency_type=_tiled(view.flow_type, m), gap_time=np.tile(view.flow_gap, m))

    def _occupancy(self, view, m, launch, nc, base) -> None:
        for table, memory, prefix, groups in (("SbufUsage", "SBUF", "partition_", (0, 32, 64, 96)),
                                              ("PsumUsage", "PSUM", "bank_", range(8))):
            times, percent = view.occupancy[memory]
            k = len(times)
            if not k:
                continue
            columns = {f"{prefix}{g}_util_percent": np.tile(percent[:, i], m) for i, g in enumerate(groups)}
            self.w[table].append(m * k, launch_id=np.repeat(launch, k), nc_idx=np.repeat(nc, k), pcore_idx=constant(0, m * k),
                                 timestamp=_shifted(times, base), avg_util_percent=np.tile(percent.mean(axis=1), m), **columns)

    def _instructions(self, view, m, n, launch, nc, base, names, node, first, sites) -> None:
        start_ts = _shifted(view.start, base)
        end_ts = _shifted(view.end, base)
        s, nums = view.strings, view.numbers
        same_name = all(x == names[0] for x in names)
        hlo = constant(names[0], m * n) if same_name else pa.array(np.repeat(np.array(names, dtype=object), n), pa.string())
        location = _tiled(s["nki_source_location"], m)
        frames = _tiled(s["stack_frame_ids"], m)
        if any(site is not None for site in sites):
            location, frames = (_per_execution(tiled, [None if site is None else site[k] for site in sites], n)
                                for k, tiled in enumerate((location, frames)))
        self.w["Instruction"].append(
            m * n, id=np.add.outer(first, np.arange(n)).ravel(), launch_id=np.repeat(launch, n), nc_idx=np.repeat(nc, n),
            pcore_idx=constant(0, m * n), start_ts=start_ts, end_ts=end_ts, duration_ns=end_ts - start_ts,
            engine=_tiled(s["engine"], m), timeline_track=_tiled(s["timeline_track"], m), opcode=_tiled(s["opcode"], m),
            operands=_tiled(s["operands"], m), pc=np.tile(nums["pc"], m), evt_wait_time_ns=np.tile(view.wait_ns, m),
            waited_on=_tiled(s["waited_on"], m), hlo_name=hlo, nki_source_location=location,
            stack_frame_ids=frames, framework_node_id=np.repeat(node, n),
            **{k: np.tile(nums[k], m) for k in ("hbm_read_bytes", "hbm_write_bytes", "sbuf_read_bytes", "sbuf_write_bytes",
                                                "psum_read_bytes", "psum_write_bytes", "raw_flops", "adjusted_flops")},
            flops_transpose=np.tile(nums["transpose_flops"], m), performance_mode=_tiled(s["performance_mode"], m))

    def _dma(self, view, m, launch, nc, base, first, dma_first) -> None:
        nd = len(view.dma_start)
        d = view.dma
        ds, de = _shifted(view.dma_start, base), _shifted(view.dma_end, base)
        nbytes = np.tile(view.dma_bytes, m)
        self.w["DmaPacket"].append(
            m * nd, id=np.add.outer(dma_first, np.arange(nd)).ravel(), launch_id=np.repeat(launch, nd),
            nc_idx=np.repeat(nc, nd), pcore_idx=constant(0, m * nd), instruction_id=np.add.outer(first, d["row"]).ravel(),
            pc=np.tile(d["pc"].to_numpy(), m), start_ts=ds, end_ts=de, duration_ns=de - ds,
            engine_idx=np.tile(d["engine_idx"].to_numpy(), m), queue_name=_tiled(d["queue_name"], m), transfer_bytes=nbytes,
            read_bytes=nbytes, write_bytes=nbytes, throughput=np.tile(view.dma_throughput, m), source=_tiled(d["source"], m),
            dest=_tiled(d["dest"], m), variable=_tiled(d["variable"], m))


def _shifted(relative: np.ndarray, bases: np.ndarray) -> np.ndarray:
    """Relative times of one schedule placed at each execution's start, as integer ns."""
    return int_ns(np.add.outer(bases, relative).ravel())


def _per_execution(tiled, values: list, n: int) -> pa.DictionaryArray:
    """``tiled`` (a string column of ``n`` rows per execution) with the rows of each execution
    whose value is not None set to that value. Works on dictionary indices, not on the strings:
    a profiled eager run has a call site on every launch."""
    tiled = as_dictionary(tiled)
    extra = list(dict.fromkeys(v for v in values if v is not None))
    code = {v: len(tiled.dictionary) + k for k, v in enumerate(extra)}
    replaced = np.repeat(np.array([-1 if v is None else code[v] for v in values], np.int32), n)
    keep = replaced < 0
    indices = np.where(keep, tiled.indices.fill_null(0).to_numpy(), replaced)
    null = keep & ~tiled.indices.is_valid().to_numpy(zero_copy_only=False)  # rows left as they were, null there
    dictionary = pa.concat_arrays([tiled.dictionary, pa.array(extra, tiled.dictionary.type)])
    return pa.DictionaryArray.from_arrays(pa.array(indices, pa.int32(), mask=null if null.any() else None), dictionary)


def _tiled(array, m: int):
    """``array`` repeated for ``m`` executions."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if m == 1:
        return array
    return array.take(pa.array(np.tile(np.arange(len(array), dtype=np.int64), m)))
