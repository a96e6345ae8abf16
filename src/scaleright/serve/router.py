"""Routers: which replica a new request goes to. Small named strategies behind a registry (STYLE habit 16).

- ``round-robin``: replicas in turn (vLLM's and most load balancers' default).
- ``least-outstanding``: the replica with the fewest requests queued or running (ties: lowest index), as
  "least outstanding requests" load balancers (AWS ALB) and llm-d's queue-depth scorer do.
"""

from __future__ import annotations

from collections.abc import Sequence

from scaleright.errors import UnknownNameError

__all__ = ["ROUTERS", "LeastOutstanding", "RoundRobin", "make_router"]


class RoundRobin:
    name = "round-robin"

    def __init__(self) -> None:
        self._next = 0

    def pick(self, replicas: Sequence) -> int:
        i = self._next
        self._next = (i + 1) % len(replicas)
        return i


class LeastOutstanding:
    name = "least-outstanding"

    def pick(self, replicas: Sequence) -> int:
        best, best_n = 0, replicas[0].in_system
        for i in range(1, len(replicas)):
            n = replicas[i].in_system
            if n < best_n:
                best, best_n = i, n
        return best


ROUTERS = {cls.name: cls for cls in (RoundRobin, LeastOutstanding)}


def make_router(name: str):
    """A fresh router of strategy ``name`` (routers keep state, so one per simulation)."""
    try:
        return ROUTERS[name]()
    except KeyError:
        raise UnknownNameError("router", name, ROUTERS) from None
