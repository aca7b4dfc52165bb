"""Events: points on a queue that the host or other queues can wait for, and time between.

``record`` places a marker at the current end of a queue (``Queue.mark``). Its simulated time is
known at once (timing is data-independent), but the event *completes* only when the queue
reaches the marker. ``elapsed_time`` returns simulated device time in milliseconds - the number
``torch.neuron.Event.elapsed_time`` reports - and, unlike CUDA (which raises if an event has not
completed), first waits for both events, which also raises any error kept before them.

An event knows queues only through what they hand out: ``queue.mark()`` and
``queue.synchronize_until(marker)``.
"""

from __future__ import annotations

from .errors import RuntimeUsageError
from .task import Marker


class Event:
    def __init__(self, enable_timing: bool = True):
        self.enable_timing = enable_timing
        self._marker: Marker | None = None

    def __repr__(self) -> str:
        m = self._marker
        where = "not recorded" if m is None else f"on {m.queue!r} at {m.sim_ns:.0f} ns, {'done' if m.done.is_set() else 'pending'}"
        return f"<Event {where}>"

    def record(self, queue) -> Event:
        """Record on ``queue``. Re-recording moves the event."""
        if queue is None:
            raise TypeError("Event.record needs the queue to record on (e.g. device.default_queue)")
        self._marker = queue.mark()
        return self

    def wait(self, queue) -> None:
        """Make ``queue`` wait for this event (``queue.wait_event(self)``)."""
        queue.wait_event(self)

    def query(self) -> bool:
        """True if the event completed (or was never recorded). Never raises a kept error."""
        m = self._marker
        return m is None or m.done.is_set()

    def synchronize(self) -> None:
        """Wait until the event completes, then raise an error kept by a task before it on its queue."""
        m = self._marker
        if m is not None:
            m.queue.synchronize_until(m)

    @property
    def marker(self) -> Marker | None:
        """Where the event was last recorded (None if never)."""
        return self._marker

    @property
    def recorded(self) -> bool:
        return self._marker is not None

    @property
    def queue(self):
        return None if self._marker is None else self._marker.queue

    @property
    def sim_time_ns(self) -> float | None:
        """Simulated time of the record point (ns on the runtime's device timeline), None if never recorded."""
        return None if self._marker is None else self._marker.sim_ns

    def elapsed_time(self, end_event: Event) -> float:
        """Simulated device time from this event to ``end_event``, in milliseconds."""
        for label, ev in (("start", self), ("end", end_event)):
            if not ev.enable_timing:
                raise RuntimeUsageError(f"elapsed_time: the {label} event was created with enable_timing=False")
            if ev._marker is None:
                raise RuntimeUsageError(f"elapsed_time: the {label} event was never recorded; call record(queue) first")
        self.synchronize()
        end_event.synchronize()
        return (end_event._marker.sim_ns - self._marker.sim_ns) / 1e6
