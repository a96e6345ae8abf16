"""A fleet of identical replicas behind a router, fed by an open-loop arrival stream or closed-loop clients.

A result cache (repeated prompts answered without the engine, e.g. an exact-match cache in front of the fleet)
serves a given share of requests on arrival.

Open loop (``--rate`` / ``--trace``): request i arrives at its time whatever the fleet does; only the next
arrival sits in the event heap. Closed loop (``--concurrency C``): C clients each send a request at time 0 and the
next one the moment their previous one completes (``vllm bench serve --max-concurrency`` with an infinite rate).
"""

from __future__ import annotations

import numpy as np

from scaleright.serve.kernel import Environment, Priority
from scaleright.serve.replica import Replica, SchedulerConfig, StepCost
from scaleright.serve.request import Request
from scaleright.serve.router import RoundRobin

__all__ = ["Cluster"]

_ARRIVAL = Priority.ARRIVAL


class Cluster:
    """``replicas`` identical replicas sharing one environment; requests are drawn from the given arrays. With
    ``micro_batches`` k > 1 they are schedulers, k consecutive ones per physical replica (``serve.simulate``)."""

    def __init__(self, env: Environment, model: StepCost, config: SchedulerConfig, *, replicas: int,
                 kv_blocks: int, router, input_tokens: np.ndarray, output_tokens: np.ndarray,
                 arrival_s: np.ndarray | None = None, concurrency: int | None = None, trace: bool = False,
                 result_cached: np.ndarray | None = None, micro_batches: int = 1):  # fmt: skip
        self.env = env
        self.micro_batches = micro_batches  # schedulers per physical replica (consecutive ones; pipelining)
        self.router = router
        self.inputs = input_tokens.tolist()
        self.outputs = output_tokens.tolist()
        self.n = len(self.inputs)
        self.issued = 0
        self.concurrency = concurrency
        self.trace_rows: list[list] | None = [[] for _ in range(replicas)] if trace else None
        on_finish = self._client_next if concurrency else None
        # open loop with round robin: request j goes to replica j mod R, so each replica knows its next arrival
        ahead = self._next_for if not concurrency and (replicas == 1 or isinstance(router, RoundRobin)) else None
        self.replicas = [
            Replica(env, model, config, kv_blocks=kv_blocks, index=i, on_finish=on_finish,
                    trace=self.trace_rows[i] if self.trace_rows is not None else None, next_arrival=ahead)
            for i in range(replicas)
        ]
        self.requests: list[Request] = []
        # requests answered from the result cache (a repeated prompt): done on arrival, no replica sees them
        self.result_cached = result_cached.tolist() if result_cached is not None else None
        self.cache_hits: list[Request] = []
        if concurrency:
            for _ in range(min(concurrency, self.n)):
                env.schedule(0.0, _ARRIVAL, self._arrive)
        else:
            assert arrival_s is not None
            self.times = arrival_s.tolist()
            if self.n:
                env.schedule(self.times[0], _ARRIVAL, self._arrive_open)

    def _next_for(self, index: int) -> float:
        """Arrival time of the next request round robin sends to replica ``index`` (inf when none is left)."""
        j = self.issued + (index - self.issued) % len(self.replicas)
        return self.times[j] if j < self.n else float("inf")

    def _new(self, env: Environment) -> None:
        i = self.issued
        self.issued += 1
        req = Request(i, env.now, self.inputs[i], self.outputs[i])
        self.requests.append(req)
        if self.result_cached is not None and self.result_cached[i]:
            req.first_token_s = req.finish_s = env.now
            req.generated = req.output_tokens
            self.cache_hits.append(req)
            if self.concurrency:
                self._client_next(env, req)
            return
        reps = self.replicas
        reps[self.router.pick(reps) if len(reps) > 1 else 0].submit(env, req)

    def _arrive_open(self, env: Environment) -> None:
        self._new(env)
        if self.issued < self.n:
            env.schedule(self.times[self.issued], _ARRIVAL, self._arrive_open)

    def _arrive(self, env: Environment) -> None:
        if self.issued < self.n:  # several clients may finish at one instant when few requests are left
            self._new(env)

    def _client_next(self, env: Environment, req: Request) -> None:
        if self.issued < self.n:
            env.schedule(env.now, _ARRIVAL, self._arrive)

    def close(self, now: float) -> None:
        for r in self.replicas:
            r.close(now)
