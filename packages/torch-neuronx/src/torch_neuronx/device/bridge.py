"""The bridge between the C++ shim and neuron_sim's runtime.

The shim's allocator, stream and event hooks call these methods (with the GIL held). Device memory
is neuron_sim HBM: real host memory, accounted against each NeuronCore's capacity. Streams are
runtime queues (stream 0 is a device's default queue) and events are runtime events, so
``Event.elapsed_time`` measures simulated device time.
"""

from __future__ import annotations

import itertools
import threading
import weakref

import numpy as np
import torch
from neuron_sim import OutOfMemoryError as SimOutOfMemoryError
from neuron_sim.runtime import Event as SimEvent
from neuron_sim.runtime import Runtime, get_runtime, reset_runtime

from . import hooks
from .errors import NeuronOutOfMemoryError


class Bridge:
    def __init__(self, runtime: Runtime):
        self.runtime = runtime
        self._lock = threading.Lock()
        self._blocks: dict[int, tuple[int, object]] = {}  # address -> (device, HbmAllocation)
        self._host: dict[int, torch.Tensor] = {}  # address -> uint8 CPU tensor over the block
        self._queues: dict[tuple[int, int], object] = {}  # (device, stream id) -> runtime Queue
        self._events: dict[int, SimEvent] = {}
        self._stream_ids = itertools.count(1)
        # Streams whose Python objects were collected: released at the next new stream (not in
        # the collector, which may run inside any code holding any lock).
        self._collected_streams: list[tuple[int, int]] = []
        # (device, stream id) of a released stream -> an event at the end of its old queue's
        # work, so a queue re-created for the id (the stream is still current somewhere, or was
        # reconstructed from its id) starts after it. Dropped once that work is done.
        self._released_streams: dict[tuple[int, int], object] = {}
        self._last_stream_id = 0
        self._event_ids = itertools.count(1)
        self.used = False  # set by the first allocation or queue use (what makes a fork "bad")

    def adopt_fresh_runtime(self) -> None:
        """In a forked child of a process that never used the device: forget the parent's
        (unused) runtime and start this process's own, as CUDA allows before its first call."""
        reset_runtime()  # in a child this only forgets the inherited runtime
        self.runtime = get_runtime()
        self._queues.clear()
        self._events.clear()
        self._collected_streams.clear()
        self._released_streams.clear()

    # --- memory ----------------------------------------------------------------------------
    def malloc(self, device: int, nbytes: int) -> int:
        self.used = True
        dev = self.runtime.device(device)
        try:
            block = dev.allocate(nbytes, tag="torch")
        except SimOutOfMemoryError as err:
            raise NeuronOutOfMemoryError(
                f"neuron:{device} out of memory: tried to allocate {nbytes} bytes; {err.free} bytes free of "
                f"{err.capacity} (simulated HBM). Free tensors (del + gc) or use a smaller batch."
            ) from None
        host = torch.from_numpy(block.array) if nbytes else torch.empty(0, dtype=torch.uint8)
        with self._lock:
            self._blocks[block.address] = (device, block)
            self._host[block.address] = host
        return block.address

    def reused(self, address: int) -> None:
        """The caching allocator gives the block at ``address`` to a new tensor: none of it is
        invalid any more (only called while some device memory is, see registration)."""
        with self._lock:
            device, block = self._blocks[address]
        self.runtime.device(device).hbm.invalid.forget(block.address)

    def free(self, address: int) -> None:
        with self._lock:
            device, block = self._blocks.pop(address)
            self._host.pop(address, None)
        self.runtime.device(device).free(block)

    def host_bytes(self, address: int, nbytes: int) -> torch.Tensor:
        """uint8 CPU tensor aliasing device bytes [address, address + nbytes) (zero-copy)."""
        with self._lock:
            entry = self._blocks.get(address)
            host = self._host.get(address)
        if entry is not None:
            return host[:nbytes] if nbytes != host.numel() else host
        for device in self.runtime.devices:  # an interior pointer: find its block
            try:
                block, offset = device.hbm.resolve(address, max(nbytes, 1))
            except Exception:  # noqa: BLE001 - not this device's memory
                continue
            with self._lock:
                host = self._host[block.address]
            return host[offset : offset + nbytes]
        raise RuntimeError(f"address {address:#x} is not neuron device memory")

    def numpy_bytes(self, address: int, nbytes: int) -> np.ndarray:
        """uint8 numpy view of device bytes [address, address + nbytes) (zero-copy)."""
        entry = self._blocks.get(address)  # the common case (a tensor at the start of its block) without the lock
        if entry is not None and nbytes <= entry[1].nbytes:
            return entry[1].array[:nbytes]
        if nbytes == 0:
            return np.empty(0, dtype=np.uint8)  # an empty tensor's memory may be no block at all
        return self.host_bytes(address, nbytes).numpy()

    # --- streams ---------------------------------------------------------------------------
    def queue(self, device: int, stream_id: int):
        """The runtime queue of a stream. Whoever asks is about to put work on it or wait for it,
        so work the layers above deferred on that stream (adaptive eager's ops) is launched first."""
        self.used = True
        for hook in hooks.before_queue_use:
            hook(device, stream_id)
        key = (device, stream_id)
        queue = self._queues.get(key)
        if queue is None:
            if stream_id == 0:
                queue = self._queues[key] = self.runtime.device(device).default_queue
            elif 0 < stream_id <= self._last_stream_id:  # a released stream, used again
                queue = self._recreate_stream_queue(key)
            else:
                raise RuntimeError(f"neuron:{device} has no stream with id {stream_id}")
        return queue

    def new_stream(self, device: int, priority: int) -> int:
        self._release_collected_streams()
        stream_id = self._last_stream_id = next(self._stream_ids)
        self._queues[(device, stream_id)] = self.runtime.device(device).new_queue(f"stream{stream_id}")
        return stream_id

    def stream_made(self, stream: torch.Stream) -> None:
        """``stream``, a torch.Stream object (or a subclass: torch_neuronx.Stream), made a new
        stream: its queue is released once the object is collected. Called by _C's wrapper of
        torch.Stream's constructor - the object holds only ids, so nothing else would tell."""
        weakref.finalize(stream, self.stream_collected, stream.device_index, stream.stream_id)

    def stream_collected(self, device: int, stream_id: int) -> None:
        """The Python object of a stream made by ``new_stream`` was collected: its queue is
        released (at the next ``new_stream``), so streams made and dropped in a loop do not pile
        up queues. Called from a finalizer: only records it."""
        self._collected_streams.append((device, stream_id))

    def _release_collected_streams(self) -> None:
        while self._collected_streams:
            key = self._collected_streams.pop()
            if key not in self._queues:
                continue
            queue = self.queue(*key)  # launches work the layers above deferred on it
            if not queue.query():  # work still queued: a re-created queue must start after it
                self._released_streams[key] = queue.record_event()  # (an idle one's marker would start a worker thread)
            del self._queues[key]
            queue.release()  # finishes its work, then leaves the device
        for key, event in list(self._released_streams.items()):
            if event.query():
                self._released_streams.pop(key, None)  # a re-created queue need not wait for anything

    def _recreate_stream_queue(self, key):
        """A queue for a released stream that is used again: it starts after the old queue's
        work, in host and simulated time."""
        device = self.runtime.device(key[0])
        queue = device.new_queue(f"stream{key[1]}", start_ns=device.sim_time_ns)
        event = self._released_streams.pop(key, None)
        if event is not None:
            queue.wait_event(event)
        self._queues[key] = queue
        return queue

    def query_stream(self, device: int, stream_id: int) -> bool:
        return self.queue(device, stream_id).query()

    def synchronize_stream(self, device: int, stream_id: int) -> None:
        self.queue(device, stream_id).synchronize()
        hooks.run_release_memory()

    def synchronize_device(self, device: int) -> None:
        hooks.run_before_synchronize()
        hooks.run_release_memory()
        if device < 0:
            self.runtime.synchronize()
        else:
            self.runtime.device(device).synchronize()

    # --- events ----------------------------------------------------------------------------
    def record_event(self, event_id: int, device: int, stream_id: int, enable_timing: bool = True) -> int:
        if event_id == 0:
            event_id = next(self._event_ids)
            self._events[event_id] = SimEvent(enable_timing=enable_timing)
        self._events[event_id].record(self.queue(device, stream_id))
        return event_id

    def block(self, event_id: int, device: int, stream_id: int) -> None:
        self.queue(device, stream_id).wait_event(self._events[event_id])

    def query_event(self, event_id: int) -> bool:
        return self._events[event_id].query()

    def synchronize_event(self, event_id: int) -> None:
        self._events[event_id].synchronize()

    def destroy_event(self, event_id: int) -> None:
        self._events.pop(event_id, None)

    def elapsed_time(self, start_id: int, end_id: int) -> float:
        return self._events[start_id].elapsed_time(self._events[end_id])

    def event(self, event_id: int) -> SimEvent:
        return self._events[event_id]
