"""One request's life in the simulator: arrival, queueing, (chunked) prefill, decode, completion."""

from __future__ import annotations

__all__ = ["DECODE", "DONE", "MIGRATED", "PREFILL", "REJECTED", "SWAPPED", "WAITING", "Request"]

# SWAPPED: KV in host memory, queued; MIGRATED: KV sent from a prefill replica (disaggregated serving), queued
WAITING, PREFILL, DECODE, DONE, REJECTED, SWAPPED, MIGRATED = range(7)


class Request:
    """Token counts and timestamps (simulated seconds) of one request. ``generated`` counts output tokens sampled
    so far; in decode, ``base`` is the KV length minus the replica's decode-iteration counter (constant while the
    request decodes, so contexts of the whole batch advance by one counter)."""

    __slots__ = (
        "arrival_s",
        "base",
        "blocks",
        "cached_tokens",
        "done",
        "epoch",
        "finish_s",
        "first_token_s",
        "generated",
        "id",
        "input_tokens",
        "job",
        "order",
        "output_tokens",
        "preemptions",
        "priority",
        "replica",
        "state",
        "target",
    )  # fmt: skip
    priority: int  # set by serve.fleet (see __init__)
    job: int

    def __init__(self, rid: int, arrival_s: float, input_tokens: int, output_tokens: int, cached_tokens: int = 0):
        self.id = rid
        self.arrival_s = arrival_s
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.cached_tokens = cached_tokens  # prompt tokens found in the prefix cache (not recomputed)
        self.state = WAITING
        self.generated = 0
        self.target = input_tokens  # tokens the next prefill must hold in KV (prompt, or prompt + output on recompute)
        self.done = cached_tokens  # tokens already in KV for the current prefill
        self.blocks = 0  # KV blocks held while prefilling (decode: derived from base)
        self.order = -1  # admission order (preemption takes the latest admitted)
        self.base = 0
        self.epoch = 0  # bumped when a decode heap entry goes stale (preemption)
        self.first_token_s = float("nan")
        self.finish_s = float("nan")
        self.preemptions = 0
        self.replica = -1
        # ``priority`` (higher is served first where the replica's queue has priorities) and ``job`` (the fleet's
        # request this hop belongs to) are set by ``serve.fleet`` only, for its requests: unset here, as nothing on
        # the single-pool path reads them, and every attribute set costs in the hot loop

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Request({self.id}, t={self.arrival_s:.6f}, in={self.input_tokens}, out={self.output_tokens})"
