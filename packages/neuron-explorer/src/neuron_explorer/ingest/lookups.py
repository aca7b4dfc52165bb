"""Lookup tables built from the NEFFs: per-instruction operands and source frames, tensor tables."""

from __future__ import annotations

import datetime as dt

import neuron_sim
import numpy as np
import pyarrow as pa
from neuron_sim import get_architecture

from .. import schema
from ..version import __version__


class SourceFrames:
    """Stack frames of the source locations instructions carry (``file:line``), numbered from 1."""

    def __init__(self, captured: dict[str, str]):
        self.captured = captured  # original path -> stored copy in the session
        self._files: dict[str, int] = {}
        self._frames: dict[tuple[int, int], int] = {}

    def frame(self, location: str) -> int | None:
        path, sep, line = location.rpartition(":")
        if not sep or not line.isdigit():
            return None
        file_id = self._files.setdefault(path, len(self._files) + 1)
        return self._frames.setdefault((file_id, int(line)), len(self._frames) + 1)

    def tables(self) -> dict[str, list[dict]]:
        files = [{"id": str(i), "name": p, "captured": p in self.captured} for p, i in self._files.items()]
        locations = [{"id": str(f), "file_name_id": file_id, "function_name_id": 1, "line_number": line}
                     for (file_id, line), f in self._frames.items()]
        frames = [{"id": str(f), "file_location_id": f, "parent_frame_id": "0"} for f in self._frames.values()]
        return {"StackFrame": frames, "StackFrameFileLocation": locations, "StackFrameFileName": files,
                "StackFrameFunctionName": [{"id": "1", "name": ""}]}


def per_pc_columns(program, frames: SourceFrames) -> dict[str, pa.Array]:
    """Columns indexed by program counter: operands, the source location and its stack frame."""
    locations = [inst.location or "" for inst in program.instructions]
    frame_ids = [frames.frame(loc) if loc else None for loc in locations]
    return {
        "operands": pa.array([inst.describe() for inst in program.instructions], pa.string()),
        "nki_source_location": pa.array([loc or None for loc in locations], pa.string()),
        "stack_frame_ids": pa.array([f"[{f}]" if f is not None else None for f in frame_ids], pa.string()),
    }


_TYPES = {"input": "IN", "output": "OUT", "inout": "INOUT", "internal": "INTERNAL"}


def tensor_info_rows(neff_name: str, program, view) -> list[dict]:
    """TensorInfo rows of one NEFF; the SBUF-load statistics come from one execution's DMA transfers."""
    loads: dict[str, tuple[int, int]] = {}
    if view is not None and len(view.dma["row"]):
        source = view.dma["source"].to_numpy(zero_copy_only=False)
        dest = view.dma["dest"].to_numpy(zero_copy_only=False)
        nbytes = view.dma["transfer_bytes"].to_numpy()
        into_sbuf = dest == "SBUF"
        for name in set(source[into_sbuf].tolist()):
            mine = into_sbuf & (source == name)
            loads[name] = (int(mine.sum()), int(nbytes[mine].sum()))
    rows = []
    for t in program.tensors:
        count, total = loads.get(t.name, (0, 0))
        rows.append({
            "neff_name": neff_name, "variable_name": t.name, "type": _TYPES.get(t.kind, t.kind.upper()),
            "shape": str(list(t.shape)), "dtype": t.dtype, "size": t.nbytes, "load_to_sbuf_dma_count": count,
            "load_to_sbuf_total_size_bytes": total, "load_to_sbuf_avg_size_bytes": total // count if count else 0,
            "load_to_sbuf_repeat_factor": total / t.nbytes if t.nbytes else 0.0,
        })
    return rows


def metadata_row(info: dict, target: str, first_hw: int, last_hw: int, display_name: str | None, session_dir: str,
                 fingerprint: str) -> dict:
    arch = get_architecture(target)

    def utc(ns):
        return dt.datetime.fromtimestamp(ns / 1e9, dt.UTC).isoformat(sep=" ") if ns else ""

    return {
        "profile_schema_version": schema.SCHEMA_VERSION,
        "explorer_version": __version__,
        "runtime_version": info.get("runtime_version") or neuron_sim.__version__,
        "profile_name": display_name or info.get("display_name") or f"{info.get('host')} pid {info.get('pid')}",
        "is_simulation": True,
        "target": arch.name,
        "instance_type": f"software NeuronCore ({arch.name}, {arch.neuron_core}) on {info.get('host')}",
        "process_id": int(info.get("pid") or 0),
        "num_physical_cores": 1,
        "vnc_enabled": False,
        "first_hw_timestamp": first_hw,
        "last_hw_timestamp": last_hw,
        "first_ts": utc(info.get("started_unix_ns")),
        "last_ts": utc(info.get("stopped_unix_ns")),
        "hbm_ddr_bandwidth": arch.hbm_bytes_per_ns_per_core * 1e9,
        "dma_ddr_bandwidth": arch.dma.bytes_per_ns_per_engine * arch.dma.engines * 1e9,
        "num_dma_engines_per_neuroncore": arch.dma.engines,
        "tensor_engine_num_rows": arch.tensor.rows,
        "tensor_engine_num_cols": arch.tensor.cols,
        "tensor_engine_clock_freq": arch.tensor.clock_hz / 1e9,
        "vector_engine_clock_freq": arch.vector.clock_hz / 1e9,
        "scalar_engine_clock_freq": arch.scalar.clock_hz / 1e9,
        "gpsimd_engine_clock_freq": arch.gpsimd.clock_hz / 1e9,
        "neuroncore_clock_freq": arch.base_clock_hz / 1e9,
        "ticks_per_nanosec": 1,
        "session_dir": session_dir,
        "session_fingerprint": fingerprint,
        "device_profile": str((info.get("config") or {}).get("device_profile", "")),
    }


def int_ns(values) -> np.ndarray:
    """Simulated float nanoseconds as the tables' integer nanoseconds."""
    return np.rint(np.asarray(values, dtype=np.float64)).astype(np.int64)
