"""Running a kernel called with numpy arrays: a launch on a runtime device, waited for.

The kernel runs as any NEFF does - on a queue of a neuron-sim runtime device (device 0 of the
process runtime; its own queue ``nki``, so it never waits for, nor reports, another caller's
work), on the exact executor, with its HBM tensors in the device's HBM: arguments are copied in,
outputs and scratch start poisoned (unwritten data reads as NaN), and a kernel whose tensors do not
fit raises the runtime's ``OutOfMemoryError`` at the call, before anything runs. Launch records
reach trace subscribers like every other launch; a failure is the runtime's ``ExecutionError``
(naming the kernel, its launch id and the original error). The call is synchronous: arguments the
kernel wrote are copied back into the caller's arrays and returned tensors come back as new arrays.
An LNC=2 kernel (``kernel[2]``) is one launch of its two programs, timed as two cores at once.

A kernel is compiled for the target NEURON_PLATFORM_TARGET_OVERRIDE names at the call. When that
is not the process runtime's generation (the variable changed after the runtime started), the
kernel runs on device 0 of a runtime of its own generation, made once per generation: a trn3
kernel needs a trn3 core.

``NKI_UNINITIALIZED_READ`` says what a read of never-written on-chip memory does (``warn``: a
RuntimeWarning from the kernel line, ``error``, ``off``).
"""

from __future__ import annotations

import os
import re
import threading
import warnings
import weakref

import numpy as np
from neuron_sim import Architecture, dtypes
from neuron_sim.runtime import Runtime, RuntimeConfig, get_runtime

from .errors import NkiError
from .typing import TensorType

UNINITIALIZED_ENV = "NKI_UNINITIALIZED_READ"
_POLICIES = {"warn": "warn", "error": "error", "off": None}
QUEUE_NAME = "nki"

_queues: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # device -> its nki queue
_lock = threading.Lock()
# process runtime -> {architecture name: runtime of that generation}: made anew after reset_runtime
_other_targets: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def uninitialized_policy() -> str | None:
    value = os.environ.get(UNINITIALIZED_ENV, "warn").strip().lower()
    if value not in _POLICIES:
        raise NkiError(f"{UNINITIALIZED_ENV}={value!r}: choose warn, error or off")
    return _POLICIES[value]


def nki_queue(arch: Architecture):
    """The queue numpy calls of kernels compiled for ``arch`` launch on: ``nki`` on device 0 of
    the process runtime, or of a runtime of ``arch``'s generation; made on first use."""
    runtime = get_runtime()
    if runtime.config.arch.name != arch.name:
        with _lock:
            others = _other_targets.setdefault(runtime, {})
            if arch.name not in others:
                others[arch.name] = Runtime(RuntimeConfig.from_env(arch=arch))
            runtime = others[arch.name]
    device = runtime.device(0)
    with _lock:
        queue = _queues.get(device)
        if queue is None:
            queue = _queues[device] = device.new_queue(QUEUE_NAME)
    return queue


class DeviceCall:
    """One numpy call's device side: the kernel's HBM tensors on the device (``with`` frees them),
    launched as often as asked (``nki.benchmark`` runs warm-up and timed iterations on one set)."""

    def __init__(self, kernel, compiled, args, kwargs):
        self.kernel = kernel
        self.compiled = compiled
        given = {**{name: args[i] for i, name in compiled.params.items()},
                 **{name: kwargs[key] for key, name in compiled.kw_params.items()}}
        # ``nt.tensor[shape, dtype]`` arguments only describe an input: the device holds zeros for it.
        self.placeholders = {name for name, value in given.items() if isinstance(value, TensorType)}
        self.given = {name: value for name, value in given.items() if name not in self.placeholders}
        self.given.update(compiled.constants)  # nl.shared_constant values, as the kernel built them in
        for name, value in self.given.items():
            expected = dtypes.to_numpy(compiled.tensors[name].dtype)
            if value.dtype != expected:
                raise NkiError(f"argument {name!r} has dtype {value.dtype}, the compiled kernel expects {expected}")
        self.queue = nki_queue(compiled.arch)
        self.blocks: dict = {}

    def __enter__(self) -> DeviceCall:
        device = self.queue.device
        try:
            for name, decl in self.compiled.tensors.items():
                self.blocks[name] = device.allocate(decl.nbytes, tag=f"{self.kernel.__name__}/{name}",
                                                    poison=name not in self.given and name not in self.placeholders)
                if name in self.placeholders:
                    self.blocks[name].array.fill(0)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc) -> None:
        for block in self.blocks.values():
            self.queue.device.free(block)
        self.blocks.clear()

    def launch(self):
        """Copy the arguments in, run the kernel, wait; returns the launch's Submission."""
        for name, value in self.given.items():
            self.blocks[name].view(value.dtype, value.shape)[...] = value
        programs = self.compiled.programs
        policy = uninitialized_policy()
        shapes = ", ".join(str(list(v.shape)) for v in self.given.values())
        submission = self.queue.launch(
            programs if len(programs) > 1 else programs[0], self.blocks, name=self.kernel.__name__,
            context=f"NKI kernel {self.kernel.__name__}({shapes})", executor="exact",
            executor_options={"uninitialized": policy, "issue_warnings": False} if policy else None,
        )
        self.queue.synchronize()
        for report in submission.reports:
            for message in report.warnings:
                _reissue(message, self.kernel)
        tensors = self.compiled.tensors
        for prefix, name in self.compiled.prints:
            print(prefix, self.blocks[name].view(dtypes.to_numpy(tensors[name].dtype), tensors[name].shape))
        self.kernel.record(last_timing=list(submission.timings), last_device_time_ns=submission.device_time_ns)
        return submission

    def results(self):
        """Write the arguments the kernel wrote back into the caller's arrays; the returned
        tensors as new arrays, in the kernel's return structure."""
        tensors = self.compiled.tensors
        for name, value in self.given.items():
            if tensors[name].is_output:
                value[...] = self.blocks[name].view(value.dtype, value.shape)
        return self.compiled.structure(
            {name: self.blocks[name].view(dtypes.to_numpy(tensors[name].dtype), tensors[name].shape).copy()
             for name in self.compiled.returned_names})


def run(kernel, args, kwargs):
    """Compile (once per signature) and run ``kernel`` on numpy arrays; returns its results."""
    check_arguments(args, kwargs)
    with DeviceCall(kernel, kernel.compile(args, kwargs), args, kwargs) as call:
        call.launch()
        return call.results()


def check_arguments(args, kwargs) -> None:
    for value in list(args) + list(kwargs.values()):
        if isinstance(value, np.ndarray) and value.dtype == np.float64:
            raise NkiError("float64 arrays have no NeuronCore dtype; convert to float32 (or bfloat16) first")


_AT_LINE = re.compile(r" at (?P<path>[^()]+?):(?P<line>\d+)\)$")


def _reissue(message: str, kernel) -> None:
    """Issue a warning the run kept, from the kernel line it names (so filters, ``-W error`` and
    the once-per-line default see the user's file, not ours)."""
    match = _AT_LINE.search(message)
    globals_ = getattr(kernel.func, "__globals__", {})
    if match is None:
        warnings.warn(message, RuntimeWarning, stacklevel=3)
        return
    registry = globals_.setdefault("__warningregistry__", {})
    warnings.warn_explicit(message, RuntimeWarning, match["path"], int(match["line"]),
                           module=globals_.get("__name__"), registry=registry)
