"""Lowerings of fusion groups, by group kind (``fusion.Group.kind``).

A lowering is ``fn(ctx: LoweringContext, group: Group) -> None``: it resolves the group's inputs
to views (``ctx.resolve``), emits the group's instructions through ``ctx.em`` and records where
its stored results live (``ctx.views``). New kinds (matmul, gather/scatter, ...) register here
and name their ops in ``fusion.OP_KINDS``.
"""

from __future__ import annotations

from collections.abc import Callable

LOWERINGS: dict[str, Callable] = {}


def register_lowering(kind: str):
    def register(fn):
        LOWERINGS[kind] = fn
        return fn

    return register


def load_all() -> None:
    """Import the built-in lowerings (each registers itself)."""
    from . import argreduce, cumsum, elementwise, indexing, matmul, movement, words64  # noqa: F401


__all__ = ["LOWERINGS", "register_lowering", "load_all"]
