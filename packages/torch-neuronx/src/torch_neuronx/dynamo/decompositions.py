"""The decomposition table of the neuron backend: what AOTAutograd and the re-trace decompose.

neuronx-cc's table (torch-mlir's, with its semantic corrections) so graphs arrive as the core
ATen torch-mlir lowers, minus decompositions of random ops: a random draw must stay one node so
it runs before the launch as eager runs it (same generator, same order, same numbers).
"""

from __future__ import annotations

import functools

import torch


@functools.cache
def _table() -> dict:
    from neuronxcc.frontend.fx import decompositions as compiler_table

    return {op: fn for op, fn in compiler_table().items()
            if not (isinstance(op, torch._ops.OpOverload) and torch.Tag.nondeterministic_seeded in op.tags)}


def decompositions() -> dict:
    return dict(_table())
