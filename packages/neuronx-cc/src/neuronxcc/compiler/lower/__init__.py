"""Lowerings of fusion groups, by group kind (``registry.LOWERINGS``; ``fusion.Group.kind``).

The built-in lowerings (one module per group kind) register themselves when ``lower.builtin`` is
imported (the driver does); a new kind registers itself with ``register_lowering``, names its ops
in ``fusion.OP_KINDS`` and is imported by ``builtin.py``. This package itself imports no lowering:
the passes below lowering (fusion reads ``elementwise_ops``' per-op temporaries) import its table
modules without pulling in the lowerings, which import those passes.
"""

from __future__ import annotations

from .registry import LOWERINGS, register_lowering

__all__ = ["LOWERINGS", "register_lowering"]
