"""Importing this module registers every built-in lowering (each module registers its group kind
with ``registry.register_lowering``)."""

from __future__ import annotations

from . import argreduce, cumsum, elementwise, indexing, matmul, movement, sort, words64  # noqa: F401 (each registers itself)
