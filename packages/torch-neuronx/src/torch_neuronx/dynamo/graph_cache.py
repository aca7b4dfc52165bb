"""NEFFs of compiled graphs, cached in memory and on disk by a hash of the graph.

The key hashes the device graph's code, its buffers' shapes, strides and dtypes, the target, the
torch-mlir version, and everything else that shapes a NEFF (``compiled.cache.neff_key``: a
change to any package's code is a new entry, never a stale hit). What the launch needs (buffer
sizes, output layouts) travels in the NEFF's JSON metadata, checked on load: an entry of another
version is rebuilt. The disk layer is the eager path's (``TORCH_NEURONX_NEFF_CACHE_DIR``;
neuron_sim's NeffCache refuses entries of other keys and discards corrupt ones, with a warning).
"""

from __future__ import annotations

import functools
import importlib.metadata
import threading
from dataclasses import dataclass, field

import torch
from neuron_sim.neff import CacheKey

from ..compiled.cache import CACHE as OP_CACHE
from ..compiled.cache import neff_key
from ..compiled.dtypes import sim_dtype, torch_dtype

METADATA_KEY = "torch_neuronx.graph"
METADATA_VERSION = 2


@dataclass
class OutputBuffer:
    shape: tuple
    strides: tuple
    dtype: torch.dtype
    nbytes: int


@dataclass
class GraphNeff:
    neff: object
    in_nbytes: list[int]
    outputs: list[OutputBuffer]
    # (output j, input i or None): outputs that may be written into their mutated argument's memory
    in_place: list = field(default_factory=list)

    def metadata(self) -> dict:
        return {"version": METADATA_VERSION, "in_nbytes": self.in_nbytes,
                "outputs": [[list(o.shape), list(o.strides), sim_dtype(o.dtype), o.nbytes] for o in self.outputs],
                "in_place": [[j, i] for j, i in self.in_place]}

    @classmethod
    def from_neff(cls, neff) -> GraphNeff:
        meta = neff.metadata.get(METADATA_KEY)
        if not isinstance(meta, dict) or meta.get("version") != METADATA_VERSION:
            raise ValueError(f"NEFF {neff.program.name!r} has no {METADATA_KEY} metadata of version {METADATA_VERSION}")
        outputs = [OutputBuffer(tuple(s), tuple(st), torch_dtype(d), int(n)) for s, st, d, n in meta["outputs"]]
        in_place = [(int(j), None if i is None else int(i)) for j, i in meta["in_place"]]
        return cls(neff, [int(n) for n in meta["in_nbytes"]], outputs, in_place)


def graph_key(code: str, specs: list, out_layouts: list, arch: str) -> CacheKey:
    return neff_key("torch_neuronx.dynamo", METADATA_VERSION, _torch_mlir_version(), arch, code, repr(specs), repr(out_layouts))


@functools.cache
def _torch_mlir_version() -> str | None:
    """torch-mlir lowers the graphs (not eager ops): its version shapes their NEFFs."""
    try:
        return importlib.metadata.version("torch-mlir")
    except importlib.metadata.PackageNotFoundError:
        return None


class GraphCache:
    def __init__(self):
        self._memory: dict[str, GraphNeff] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> tuple[GraphNeff | None, str]:
        """(entry, where it was found: ``memory`` / ``disk``) or (None, "")."""
        entry = self._memory.get(key)
        if entry is not None:
            return entry, "memory"
        disk = OP_CACHE.disk()
        neff = disk.get(key) if disk is not None else None
        if neff is not None:
            try:
                entry = GraphNeff.from_neff(neff)
            except (ValueError, KeyError, TypeError):
                return None, ""  # another version's entry under our key: rebuilt and overwritten
            with self._lock:
                self._memory[key] = entry
            return entry, "disk"
        return None, ""

    def put(self, key: str, entry: GraphNeff) -> None:
        entry.neff.metadata[METADATA_KEY] = entry.metadata()
        with self._lock:
            self._memory[key] = entry
        disk = OP_CACHE.disk()
        if disk is not None:
            disk.put(key, entry.neff)

    def clear(self) -> None:
        """Forget the in-memory entries (the disk cache stays)."""
        with self._lock:
            self._memory.clear()


CACHE = GraphCache()
