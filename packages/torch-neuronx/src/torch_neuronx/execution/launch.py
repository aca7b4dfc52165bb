"""Launching NEFFs and submitting host work on a stream: the only caller of the runtime's
``Queue.launch`` and ``Queue.submit`` in torch-neuronx.

A launch binds each named tensor of the program to device memory zero-copy - ``(memory, nbytes)``
with the memory a tensor, an untyped storage or a device address, from its first byte - queues
the NEFF on the stream's runtime queue and returns the ``Submission`` (launch id, simulated start
and end). Host work (CPU-fallback kernels, copies) runs in stream order with a modelled device
time. Both publish the op's record (``neuron_sim.trace.OpRecord``: name, launch id, framework
path, stream, host and simulated times) with ``Queue.publish_op`` on the submitting thread, when a
trace session listens (``neuron_sim.trace.TraceSession``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping

import torch
from neuron_sim.builder import caller_location
from neuron_sim.runtime import Queue, Runtime, Submission

from ..device import state
from .host import written_span

Buffer = tuple  # (torch.Tensor | torch.UntypedStorage | int address, nbytes)

# Frames of these packages are the framework, not the user's code that issued an op.
_FRAMEWORK_PACKAGES = ("torch", "torch_neuronx", "functorch", "neuronxcc", "nki", "neuron_explorer")


def user_call_site() -> str | None:
    """``file:line`` of the innermost frame of the user's code (outside torch and this SDK)."""
    return caller_location(_FRAMEWORK_PACKAGES)


def user_stacklevel() -> int:
    """The ``stacklevel`` that makes a ``warnings.warn`` in the caller of this function name the
    innermost frame of the user's code (or a model file's: anything outside torch, neuron_sim and
    this SDK) - the line that issued the op, not our dispatcher's. Without such a frame (an op of
    the autograd engine's device thread) the outermost frame."""
    frame, level = sys._getframe(1), 1  # our caller, which calls warnings.warn: level 1
    while frame is not None:
        module = frame.f_globals.get("__name__") or ""
        if not frame.f_code.co_filename.startswith("<frozen") and not any(
                module == p or module.startswith(p + ".") for p in ("neuron_sim", *_FRAMEWORK_PACKAGES)):
            return level
        if frame.f_back is None:
            return level
        frame, level = frame.f_back, level + 1
    return level


def _stream_id(index: int, stream) -> int:
    if stream is None:
        return state.shim().current_stream_id(index)
    return stream if type(stream) is int else stream.stream_id


def runtime() -> Runtime:
    """The neuron-sim runtime behind the neuron devices (its devices, HBMs, trace sink)."""
    return state.bridge().runtime


def queue(device: torch.device | int, stream: torch.Stream | int | None = None) -> Queue:
    """The runtime queue of ``stream`` (a torch stream or its id; default: the calling thread's
    current stream of ``device``). Work the layers above deferred on it is launched first."""
    index = device if type(device) is int else device.index
    return state.bridge().queue(index, _stream_id(index, stream))


def launch_neff(neff, buffers: Mapping[str, Buffer], *, device: torch.device | int, name: str, context: str,
                framework: str, stream: torch.Stream | int | None = None, executor: str | None = None,
                not_before_ns: float = 0.0, errors=None) -> Submission:
    """Queue ``neff`` (a Neff, a Program, or one Program per physical core of an LNC=2 device) on
    the stream with ``buffers`` bound by tensor name. ``executor`` picks the executor for this
    launch (default: ``NEURON_SIM_MODE``); ``not_before_ns`` holds its start until that simulated
    time; ``errors`` maps the error the launch may raise to the one the op reports
    (``Queue.launch``; ``ops.index_errors``: CPU's error for an out-of-range index)."""
    # Every eager op comes through here: no helper calls on the way (each ~0.1 us of a ~40 us op).
    bridge = state.bridge()
    index = device if type(device) is int else device.index
    stream_id = _stream_id(index, stream)
    q = bridge.queue(index, stream_id)
    started = time.perf_counter_ns() if q.tracing else 0
    numpy_bytes = bridge.numpy_bytes
    bound = {}
    for n, (memory, nbytes) in buffers.items():
        bound[n] = numpy_bytes(memory if type(memory) is int else memory.data_ptr(), nbytes)
    # An eager op's program is cached and shared by every line that calls the op, so its
    # instructions carry the compiler's own lines; a profile gets the user's line from the launch
    # (only while one runs: the stack walk costs a few us).
    call_site = user_call_site() if started and framework == "eager" else None
    submission = q.launch(neff, bound, name=name, context=context, executor=executor, not_before_ns=not_before_ns,
                          errors=errors, call_site=call_site)
    if started:
        q.publish_op(name, submission, host_start_ns=started, context=context, framework=framework, stream_id=stream_id)
    return submission


