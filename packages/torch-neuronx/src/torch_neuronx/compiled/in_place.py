"""The one aliasing / in-place plan: may a launch write an output straight into the tensor it
overwrites, instead of into a temporary copied there afterwards?

Eager in-place and ``out=`` ops, adaptive eager's fused runs and compiled graphs (an optimizer
step's parameter updates) all decide it here, from two kinds of facts:

* what the graph allows, recorded by the compiler in the NEFF's metadata
  (``neuronxcc.compiler.aliasing``): the (input i, output j) pairs where output j may overwrite
  input i's buffer - it reads that input only at each element's own index, and nothing else needs
  the old values;
* what the call's tensors are: the written tensor must have the output's layout, every input
  sharing its memory must be that very tensor (the same view) read as such a pair, and no other
  written tensor may share its memory.
"""

from __future__ import annotations

import torch
from neuronxcc.compiler.aliasing import ALIASING_KEY, in_place_pairs_of

# id(a NEFF's aliasing facts) -> (those facts, their pairs): each NEFF's facts are parsed once.
# The facts are held, so their id cannot be reused while the entry exists.
_PAIRS: dict[int, tuple[object, frozenset]] = {}
_PAIRS_KEPT = 4096


def in_place_pairs(neff) -> frozenset[tuple[int, int]]:
    """The (input, output) pairs of ``neff`` whose output may overwrite the input's buffer."""
    facts = neff.metadata.get(ALIASING_KEY)
    hit = _PAIRS.get(id(facts))
    if hit is not None and hit[0] is facts:
        return hit[1]
    pairs = in_place_pairs_of(neff.metadata)
    if len(_PAIRS) >= _PAIRS_KEPT:
        _PAIRS.clear()
    _PAIRS[id(facts)] = (facts, pairs)
    return pairs


def may_write_in_place(pairs: frozenset, j: int, target: torch.Tensor, strides: tuple, inputs, targets) -> bool:
    """Whether output ``j`` (of ``strides``) may be written into ``target``: it has those strides;
    each of ``inputs`` in ``target``'s storage is ``target`` itself, read as an (input, ``j``)
    pair; and no other of ``targets`` (the launch's written tensors) shares that storage."""
    if target.stride() != strides:
        return False
    storage = target.untyped_storage().data_ptr()
    for i, t in enumerate(inputs):
        if t.untyped_storage().data_ptr() != storage:
            continue
        same_view = t.data_ptr() == target.data_ptr() and t.shape == target.shape and t.stride() == target.stride()
        if not (same_view and (i, j) in pairs):
            return False
    return all(o is target or o.untyped_storage().data_ptr() != storage for o in targets)
