"""Copies between the host and device memory, and between devices, ordered on a stream.

Each copy is host work on the stream (``execution.submit_host``) with the device time of the host
link or the core's DMA engines (``costs``): it runs when the stream reaches it, so it sees every
write queued before it. A destination or source with a lazy conjugate / negation bit is copied
through a host view carrying the bit, so the CPU copy applies it.
"""

from __future__ import annotations

import torch

from ..device import state
from ..execution import check_readable, device_span, host_view, queue, submit_host, written_span
from . import costs
from .host import host_copy, host_snapshot


def math_view(view: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
    """The host view with ``t``'s lazy conjugate / negation bits, so the CPU copy applies them."""
    if t.is_conj():
        view = view.conj()
    if t.is_neg():
        view = view._neg_view()
    return view


def submit_upload(dst: torch.Tensor, src: torch.Tensor, stream: int | None = None) -> None:
    """Queue the copy of host tensor ``src`` (which nothing writes until the copy ran) into device
    tensor ``dst`` over the host link, on ``stream`` (default: ``dst``'s device's current stream)."""
    target = math_view(host_view(dst), dst)
    submit_host(lambda: host_copy(target, src), device=dst.device, device_time_ns=costs.host_copy_ns(src.numel() * src.element_size()),
                name="copy_h2d", kind="copy", context=f"copy {list(src.shape)} host -> {dst.device}", framework="copy",
                stream=stream, writes=(written_span(dst),))


def submit_download(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Queue the copy of device tensor ``src`` into host tensor ``dst`` (a non-blocking ``.cpu()``:
    the caller synchronizes before reading ``dst``)."""
    source = math_view(host_view(src), src)
    submit_host(lambda: host_copy(dst, source), device=src.device, device_time_ns=costs.host_copy_ns(src.numel() * src.element_size()),
                name="copy_d2h", kind="copy", context=f"copy {list(src.shape)} {src.device} -> host", framework="copy",
                reads=(device_span(src),))


def submit_device_copy(dst: torch.Tensor, src: torch.Tensor) -> None:
    """Queue ``dst.copy_(src)`` between device tensors on ``dst``'s stream. From another core's
    memory, ``src``'s stream is waited for first and its bytes snapshotted."""
    source = math_view(host_view(src), src)
    target = math_view(host_view(dst), dst)
    reads = (device_span(src),)
    if src.device != dst.device:
        queue(src.device).synchronize()
        check_readable(src)
        source = host_snapshot(source)
        reads = ()  # read now, on the host
    nbytes = src.numel() * src.element_size()
    dma_bytes_per_ns = state.bridge().runtime.device(dst.device.index).arch.dma.peak_bytes_per_ns
    submit_host(lambda: host_copy(target, source), device=dst.device, device_time_ns=costs.device_copy_ns(nbytes, dma_bytes_per_ns),
                name="copy_d2d", kind="copy", context=f"copy {list(src.shape)} {src.device} -> {dst.device}", framework="copy",
                reads=reads, writes=(written_span(dst),))


def read_now(t: torch.Tensor, context: str) -> torch.Tensor:
    """A blocking read of device tensor ``t``: its copy to the host is queued (on the device
    timeline) and waited for with everything before it; returns the host view of its data."""
    submit_host(None, device=t.device, device_time_ns=costs.host_copy_ns(t.numel() * t.element_size()), name="copy_d2h",
                kind="copy", context=context, framework="copy")
    queue(t.device).synchronize()
    check_readable(t)  # the original error, not the garbage a failed or skipped write left
    return math_view(host_view(t), t)
