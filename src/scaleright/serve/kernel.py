"""A tiny deterministic discrete-event kernel, in the manner of simpy's ``core.py``.

Events sit in one heap ordered by ``(time, priority, sequence)``: earlier time first; at equal times the lower
priority number first (``Priority``); at equal time and priority, the order of scheduling. Handlers are plain
callables ``handler(env, *args)``; they schedule follow-on events through ``env.schedule``. All state lives on the
``Environment`` instance (clock, heap, counter, the seeded numpy ``Generator``): no globals, so two environments
with the same seed and inputs give identical runs. An exception in a handler propagates out of ``run`` (never
dropped).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from enum import IntEnum

import numpy as np

__all__ = ["Environment", "Priority"]


class Priority(IntEnum):
    """Tie-break at equal times: an iteration's end is booked before arrivals of that instant, and the scheduler
    runs after both, so it sees every request that arrived by then."""

    ITERATION_END = 0
    ARRIVAL = 1
    SCHEDULE = 2


class Environment:
    """Clock, event heap and random generator of one simulation."""

    def __init__(self, seed: int = 0, *, log: bool = False):
        self.now = 0.0  # simulated seconds
        self._heap: list[tuple[float, int, int, Callable, tuple]] = []
        self._seq = 0
        self.rng = np.random.default_rng(seed)
        self.events_processed = 0
        self.log: list[tuple] | None = [] if log else None  # (time, kind, *details) appended by entities

    def schedule(self, time: float, priority: int, handler: Callable, *args) -> None:
        """Run ``handler(self, *args)`` at ``time`` (not before now)."""
        if time < self.now:
            raise ValueError(f"event at {time} scheduled in the past (now {self.now})")
        heapq.heappush(self._heap, (time, priority, self._seq, handler, args))
        self._seq += 1

    def record(self, kind: str, *details) -> None:
        if self.log is not None:
            self.log.append((self.now, kind, *details))

    def peek(self) -> float:
        """Time of the next event (inf when none)."""
        return self._heap[0][0] if self._heap else float("inf")

    def run(self, until: float = float("inf")) -> None:
        """Process events in order until the heap is empty or the next event is later than ``until``."""
        heap = self._heap
        pop = heapq.heappop
        while heap and heap[0][0] <= until:
            time, _, _, handler, args = pop(heap)
            self.now = time
            self.events_processed += 1
            handler(self, *args)
        if until != float("inf") and until > self.now:
            self.now = until
