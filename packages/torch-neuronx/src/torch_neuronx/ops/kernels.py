"""Explicit PrivateUse1 kernels: copies, resize, metadata-only views, and the few ops core
PyTorch routes to backend-specific names. Everything else reaches the boxed kernel
(``compiled.dispatch``: compiled on the device, or CPU fallback)."""

from __future__ import annotations

import torch

from .. import _state
from ..compiled import adaptive, dispatch
from . import costs, fallback, tracking
from .host import host_copy, host_snapshot, host_view, is_neuron, worker_task

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def _queue_of(t: torch.Tensor):
    return _state.current_queue(t.device.index)


def _dma_bytes_per_ns() -> float:
    arch = _state.bridge().runtime.devices[0].arch
    return arch.dma.peak_bytes_per_ns


def _math_view(view: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The host view with ``t``'s lazy conjugate / negation bits, so the CPU copy applies them."""
    if t.is_conj():
        view = view.conj()
    if t.is_neg():
        view = view._neg_view()
    return view


def copy_from(self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``dst.copy_(self)`` when either side is a neuron tensor, ordered on the current streams."""
    tracking.record("aten::copy_", fallback=False)
    nbytes = self.numel() * self.element_size()
    if is_neuron(dst) and not is_neuron(self):  # host -> device
        # Snapshot the source unless it is pinned and the copy non-blocking (then the caller must
        # keep it unchanged until the stream reaches the copy, as with CUDA).
        upload(dst, self if non_blocking and self.is_pinned() else host_snapshot(self))
        return dst
    if is_neuron(self) and not is_neuron(dst):  # device -> host
        source = _math_view(host_view(self), self)
        queue = _queue_of(self)
        if non_blocking:
            queue.submit(worker_task(lambda: host_copy(dst, source)), device_time_ns=costs.host_copy_ns(nbytes), name="copy_d2h",
                         kind="copy", context=f"copy {list(self.shape)} {self.device} -> host")
        else:
            host_copy(dst, _read_now(self, f"copy {list(self.shape)} {self.device} -> host"))
        return dst
    # device -> device
    source = _math_view(host_view(self), self)
    target = _math_view(host_view(dst), dst)
    if self.device != dst.device:  # another core's memory: wait for its producer, then copy
        _queue_of(self).synchronize()
        source = host_snapshot(source)
    _queue_of(dst).submit(worker_task(lambda: host_copy(target, source)), device_time_ns=costs.device_copy_ns(nbytes, _dma_bytes_per_ns()),
                          name="copy_d2d", kind="copy", context=f"copy {list(self.shape)} {self.device} -> {dst.device}")
    return dst


def upload(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy host tensor ``src`` (which nothing writes until the copy ran) into device tensor
    ``dst``, ordered on ``dst``'s stream; under adaptive eager, just before its pending run."""
    if adaptive.enabled() and not (dst.is_conj() or dst.is_neg()) and adaptive.defer_upload(dst, src):
        return
    submit_upload(_queue_of(dst), dst, src)


def submit_upload(queue, dst: torch.Tensor, src: torch.Tensor) -> None:
    """Queue the copy of host tensor ``src`` into device tensor ``dst`` over the host link."""
    target = _math_view(host_view(dst), dst)
    queue.submit(worker_task(lambda: host_copy(target, src)), device_time_ns=costs.host_copy_ns(src.numel() * src.element_size()),
                 name="copy_h2d", kind="copy", context=f"copy {list(src.shape)} host -> {dst.device}")


def local_scalar_dense(self: torch.Tensor):
    """``.item()``: wait for the stream, then read the element over the host link - a copy, as
    ``.cpu()`` is, not a CPU kernel."""
    tracking.record("aten::_local_scalar_dense", fallback=False)
    return _read_now(self, f"item() of {list(self.shape)} {self.device}").item()


def _read_now(t: torch.Tensor, context: str) -> torch.Tensor:
    """A blocking read of ``t``: its copy to the host is queued (on the device timeline) and
    waited for with everything before it; returns the host view of its data."""
    queue = _queue_of(t)
    queue.submit(lambda: None, device_time_ns=costs.host_copy_ns(t.numel() * t.element_size()), name="copy_d2h",
                 kind="copy", context=context)
    queue.synchronize()
    return _math_view(host_view(t), t)


def copy_from_and_resize(self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    dst.resize_(self.shape)
    return copy_from(self, dst)


def resize_(self: torch.Tensor, size, memory_format=None):
    """Grow or shrink a tensor's metadata; a larger storage is reallocated with the data copied
    (after the stream's pending writes to it)."""
    needed = (self.storage_offset() + _span(size)) * self.element_size()
    if needed > self.untyped_storage().nbytes() and self.untyped_storage().nbytes() > 0:
        _queue_of(self).synchronize()
    # The CPU kernel grows the storage through the allocator, which allocates on the *current*
    # device: make that the tensor's device, or an ``out=`` tensor on neuron:1 (e.g. arange's)
    # would get neuron:0 memory.
    shim = _state.shim()
    previous = shim.current_device()
    shim.set_device(self.device.index)
    try:
        return torch.ops.aten.resize_.default.redispatch(_CPU_KEYS, self, size, memory_format=memory_format)
    finally:
        shim.set_device(previous)


def _span(size) -> int:
    n = 1
    for s in size:
        n *= s
    return n


def has_compatible_shallow_copy_type(self, other) -> bool:
    # Lets ``cpu_param.data = neuron_tensor`` work, so Module.to("neuron") keeps Parameter
    # identity (an optimizer built before .to() still holds the live parameters).
    ok = ("cpu", "neuron")
    return self.layout == other.layout == torch.strided and self.device.type in ok and other.device.type in ok


def convolution_overrideable(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    return fallback.cpu_fallback(torch.ops.aten.convolution.default, input, weight, bias, stride, padding, dilation,
                                 transposed, output_padding, groups)


def convolution_backward_overrideable(grad_output, input, weight, stride, padding, dilation, transposed, output_padding,
                                      groups, output_mask):
    # convolution_backward needs the bias shape whenever the bias gradient is asked for (its
    # kernel allocates grad_bias from it; None failed every conv with a bias): one value per
    # output channel.
    bias_sizes = [weight.shape[1] * groups] if transposed else [weight.shape[0]]
    return fallback.cpu_fallback(torch.ops.aten.convolution_backward.default, grad_output, input, weight, bias_sizes,
                                 stride, padding, dilation, transposed, output_padding, groups, output_mask)


def metadata_only(op):
    """View ops whose CPU kernels only compute sizes and strides: valid for any device."""

    def kernel(*args, **kwargs):
        return op.redispatch(_CPU_KEYS, *args, **kwargs)

    return kernel


METADATA_OPS = [
    "as_strided", "view", "_reshape_alias", "set_.source_Storage", "set_.source_Storage_storage_offset",
    "set_.source_Tensor", "set_", "unfold",
]


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


# nn.LSTM / nn.GRU on any non-CPU device call the fused cell kernels CUDA provides; CPU has none,
# so on neuron they failed ("Could not run 'aten::_thnn_fused_lstm_cell' ... 'CPU' backend").
# These compose them from ordinary ops (registered for Autograd too, so backward follows the
# composition). The gate sums are ordered as the fused kernels do, not as CPU's unfused cell, so
# RNN results match CPU to rounding, not bit for bit.
def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    gates = input_gates + hidden_gates
    if input_bias is not None:
        gates = gates + input_bias + hidden_bias
    i, f, g, o = gates.chunk(4, 1)
    cy = f.sigmoid() * cx + i.sigmoid() * g.tanh()
    hy = o.sigmoid() * cy.tanh()
    return hy, cy, gates


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    if input_bias is not None:
        input_gates = input_gates + input_bias
        hidden_gates = hidden_gates + hidden_bias
    ir, iz, in_ = input_gates.chunk(3, 1)
    hr, hz, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], dim=1)


def draw_dropout_mask(drawn: torch.Tensor, p: float, device: torch.device) -> torch.Tensor:
    """Fill host bool tensor ``drawn`` with the mask CPU's native_dropout draws - ``bernoulli_(1 - p)``
    - from ``device``'s generator, and return it. Eager (``native_dropout``) and compiled graphs
    (``dynamo.runtime``) both draw here, so they see the same masks."""
    with fallback.device_generator(device) as generator:
        drawn.bernoulli_(1.0 - p, generator=generator)
    return drawn


def native_dropout(input, p, train=None):
    """Dropout as CPU's kernel computes it (``native_dropout_cpu``): a bool mask drawn by
    ``bernoulli_`` from the device's generator - on the host, so the stream is CPU's for the same
    seed - and uploaded, then the masking and scaling compiled on the device. (Run whole through
    the fallback, the input and output would cross the host link too.)"""
    if input.numel() == 0:
        return input, torch.empty_like(input)
    if train is None or train:
        p1m = 1.0 - p
        scale = 0.0 if p1m == 0 else 1.0 / p1m
        drawn = draw_dropout_mask(torch.empty_like(input, dtype=torch.bool, device="cpu"), p, input.device)  # CPU's layout
        mask = torch.empty_like(input, dtype=torch.bool)
        upload(mask, drawn)  # ``drawn`` is ours: no snapshot of it, as copy_ would make
        return input.mul(mask).mul_(scale), mask
    return input.clone(), torch.ones_like(input, dtype=torch.bool)


def register(lib: torch.library.Library) -> None:
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
        ("convolution_overrideable", convolution_overrideable),
        ("convolution_backward_overrideable", convolution_backward_overrideable),
        ("native_dropout", native_dropout),
        ("_local_scalar_dense", local_scalar_dense),
    ]:
        lib.impl(name, fn, "PrivateUse1")
    for name in WHOLE_OP_KERNELS:
        base, _, overload = name.partition(".")
        lib.impl(name, whole_op_kernel(getattr(getattr(torch.ops.aten, base), overload or "default")), "PrivateUse1")
    for name in METADATA_OPS:
        base, _, overload = name.partition(".")
        op = getattr(getattr(torch.ops.aten, base), overload or "default")
        lib.impl(name, metadata_only(op), "PrivateUse1")