def submit_host(fn: Callable[[], object] | None, *, device: torch.device | int, device_time_ns: float, name: str, kind: str,
                context: str, framework: str, stream: torch.Stream | int | None = None, reads=(), writes=(),
                not_before_ns: float = 0.0) -> Submission:
    """Run ``fn()`` in order on the stream, taking ``device_time_ns`` of simulated time. ``fn`` None:
    the work already ran on the host (a synchronous fallback op, a blocking read) and only takes
    its place on the device timeline. ``reads`` / ``writes``: the device memory ``fn`` reads and
    writes (``device_span`` of tensors): it is skipped if it would read what failed work left
    unwritten, and what it writes is then invalid too (a later host read raises the original error).
    ``not_before_ns``: it starts no earlier than this simulated time (a collective's latest rank)."""
    index = device if type(device) is int else device.index
    stream_id = _stream_id(index, stream)
    q = state.bridge().queue(index, stream_id)
    started = time.perf_counter_ns() if q.tracing else 0
    submission = q.submit(_no_host_work if fn is None else _host_task(fn), device_time_ns=device_time_ns, name=name, kind=kind,
                          context=context, reads=reads, writes=writes, not_before_ns=not_before_ns)
    if started:
        q.publish_op(name, submission, host_start_ns=started, context=context, framework=framework, stream_id=stream_id)
    return submission


def mark_overwritten(t: torch.Tensor, *, name: str, framework: str) -> None:
    """In ``t``'s stream order, before the op that overwrites every element of ``t`` without
    reading them (``fill_``, ``zero_``): ``t`` is valid from there, even where failed work had
    left it invalid - the op's launch binds ``t`` as an input (for its shape), which would
    otherwise be skipped with the old error. Only needed while some memory is invalid."""
    submit_host(None, device=t.device, device_time_ns=0.0, name=name, kind="host",
                context=f"{name} overwrites {list(t.shape)} on {t.device}", framework=framework, writes=(written_span(t),))


def mark_unwritten(writes, error: BaseException, *, device: torch.device | int, name: str, context: str,
                   stream: torch.Stream | int | None = None) -> None:
    """In stream order: work that should have written ``writes`` (device spans: ``device_span``,
    ``Bridge.numpy_bytes``) raised ``error`` at the call, before it was queued (a fused run whose
    compile failed). Those bytes are then invalid as after a failed launch: later work reading
    them is skipped with ``error``, host reads raise it; the stream's next synchronization does
    not raise it again (the caller already had it)."""
    index = device if type(device) is int else device.index
    queue(index, stream).mark_unwritten(writes, error, name=name, context=context)


def _no_host_work() -> None:
    pass


def _host_task(fn):
    """``fn`` as a queue task. It runs on the queue's worker thread (or a synchronizing caller),
    outside whatever mode the op was issued in: host views made under ``torch.inference_mode()``
    are inference tensors, and writing them there raised "Inplace update to inference tensor
    outside InferenceMode". Inference mode allows writes to both kinds of tensor (and the CPU
    kernels must not record autograd)."""

    def task():
        with torch.inference_mode():
            fn()

    return task
