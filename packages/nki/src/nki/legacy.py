"""What only the legacy ``neuronxcc.nki`` namespace has: ``jit`` honouring ``platform_target=``
(NKI 0.3 made it an error; legacy kernels still pass it), ``trace`` (its other name), ``profile``
and ``tensor`` (the tensor type)."""

from __future__ import annotations

import warnings

from neuron_sim import get_architecture

from .benchmarking import profile  # noqa: F401 - re-exported (see __all__)
from .kernel import make_kernel
from .tensor import NkiTensor


def jit(func=None, mode: str = "auto", platform_target: str | None = None, **options):
    """Legacy ``neuronxcc.nki.jit``: ``mode`` is accepted and ignored (every kernel runs on the
    simulator); ``platform_target`` selects the NeuronCore generation the kernel is compiled,
    checked and timed for, with a DeprecationWarning pointing at NEURON_PLATFORM_TARGET_OVERRIDE."""
    if platform_target is not None:
        get_architecture(platform_target)  # an unknown name fails here, at the decorator
        warnings.warn(
            f"nki.jit(platform_target={platform_target!r}) is deprecated since NKI 0.3 (set "
            "NEURON_PLATFORM_TARGET_OVERRIDE instead); honoured for this kernel", DeprecationWarning, stacklevel=2)
        options["platform_target"] = platform_target
    return make_kernel(func, {"mode": mode, **options})


trace = jit
tensor = NkiTensor  # the legacy name of the tensor type (``def kernel(x: nki.tensor)``)

__all__ = ["jit", "trace", "tensor", "profile"]
