"""Lowerings of fusion groups, by group kind (``registry.LOWERINGS``; ``fusion.Group.kind``).

Importing this package registers the built-in lowerings (one module per group kind); a new kind
registers itself with ``register_lowering`` and names its ops in ``fusion.OP_KINDS``.
"""

from __future__ import annotations

from . import argreduce, cumsum, elementwise, indexing, matmul, movement, words64  # noqa: F401 (each registers itself)
from .registry import LOWERINGS, register_lowering

__all__ = ["LOWERINGS", "register_lowering"]
