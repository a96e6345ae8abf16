"""A toy iteration model whose times are easy to add up by hand, and a helper that runs replicas on given
arrivals (imported by the replica scenarios)."""

from __future__ import annotations

import numpy as np

from scaleright.estimate.iteration import DecodeRun
from scaleright.serve.cluster import Cluster
from scaleright.serve.kernel import Environment
from scaleright.serve.replica import SchedulerConfig
from scaleright.serve.router import make_router


class ToyModel:
    """Every iteration costs ``fixed_s`` plus ``per_prefill_token_s`` per prompt token; decode context is free."""

    def __init__(self, fixed_s: float = 0.010, per_prefill_token_s: float = 0.0001, slope_s: float = 0.0):
        self.fixed_s, self.per_token, self.slope_s = fixed_s, per_prefill_token_s, slope_s
        self.swap_s_per_token = 1e-6  # host-link seconds per KV token swapped out or in

    def time_s(self, *, prefill_tokens=0, decode_batch=0, decode_context_tokens=0.0, **_):
        return self.fixed_s + self.per_token * prefill_tokens + self.slope_s * decode_context_tokens

    def decode_run(self, batch, context0):
        return DecodeRun(self.fixed_s, self.slope_s, batch, context0)


def run_toy(arrivals, inputs, outputs, *, kv_blocks=1000, max_num_seqs=8, max_num_batched_tokens=256,
            model=None, replicas=1, router="round-robin", concurrency=None, log=True, prefix_cache_hit_rate=0.0,
            preemption="recompute"):  # fmt: skip
    env = Environment(0, log=log)
    fleet = Cluster(env, model or ToyModel(), SchedulerConfig(max_num_seqs, max_num_batched_tokens,
                                                               prefix_cache_hit_rate, preemption),
                    replicas=replicas, kv_blocks=kv_blocks, router=make_router(router),
                    input_tokens=np.asarray(inputs), output_tokens=np.asarray(outputs),
                    arrival_s=None if concurrency else np.asarray(arrivals, dtype=float),
                    concurrency=concurrency)  # fmt: skip
    env.run()
    fleet.close(env.now)
    return env, fleet
