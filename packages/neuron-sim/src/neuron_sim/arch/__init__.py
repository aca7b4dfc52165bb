"""Per-generation NeuronCore descriptions, selected by ``NEURON_PLATFORM_TARGET_OVERRIDE``."""

from __future__ import annotations

import os

from ..errors import ConfigurationError
from .spec import Architecture, DmaSpec, EngineSpec, TensorEngineSpec
from .trn2 import TRN2
from .trn3 import TRN3

# NKI accepts both the instance family and the NeuronCore generation name.
_TARGETS: dict[str, Architecture] = {"trn2": TRN2, "gen3": TRN2, "trn3": TRN3, "gen4": TRN3}

PLATFORM_ENV = "NEURON_PLATFORM_TARGET_OVERRIDE"


def get_architecture(target: str | None = None) -> Architecture:
    """The architecture named by ``target``, else by the environment, else Trainium2."""
    name = target if target is not None else os.environ.get(PLATFORM_ENV, "trn2")
    key = name.strip().lower()
    if key not in _TARGETS:
        raise ConfigurationError(
            f"unknown platform target {name!r} (from {'argument' if target is not None else PLATFORM_ENV}); "
            f"choose one of {sorted(_TARGETS)}"
        )
    return _TARGETS[key]


__all__ = ["Architecture", "DmaSpec", "EngineSpec", "TensorEngineSpec", "TRN2", "TRN3", "get_architecture", "PLATFORM_ENV"]
