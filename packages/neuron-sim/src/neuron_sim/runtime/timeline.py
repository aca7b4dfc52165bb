"""The simulated timeline of one logical NeuronCore: the one owner of scheduling on it.

Every task on a queue is given its interval ``[start, end)`` here, when it is submitted (timing is
data-independent, so the timeline is known up front and does not depend on how host threads
interleave). A task starts no earlier than

* the end of the previous task on its own queue (tasks of a queue run in order: its ``Lane``);
* the end of the previous task that occupies the core, from any queue, if it occupies the core
  too (launches; host work and DMA copies do not: they overlap launches of other queues);
* a ``not_before_ns`` the caller gives (an event waited for; a collective whose ranks start
  together at the latest rank's arrival).
"""

from __future__ import annotations

import threading


class Lane:
    """One queue's place on the timeline: when everything submitted to it so far ends."""

    __slots__ = ("name", "end_ns")

    def __init__(self, name: str, start_ns: float = 0.0):
        self.name = name
        self.end_ns = start_ns

    def __repr__(self) -> str:
        return f"<Lane {self.name!r} ends at {self.end_ns:.0f} ns>"


class Timeline:
    def __init__(self, name: str = "core"):
        self.name = name
        self._lock = threading.Lock()
        self._core_free_ns = 0.0  # when the last task that occupies the core ends
        self._lanes: list[Lane] = []
        self._retired_end_ns = 0.0  # the latest end of lanes removed (released queues)

    def __repr__(self) -> str:
        return f"<Timeline {self.name}: core free at {self._core_free_ns:.0f} ns, {len(self._lanes)} lane(s)>"

    def lane(self, name: str, start_ns: float = 0.0) -> Lane:
        """A new lane (a queue's): its first task starts no earlier than ``start_ns``."""
        lane = Lane(name, start_ns)
        with self._lock:
            self._lanes.append(lane)
        return lane

    def remove(self, lane: Lane) -> None:
        """Forget ``lane`` (a released queue); its work still counts towards ``end_ns``."""
        with self._lock:
            self._lanes = [other for other in self._lanes if other is not lane]
            self._retired_end_ns = max(self._retired_end_ns, lane.end_ns)

    def reserve(self, lane: Lane, duration_ns: float, occupies_core: bool, not_before_ns: float = 0.0) -> tuple[float, float]:
        """Place a task of ``duration_ns`` at the end of ``lane``: returns its (start, end)."""
        with self._lock:
            start = lane.end_ns if lane.end_ns > not_before_ns else not_before_ns
            if occupies_core and self._core_free_ns > start:
                start = self._core_free_ns
            end = start + duration_ns
            lane.end_ns = end
            if occupies_core:
                self._core_free_ns = end
        return start, end

    @property
    def core_free_ns(self) -> float:
        """When the last task occupying the core ends."""
        return self._core_free_ns

    @property
    def end_ns(self) -> float:
        """When all work placed on this timeline so far ends."""
        with self._lock:
            return max([self._core_free_ns, self._retired_end_ns] + [lane.end_ns for lane in self._lanes])
