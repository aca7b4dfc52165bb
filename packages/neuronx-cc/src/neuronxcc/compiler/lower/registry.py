"""The lowering of each fusion group kind (``fusion.Group.kind``), filled by ``register_lowering``.

A lowering is ``fn(ctx: LoweringContext, group: Group) -> None``: it resolves the group's inputs
to views (``ctx.resolve``), emits the group's instructions through ``ctx.em`` and records where
its stored results live (``ctx.views``). New kinds register here and name their ops in
``fusion.OP_KINDS``; the built-in ones are imported by ``lower/builtin.py``.
"""

from __future__ import annotations

from collections.abc import Callable

LOWERINGS: dict[str, Callable] = {}


def register_lowering(kind: str):
    def register(fn):
        LOWERINGS[kind] = fn
        return fn

    return register
