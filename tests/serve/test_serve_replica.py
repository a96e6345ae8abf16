"""One replica's continuous batching, as exact event logs of small cases worked out by hand (toy iteration model:
10 ms per iteration plus 0.1 ms per prompt token; decode context free), and block accounting under pressure."""

from __future__ import annotations

import numpy as np
import pytest
from serve_toy import ToyModel, run_toy

from scaleright.errors import InputError
from scaleright.serve.replica import BLOCK_TOKENS, SchedulerConfig


def _approx_log(log):
    return [tuple(round(x, 9) if isinstance(x, float) else x for x in ev) for ev in log]


def test_two_requests_exact_event_log():
    # A: 32-token prompt, 4 output tokens, at 0; B: 16-token prompt, 2 output tokens, at 25 ms.
    # 0      A arrives; prefill 32 tokens: 10 + 3.2 ms -> first token of A at 13.2 ms (1 of 4)
    # 13.2   decode run of A, 3 iterations booked to 43.2 ms
    # 25     B arrives: the run is cut after the iteration in flight: 2 iterations end at 33.2 ms (A: 3 of 4)
    # 33.2   decode A + prefill B (16 tokens): 10 + 1.6 ms -> 44.8 ms: A's last token, B's first (1 of 2)
    # 44.8   decode B: 1 iteration -> 54.8 ms, B done
    # (within one iteration end, first tokens are logged before completions)
    env, fleet = run_toy([0.0, 0.025], [32, 16], [4, 2])
    assert _approx_log(env.log) == [
        (0.0, "arrive", 0, 0),
        (0.0132, "iterations", 1, 0, 32, 0.0),
        (0.0132, "first_token", 0),
        (0.025, "arrive", 1, 0),
        (0.0332, "iterations", 2, 1, 0, 0.0132),
        (0.0448, "iterations", 1, 1, 16, 0.0332),
        (0.0448, "first_token", 1),
        (0.0448, "finish", 0),
        (0.0548, "iterations", 1, 1, 0, 0.0448),
        (0.0548, "finish", 1),
    ]
    a, b = fleet.requests
    assert a.first_token_s - a.arrival_s == pytest.approx(0.0132)
    assert b.first_token_s - b.arrival_s == pytest.approx(0.0198)
    assert (a.finish_s - a.first_token_s) / 3 == pytest.approx((0.0448 - 0.0132) / 3)
    rep = fleet.replicas[0]
    assert rep.free == rep.total_blocks and rep.B == 0 and rep.in_system == 0


def test_a_long_prompt_is_chunked_by_the_token_budget():
    # 600-token prompt, budget 256 tokens per iteration: chunks 256, 256, 88; the first token after the third
    env, fleet = run_toy([0.0], [600], [1], max_num_batched_tokens=256)
    its = [ev for ev in env.log if ev[1] == "iterations"]
    assert [ev[4] for ev in its] == [256, 256, 88]
    assert fleet.requests[0].first_token_s == pytest.approx(3 * 0.010 + 600 * 0.0001)
    assert fleet.requests[0].finish_s == fleet.requests[0].first_token_s  # one output token: done at prefill


def test_decode_tokens_take_the_budget_before_prefills():
    # budget 8, two sequences decoding: a new 16-token prompt gets 6 tokens per iteration
    env, _fleet = run_toy([0.0, 0.0, 0.001], [4, 4, 16], [50, 50, 2], max_num_batched_tokens=8, max_num_seqs=4)
    prefills = [ev[4] for ev in env.log if ev[1] == "iterations" and ev[4]]
    assert prefills == [8, 6, 6, 4]


def test_max_num_seqs_holds_the_queue_until_a_completion():
    env, _fleet = run_toy([0.0, 0.0, 0.0], [16, 16, 16], [3, 3, 3], max_num_seqs=2)
    first = {ev[2]: ev[0] for ev in env.log if ev[1] == "first_token"}
    finish = {ev[2]: ev[0] for ev in env.log if ev[1] == "finish"}
    assert first[2] > finish[0]  # the third request is admitted only after one of the first two finishes


def test_preemption_by_recompute_when_the_kv_cache_runs_out_and_every_request_still_finishes():
    # 6 blocks of 16 tokens; three requests of 16 + 40 tokens each need 4 blocks at the end: they cannot all fit
    env, fleet = run_toy([0.0, 0.0, 0.0], [16, 16, 16], [40, 40, 40], kv_blocks=6)
    rep = fleet.replicas[0]
    assert rep.preemptions >= 1
    assert sorted(r.id for r in rep.finished) == [0, 1, 2]
    assert all(r.generated == r.output_tokens for r in rep.finished)
    assert rep.free == rep.total_blocks  # every block came back
    victims = [ev[2] for ev in env.log if ev[1] == "preempt"]
    assert victims[0] == 2  # the most recently admitted goes first


def test_a_request_longer_than_the_whole_cache_is_rejected_not_stuck():
    _env, fleet = run_toy([0.0, 0.0], [16, 200], [4, 4], kv_blocks=8)
    rep = fleet.replicas[0]
    assert [r.id for r in rep.rejected] == [1] and [r.id for r in rep.finished] == [0]


def test_prefix_cache_hits_skip_whole_blocks_of_the_prompt():
    env, _fleet = run_toy([0.0], [100], [1], prefix_cache_hit_rate=0.5)
    its = [ev for ev in env.log if ev[1] == "iterations"]
    assert its[0][4] == 100 - 48  # 50 % of 100 tokens rounded down to whole 16-token blocks: 48 cached


