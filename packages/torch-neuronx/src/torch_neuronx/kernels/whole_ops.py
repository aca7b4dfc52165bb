"""Ops registered whole, so they reach the boxed kernel instead of a decomposition."""

from __future__ import annotations

from ..compiled import dispatch

# Ops with a dedicated CPU kernel whose other backends get a CompositeExplicitAutograd
# decomposition. The boxed kernel never sees them (the composite kernel is registered for
# PrivateUse1 too), so without these registrations layer_norm and group_norm ran as many small
# decomposed ops (var_mean, rsqrt...) instead of one compiled op (or one CPU kernel in fallback).
# Their autograd formulas are unaffected (Autograd key).
# (The list is every aten op with CPU and CompositeExplicitAutograd kernels in torch 2.13.)
WHOLE_OP_KERNELS = [
    "native_layer_norm", "native_group_norm", "addr", "addr.out", "all.dims", "all.dims_out", "any.dims",
    "any.dims_out", "_stack", "_stack.out", "linalg__powsum",
    # Composites that call their out= overload with an empty result: the out tensor got a
    # contiguous resize, so abs() of a transposed tensor came back contiguous on neuron while
    # CPU's TensorIterator keeps the input's layout. Their functional meta kernels have CPU's strides.
    "abs", "logical_and", "logical_or", "logical_xor", "logical_not", "nan_to_num", "mvlgamma", "frexp.Tensor",
]


def whole_op_kernel(op):
    def kernel(*args, **kwargs):
        return dispatch.neuron_kernel(op, *args, **kwargs)

    return kernel
