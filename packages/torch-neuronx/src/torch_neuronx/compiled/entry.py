"""What a compiled op signature is: its NEFF plus how to bind and return the call's tensors.

The binding facts travel in the NEFF's metadata (JSON), so a NEFF read back from the disk cache
is launchable without tracing the op again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._pytree import treespec_dumps, treespec_loads

from .dtypes import sim_dtype, torch_dtype

METADATA_KEY = "torch_neuronx.op"
METADATA_VERSION = 2  # bump when what a NEFF is compiled for, or its metadata, changes


@dataclass
class OutputSpec:
    shape: tuple
    strides: tuple  # of the tensor handed back (meta strides, or row-major where those are not dense)
    dtype: torch.dtype
    nbytes: int  # bytes of its buffer


@dataclass
class CompiledOp:
    neff: object
    in_nbytes: list[int]
    outputs: list[OutputSpec]  # one per graph output
    none_positions: list[int]  # result leaves that are None (no graph output)
    out_spec: object  # pytree spec of the op's return value
    mutated: list[str] = field(default_factory=list)  # written argument names (mutating overloads)
    elementwise: bool = False  # output element i depends only on input elements i (safe in place)
    input_readers: list = field(default_factory=list)  # per input: the outputs that depend on it
    context: str = ""  # the call as launches and errors name it: op(shapes)

    @property
    def name(self) -> str:
        return self.neff.program.name

    def metadata(self) -> dict:
        return {
            "version": METADATA_VERSION,
            "in_nbytes": self.in_nbytes,
            "outputs": [[list(o.shape), list(o.strides), sim_dtype(o.dtype), o.nbytes] for o in self.outputs],
            "none_positions": self.none_positions,
            "out_spec": treespec_dumps(self.out_spec),
            "mutated": self.mutated,
            "elementwise": self.elementwise,
            "input_readers": self.input_readers,
        }

    @classmethod
    def from_neff(cls, neff) -> CompiledOp:
        """The op a cached NEFF was compiled for; ValueError if its metadata is not ours."""
        meta = neff.metadata.get(METADATA_KEY)
        if not isinstance(meta, dict) or meta.get("version") != METADATA_VERSION:
            raise ValueError(f"NEFF {neff.program.name!r} has no {METADATA_KEY} metadata of version {METADATA_VERSION}")
        return cls(
            neff=neff,
            in_nbytes=list(meta["in_nbytes"]),
            outputs=[OutputSpec(tuple(s), tuple(st), torch_dtype(d), int(n)) for s, st, d, n in meta["outputs"]],
            none_positions=list(meta["none_positions"]),
            out_spec=treespec_loads(meta["out_spec"]),
            mutated=list(meta["mutated"]),
            elementwise=bool(meta["elementwise"]),
            input_readers=[list(r) for r in meta["input_readers"]],
        )
