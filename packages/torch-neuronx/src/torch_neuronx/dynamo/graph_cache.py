"""NEFFs of compiled graphs: the torch.compile side of the one entry cache (``compiled.cache``).

A graph's key is its device graph's code, its buffers' shapes, strides and dtypes, its outputs'
layouts and the target; on disk also the torch-mlir version (it lowers graphs, not eager ops)
and everything else that shapes a NEFF (``compiled.cache.neff_key``). What the launch needs
(buffer sizes, output layouts) travels in the NEFF's metadata, checked on load.
"""

from __future__ import annotations

import functools
import importlib.metadata

from ..compiled.cache import EntryCache


def graph_key(code: str, specs: list, out_layouts: list, arch: str) -> tuple:
    return code, tuple(specs), tuple(out_layouts), arch


@functools.cache
def _torch_mlir_version() -> str | None:
    try:
        return importlib.metadata.version("torch-mlir")
    except importlib.metadata.PackageNotFoundError:
        return None


def _signature(key: tuple) -> list:
    code, specs, out_layouts, arch = key
    return [arch, _torch_mlir_version(), code, repr(specs), repr(out_layouts)]


CACHE = EntryCache("torch_neuronx.dynamo", _signature)
