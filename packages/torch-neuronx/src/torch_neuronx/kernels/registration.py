"""Installing the op kernels of the ``neuron`` device (once per process, after the device is registered)."""

from __future__ import annotations

import threading

import torch

from ..compiled import dispatch
from ..device.kernel_library import KernelLibrary
from .batch_norm import native_batch_norm
from .convolution import KERNELS as CONVOLUTION_KERNELS
from .copies import copy_from, copy_from_and_resize, local_scalar_dense, resize_
from .histc import histc
from .multi_tensor import fused_optimizers_without_meta, meta_in_place_step, multi_tensor_kernel, multi_tensor_ops
from .random import ops as random_ops
from .random.draws import KERNELS as RANDOM_KERNELS
from .rnn import fused_gru_cell, fused_lstm_cell
from .views import METADATA_OPS, has_compatible_shallow_copy_type, metadata_only
from .whole_ops import WHOLE_OP_KERNELS, whole_op_kernel

_lock = threading.Lock()
_LIBRARIES: list = []  # registrations live as long as these Library objects


def register() -> None:
    with _lock:
        if _LIBRARIES:
            return
        lib = KernelLibrary("aten", "IMPL")
        dispatch.register_functional_kernels(lib, skip=set(WHOLE_OP_KERNELS) | set(RANDOM_KERNELS))
        _register_explicit(lib)
        fb = KernelLibrary("_", "IMPL")
        fb.fallback(dispatch.neuron_kernel, "PrivateUse1")
        _LIBRARIES.extend([lib, fb])


def _register_explicit(lib: torch.library.Library) -> None:
    # A source or destination with a lazy conj/neg bit: handled here (the host views carry the
    # bit). Left to the Conjugate/Negative math fallback, _copy_from materialized its input with
    # clone(), whose copy_ called _copy_from again: unbounded C++ recursion, a segfault
    # (resolve_conj() of a neuron tensor, torch.fft.hfft...).
    for key in ("Conjugate", "Negative"):
        lib.impl("_copy_from", copy_from, key)
        lib.impl("_copy_from_and_resize", copy_from_and_resize, key)
    for key in ("PrivateUse1", "AutogradPrivateUse1"):
        lib.impl("_thnn_fused_lstm_cell", fused_lstm_cell, key)
        lib.impl("_thnn_fused_gru_cell", fused_gru_cell, key)
    for name, fn in [
        ("_copy_from", copy_from),
        ("_copy_from_and_resize", copy_from_and_resize),
        ("resize_", resize_),
        ("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type),
        *CONVOLUTION_KERNELS.items(),
        ("native_batch_norm", native_batch_norm),
        # same arguments; its running statistics are written (in training) though its out=-like
        # schema reads as if they were results only (what _native_batch_norm_legit_no_training calls)
        ("_native_batch_norm_legit", native_batch_norm),
        ("_local_scalar_dense", local_scalar_dense),
        ("histc", histc),
    ]:
        lib.impl(name, fn, "PrivateUse1")
    random_ops.define()
    for name, fn in RANDOM_KERNELS.items():
        lib.impl(name, fn, "PrivateUse1")
    for name in WHOLE_OP_KERNELS:
        base, _, overload = name.partition(".")
        lib.impl(name, whole_op_kernel(getattr(getattr(torch.ops.aten, base), overload or "default")), "PrivateUse1")
    for op in multi_tensor_ops():
        lib.impl(op, multi_tensor_kernel(op), "PrivateUse1")
    for op in fused_optimizers_without_meta():
        lib.impl(op, meta_in_place_step, "Meta")
    for name in METADATA_OPS:
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        lib.impl(name, metadata_only(op), "PrivateUse1")
