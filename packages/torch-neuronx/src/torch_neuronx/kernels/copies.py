"""Copies to, from and between neuron tensors (``_copy_from``), ``.item()``, and ``resize_``.

``dst.copy_(src)`` with a neuron side is ordered on the current streams (``ops.transfers``): an
upload snapshots its source unless it is pinned and the copy non-blocking (then the caller keeps
it unchanged until the stream reaches the copy, as with CUDA); a blocking download waits for the
stream. Under adaptive eager an upload into memory the pending run has not touched joins the run
instead of launching it.
"""

from __future__ import annotations

import torch

from ..compiled import adaptive
from ..device import state
from ..execution import queue
from ..ops import stand_ins, tracking
from ..ops.host import host_copy, host_snapshot, is_neuron
from ..ops.transfers import read_now, submit_device_copy, submit_download, submit_upload

_CPU_KEYS = torch._C.DispatchKeySet(torch._C.DispatchKey.CPU)


def copy_from(self: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """``dst.copy_(self)`` when either side is a neuron tensor, ordered on the current streams."""
    tracking.record("aten::copy_", fallback=False)
    if self.shape != dst.shape:  # CPU's shape check, at the call (meta tensors raise its very error)
        torch.empty(dst.shape, device="meta").copy_(torch.empty(self.shape, device="meta"))
    if is_neuron(dst) and not is_neuron(self):  # host -> device
        upload(dst, self if non_blocking and self.is_pinned() else host_snapshot(self))
    elif is_neuron(self) and not is_neuron(dst):  # device -> host
        if non_blocking:
            submit_download(dst, self)
        else:
            host_copy(dst, read_now(self, f"copy {list(self.shape)} {self.device} -> host"))
    else:
        if _may_overlap(dst, self):  # CPU's TensorIterator refuses partial overlap: its error, at the call
            stand_ins.probe(torch.ops.aten.copy_.default, (dst, self), {})
        submit_device_copy(dst, self)
    return dst


def _may_overlap(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """A device copy whose target shares memory with itself or with its source
    (``v.unsqueeze(0)[()] = v``): CPU's kernel decides (over stand-ins that share memory so)."""
    if dst.numel() == 0:
        return False
    return (dst.untyped_storage().data_ptr() == src.untyped_storage().data_ptr()
            or torch._debug_has_internal_overlap(dst) == 1)


def upload(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Copy host tensor ``src`` (which nothing writes until the copy ran) into device tensor
    ``dst``, ordered on ``dst``'s stream; under adaptive eager, just before its pending run."""
    if adaptive.enabled() and not (dst.is_conj() or dst.is_neg()) and adaptive.defer_upload(dst, src):
        return
    submit_upload(dst, src)


def copy_from_and_resize(self: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    dst.resize_(self.shape)
    return copy_from(self, dst)


def local_scalar_dense(self: torch.Tensor):
    """``.item()``: wait for the stream, then read the element over the host link - a copy, as
    ``.cpu()`` is, not a CPU kernel."""
    tracking.record("aten::_local_scalar_dense", fallback=False)
    return read_now(self, f"item() of {list(self.shape)} {self.device}").item()


def resize_(self: torch.Tensor, size, memory_format=None):
    """Grow or shrink a tensor's metadata; a larger storage is reallocated with the data copied
    (after the stream's pending writes to it)."""
    needed = (self.storage_offset() + _numel(size)) * self.element_size()
    if needed > self.untyped_storage().nbytes() and self.untyped_storage().nbytes() > 0:
        queue(self.device).synchronize()
    # The CPU kernel grows the storage through the allocator, which allocates on the *current*
    # device: make that the tensor's device, or an ``out=`` tensor on neuron:1 (e.g. arange's)
    # would get neuron:0 memory.
    shim = state.shim()
    previous = shim.current_device()
    shim.set_device(self.device.index)
    try:
        return torch.ops.aten.resize_.default.redispatch(_CPU_KEYS, self, size, memory_format=memory_format)
    finally:
        shim.set_device(previous)


def _numel(size) -> int:
    n = 1
    for s in size:
        n *= s
    return n
