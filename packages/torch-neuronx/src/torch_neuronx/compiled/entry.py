"""A cache entry: a NEFF plus how to bind a call's tensors to it and hand its results back - one
class for eager ops, compiled graphs and anything else launched from the NEFF cache.

The binding facts travel in the NEFF's metadata (JSON), so a NEFF read back from the disk cache
is launchable without tracing or lowering again. ``from_neff`` checks them on every load, against
each other and against the NEFF's own tensor table: a NEFF whose facts do not fit it is refused
(and rebuilt), never launched with buffers of the wrong size or type.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch.utils._pytree import treespec_dumps, treespec_loads

from .dtypes import sim_dtype, torch_dtype

METADATA_KEY = "torch_neuronx.entry"
METADATA_VERSION = 5  # bump when what a NEFF is compiled for, or its metadata, changes


@dataclass
class OutputSpec:
    shape: tuple
    strides: tuple  # of the tensor handed back (meta strides, or row-major where those are not dense)
    dtype: torch.dtype
    nbytes: int  # bytes of its buffer


@dataclass
class CompiledNeff:
    """Launch facts of a NEFF whose tensors are ``in0..`` (inputs) and ``out0..`` (outputs)."""

    neff: object
    in_nbytes: list[int]  # bytes bound to input i (its storage span)
    outputs: list[OutputSpec]  # one per NEFF output
    # -- eager ops --
    none_positions: list[int] = field(default_factory=list)  # result leaves that are None (no output)
    # result leaves that are empty tensors (no output, made at launch): (position, spec), by position
    empty_outputs: list[tuple[int, OutputSpec]] = field(default_factory=list)
    out_spec: object = None  # pytree spec of the op's return value
    mutated: list[str] = field(default_factory=list)  # written argument names (mutating overloads)
    # written tensors the op leaves as they are (indices into them; no output, nothing written)
    unchanged: list[int] = field(default_factory=list)
    # -- set by the cache, not stored --
    context: str = ""  # the call as launches and errors name it: op(shapes)
    errors: object = None  # its launches' errors= (ops.index_errors: CPU's error for a bad index)
    key: str = ""  # the hex of the cache key it was compiled for: identifies what it computes

    def result_leaves(self, results: list, device) -> list:
        """The op's result leaves from the NEFF's output tensors: its None results put back, and
        its empty ones made on ``device`` (no buffer, nothing to write)."""
        leaves = list(results)
        for p in self.none_positions:
            leaves.insert(p, None)
        for p, spec in self.empty_outputs:
            leaves.insert(p, torch.empty_strided(spec.shape, spec.strides, dtype=spec.dtype, device=device))
        return leaves

    @property
    def name(self) -> str:
        return self.neff.program.name

    def metadata(self) -> dict:
        return {
            "version": METADATA_VERSION,
            "in_nbytes": self.in_nbytes,
            "outputs": [[list(o.shape), list(o.strides), sim_dtype(o.dtype), o.nbytes] for o in self.outputs],
            "none_positions": self.none_positions,
            "empty_outputs": [[p, list(o.shape), list(o.strides), sim_dtype(o.dtype)] for p, o in self.empty_outputs],
            "out_spec": None if self.out_spec is None else treespec_dumps(self.out_spec),
            "mutated": self.mutated,
            "unchanged": self.unchanged,
        }

    def output_targets(self, targets: list[torch.Tensor]) -> list[torch.Tensor]:
        """The written tensors of a mutating call that outputs ``out0..`` go to, in order (those
        the op leaves unchanged - a fused optimizer's gradients without a grad scale - have none)."""
        if not self.unchanged:
            return targets[: len(self.outputs)]
        skipped = set(self.unchanged)
        return [t for j, t in enumerate(targets) if j not in skipped][: len(self.outputs)]

    @classmethod
    def from_neff(cls, neff) -> CompiledNeff:
        """The entry a NEFF's metadata describes; ValueError (naming the fault) if there is none of
        this version, or it does not fit the NEFF's tensor table."""
        name = neff.program.name
        meta = neff.metadata.get(METADATA_KEY)
        if not isinstance(meta, dict) or meta.get("version") != METADATA_VERSION:
            raise ValueError(f"NEFF {name!r} has no {METADATA_KEY} metadata of version {METADATA_VERSION}")
        try:
            entry = cls(
                neff=neff,
                in_nbytes=[_size(n) for n in meta["in_nbytes"]],
                outputs=[OutputSpec(tuple(map(int, s)), tuple(map(int, st)), torch_dtype(d), _size(n))
                         for s, st, d, n in meta["outputs"]],
                none_positions=[int(p) for p in meta["none_positions"]],
                empty_outputs=[(int(p), OutputSpec(tuple(map(int, s)), tuple(map(int, st)), torch_dtype(d), 0))
                               for p, s, st, d in meta["empty_outputs"]],
                out_spec=None if meta["out_spec"] is None else treespec_loads(meta["out_spec"]),
                mutated=[str(m) for m in meta["mutated"]],
                unchanged=[int(j) for j in meta["unchanged"]],
            )
        except Exception as err:  # whatever malformed metadata provokes; the cause stays chained
            raise ValueError(f"NEFF {name!r}: malformed {METADATA_KEY} metadata: {type(err).__name__}: {err}") from err
        entry._check_tensor_table()
        return entry

    def _check_tensor_table(self) -> None:
        """Each input and output the facts name is one the program declares, of a kind, size
        and (for outputs) dtype the bound buffer satisfies; the program needs no other buffer."""
        program = self.neff.program
        decls = {t.name: t for t in program.tensors}
        expected = [(f"in{i}", ("input", "inout"), n, None) for i, n in enumerate(self.in_nbytes)]
        expected += [(f"out{j}", ("output", "inout"), o.nbytes, sim_dtype(o.dtype)) for j, o in enumerate(self.outputs)]
        for tensor, kinds, nbytes, dtype in expected:
            decl = decls.get(tensor)
            if decl is None or decl.kind not in kinds or decl.nbytes > nbytes or (dtype is not None and decl.dtype != dtype):
                found = "none" if decl is None else f"{decl.kind} {list(decl.shape)} {decl.dtype} ({decl.nbytes} bytes)"
                raise ValueError(f"NEFF {program.name!r}: its metadata binds {tensor!r} to {nbytes} bytes"
                                 f"{'' if dtype is None else ' of ' + dtype}, but its tensor table declares {found}")
        constants = (program.metadata or {}).get("constants") or {}
        bound = {tensor for tensor, *_ in expected} | set(constants)
        unbound = [t.name for t in program.tensors if t.kind != "internal" and t.name not in bound]
        if unbound:
            raise ValueError(f"NEFF {program.name!r} needs buffers its metadata does not bind: {unbound}")


def _size(value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"a byte count must be a non-negative int, got {value!r}")
    return value