@pytest.mark.parametrize("seed", range(5))
def test_block_count_of_the_batch_matches_a_per_sequence_count(seed):
    rng = np.random.default_rng(seed)
    n = 40
    arrivals = np.sort(rng.uniform(0, 0.5, n))
    inputs = rng.integers(1, 80, n)
    outputs = rng.integers(1, 60, n)
    _env, fleet = run_toy(arrivals, inputs, outputs, kv_blocks=40, max_num_seqs=16, max_num_batched_tokens=64,
                         log=False)  # fmt: skip
    rep = fleet.replicas[0]
    assert len(rep.finished) == n and rep.free == rep.total_blocks


def test_block_phase_classes_agree_with_counting_each_sequence():
    from scaleright.serve.kernel import Environment
    from scaleright.serve.replica import Replica
    from scaleright.serve.request import Request

    rep = Replica(Environment(), ToyModel(), SchedulerConfig(), kv_blocks=10_000)
    lengths = [1, 15, 16, 17, 31, 32, 33, 100]
    for i, c in enumerate(lengths):
        r = Request(i, 0.0, c, 10_000)
        r.done, r.order = c, i
        rep._add_decode(r)
    rep.g = 7
    for n in range(70):
        # a sequence of KV length c (at g = 0; now c + 7) needs a block before each step that starts at a multiple
        brute = sum(sum(1 for j in range(n) if (c + 7 + j) % BLOCK_TOKENS == 0) for c in lengths)
        assert rep._decode_blocks(n) == brute


def test_scheduler_limits_are_checked_with_their_values():
    with pytest.raises(InputError, match=r"max_num_batched_tokens=4 must be an integer >= max_num_seqs\(8\)"):
        SchedulerConfig(max_num_seqs=8, max_num_batched_tokens=4)
    with pytest.raises(InputError, match=r"prefix_cache_hit_rate=1.0"):
        SchedulerConfig(prefix_cache_hit_rate=1.0)


def test_closed_loop_clients_keep_the_concurrency_constant():
    _env, fleet = run_toy(None, [16] * 20, [8] * 20, concurrency=4, log=False)
    reqs = fleet.requests
    assert len(reqs) == 20 and all(r.finish_s == r.finish_s for r in reqs)
    # a new request starts the moment one finishes: arrivals after the first four are completion times
    finishes = sorted(r.finish_s for r in reqs)
    assert sorted(r.arrival_s for r in reqs[4:]) == pytest.approx(finishes[:16])


def test_least_outstanding_router_sends_each_request_to_the_emptier_replica():
    # all at t=0, nothing finishes in between: counts (0,0) -> 0, (1,0) -> 1, (1,1) -> 0 (tie: lowest), (2,1) -> 1
    _env, fleet = run_toy([0.0] * 4, [16] * 4, [100, 1, 1, 1], replicas=2, router="least-outstanding", log=False)
    assert [r.replica for r in fleet.requests] == [0, 1, 0, 1]


def test_round_robin_router_takes_replicas_in_turn():
    _env, fleet = run_toy([0.0, 0.1, 0.2, 0.3, 0.4], [16] * 5, [2] * 5, replicas=3, log=False)
    assert [r.replica for r in fleet.requests] == [0, 1, 2, 0, 1]


@pytest.mark.parametrize("replicas", [1, 3])
def test_knowing_the_next_arrival_ahead_changes_no_timestamp_only_the_event_count(llama_8b, h100, replicas):
    from scaleright.estimate.iteration import IterationModel
    from scaleright.serve.cluster import Cluster
    from scaleright.serve.kernel import Environment
    from scaleright.serve.router import make_router

    model = IterationModel(llama_8b, gpu=h100, max_rows=512)
    rng = np.random.default_rng(11)
    n = 300
    arrivals = np.cumsum(rng.exponential(1 / (12.0 * replicas), n))
    inputs, outputs = rng.integers(16, 400, n), rng.integers(2, 200, n)

    def go(ahead: bool):
        env = Environment(0)
        fleet = Cluster(env, model, SchedulerConfig(64, 512), replicas=replicas, kv_blocks=2000,
                        router=make_router("round-robin"), input_tokens=inputs, output_tokens=outputs,
                        arrival_s=arrivals)  # fmt: skip
        if not ahead:
            for rep in fleet.replicas:
                rep.next_arrival = None  # fall back to cutting runs when a request arrives
        env.run()
        return [t for r in fleet.requests for t in (r.first_token_s, r.finish_s)], env.events_processed

    known, ev_known = go(True)
    cut, ev_cut = go(False)
    assert known == pytest.approx(cut, rel=1e-12)
    assert ev_known < ev_cut


def test_swap_preemption_moves_kv_to_the_host_and_back_without_recompute():
    # the recompute scenario again, with swapping: the victim keeps its KV, so no prompt is prefilled twice
    kw = dict(kv_blocks=6)
    env_r, _fleet_r = run_toy([0.0, 0.0, 0.0], [16, 16, 16], [40, 40, 40], **kw)
    env_s, fleet_s = run_toy([0.0, 0.0, 0.0], [16, 16, 16], [40, 40, 40], preemption="swap", **kw)
    rep = fleet_s.replicas[0]
    assert rep.preemptions >= 1 and rep.swapped_tokens > 0
    assert sorted(r.id for r in rep.finished) == [0, 1, 2] and rep.free == rep.total_blocks
    prefill = lambda env: sum(ev[4] for ev in env.log if ev[1] == "iterations")  # noqa: E731
    assert prefill(env_s) == 48 < prefill(env_r)  # three 16-token prompts, once each
    assert all(r.generated == r.output_tokens for r in rep.finished)


def test_unknown_preemption_mode_is_named():
    with pytest.raises(InputError, match="preemption='drop' not allowed; allowed: recompute, swap"):
        SchedulerConfig(preemption="drop")
