"""Streams and events of the neuron device.

``torch_neuronx.Stream`` / ``Event`` are ``torch.Stream`` / ``torch.Event`` on ``neuron``: the
device guard maps each stream to a queue of the simulator runtime (work on one stream runs in
order; across streams only events order it) and each event to a runtime event, whose
``elapsed_time`` is simulated device time in milliseconds.
"""

from __future__ import annotations

from contextlib import contextmanager

import torch

from . import state


def _device(device=None) -> torch.device:
    if device is None:
        return torch.device("neuron", state.shim().current_device())
    if isinstance(device, int):
        return torch.device("neuron", device)
    device = torch.device(device)
    if device.type != "neuron":
        raise ValueError(f"expected a neuron device, got {device}")
    return device if device.index is not None else torch.device("neuron", state.shim().current_device())


class Stream(torch.Stream):
    """A new stream (queue) on a neuron device (default: the current one). Its runtime queue is
    released once the stream is collected (after the work queued on it), as that of a plain
    ``torch.Stream(device="neuron")`` is; using its id again (a stream reconstructed from it, or
    one still current) gets a new queue that starts after that work."""

    def __new__(cls, device=None, priority: int = 0, **kwargs):
        if kwargs:  # reconstruction from (stream_id, device_index, device_type)
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=_device(device), priority=priority)


class Event(torch.Event):
    """An event on a neuron stream; ``elapsed_time`` is simulated device time (ms)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False, device=None):
        return super().__new__(cls, device=_device(device), enable_timing=enable_timing, blocking=blocking,
                               interprocess=interprocess)

    def elapsed_time(self, end_event: torch.Event) -> float:
        # torch.Event.elapsed_time insists on the exact torch.Event type for ``end_event``; both
        # are ids of simulator events, so ask the bridge directly (it waits for ``end_event``).
        if not isinstance(end_event, torch.Event) or end_event.device.type != "neuron":
            raise TypeError(f"expected a neuron torch.Event, got {end_event!r}")
        if not self.event_id or not end_event.event_id:
            raise RuntimeError("both events must be recorded before calling elapsed_time()")
        return state.bridge().elapsed_time(self.event_id, end_event.event_id)


def current_stream(device=None) -> torch.Stream:
    return torch.accelerator.current_stream(_device(device))


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def default_stream(device=None) -> torch.Stream:
    d = _device(device)
    return torch.Stream(stream_id=0, device_index=d.index, device_type=_PRIVATEUSE1)


def set_stream(stream: torch.Stream) -> None:
    torch.accelerator.set_stream(stream)


@contextmanager
def stream(s: torch.Stream | None):
    """Make ``s`` the current stream of its device inside the block."""
    if s is None:
        yield
        return
    previous = current_stream(s.device)
    set_stream(s)
    try:
        yield s
    finally:
        set_stream(previous)
