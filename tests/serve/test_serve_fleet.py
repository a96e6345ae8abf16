"""Fleet scenarios: pooling, priorities, tiered routing, autoscaling and billing, disaggregated prefill/decode,
speculative decoding. Expected values come from closed forms or from single-pool runs of ``simulate``, never from
the fleet code itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

from scaleright.errors import InputError
from scaleright.estimate.collectives import collective_time_s
from scaleright.estimate.comm import system_of
from scaleright.serve import simulate
from scaleright.serve.arrivals import gamma, poisson
from scaleright.serve.fleet import Autoscale, PoolSpec, ServiceSpec, run_fleet
from scaleright.serve.fleet_config import build_fleet, parse_fleet
from scaleright.serve.kernel import Environment
from scaleright.serve.replica import SchedulerConfig
from scaleright.serve.simulate import build_model, kv_blocks_per_replica
from scaleright.serve.speculative import SpeculativeModel, expected_tokens_per_step


@pytest.fixture(scope="module")
def pool_of(llama_8b, h100):
    model = build_model(llama_8b, gpu=h100)
    blocks = kv_blocks_per_replica(llama_8b, model, gpu=h100, tp=1, pp=1, ep=1, precision="bf16", max_num_seqs=256,
                                   max_num_batched_tokens=8192)  # fmt: skip

    def make(name="pool", **kw):
        kw.setdefault("replicas", 1)
        return PoolSpec(name, model, SchedulerConfig(), blocks, 1, price_usd_per_gpu_hour=2.0, **kw)

    return make


def _service(name, arrivals, input_len=1024, output_len=256, tiers=("pool",), **kw):
    n = len(arrivals)
    return ServiceSpec(name, np.asarray(arrivals, dtype=float), np.full(n, input_len), np.full(n, output_len),
                       tiers=list(tiers), **kw)  # fmt: skip


def _p99_ttft(res):
    return max(v["ttft_ms"]["p99"] for v in res.services.values())


def test_pooling_two_bursty_services_needs_fewer_gpus_than_two_separate_pools(pool_of):
    """Two services of 12 requests/s each, gamma arrivals with burstiness 0.25 (CV 2), 1024/256 tokens, p99 TTFT
    <= 300 ms. Each alone needs its own pool; on one pool their bursts rarely coincide."""
    rng = np.random.default_rng(7)
    a, b = (gamma(rng, rate=12.0, burstiness=0.25, n=1440) for _ in range(2))
    slo_ms = 300.0

    def fewest(services):
        for n in range(1, 9):
            if _p99_ttft(run_fleet(Environment(0), [pool_of(replicas=n)], services)) <= slo_ms:
                return n
        raise AssertionError("no replica count up to 8 meets the SLO")

    separate = fewest([_service("a", a)]) + fewest([_service("b", b)])
    pooled = fewest([_service("a", a), _service("b", b)])
    assert pooled < separate


def test_the_higher_priority_service_waits_less_on_a_shared_saturated_pool(pool_of):
    rng = np.random.default_rng(3)
    a, b = poisson(rng, rate=14.0, n=1000), poisson(rng, rate=14.0, n=1000)
    prio = run_fleet(Environment(0), [pool_of(replicas=1)], [_service("hi", a, priority=1), _service("lo", b)])
    same = run_fleet(Environment(0), [pool_of(replicas=1)], [_service("hi", a), _service("lo", b)])
    hi, lo = prio.services["hi"]["ttft_ms"]["p99"], prio.services["lo"]["ttft_ms"]["p99"]
    assert hi < lo
    assert hi < same.services["hi"]["ttft_ms"]["p99"]


def test_littles_law_holds_on_a_pool_in_steady_state(pool_of):
    rng = np.random.default_rng(5)
    arr = poisson(rng, rate=10.0, n=3000)
    res = run_fleet(Environment(0), [pool_of(replicas=1)], [_service("s", arr, input_len=512, output_len=128)])
    s, p = res.services["s"], res.pools["pool"]
    end = arr[0] + res.duration_s  # the pool's integrals run over [0, last completion]
    # L = λ W with λ the completions over the window and W the mean time in system (end-to-end)
    assert p["mean_requests_in_system"] == pytest.approx(s["requests"] / end * s["e2e_ms"]["mean"] / 1e3, rel=1e-9)
    assert p["mean_requests_in_system"] == pytest.approx(10.0 * s["e2e_ms"]["mean"] / 1e3, rel=0.05)


def test_an_escalated_request_pays_both_tiers_at_zero_load(llama_8b, llama_70b, h100, tmp_path):
    """A cascade 8B -> 70B with every request escalated: at zero load each request's end-to-end latency is its
    8B end-to-end plus its 70B end-to-end (each measured by ``simulate`` alone), its TTFT the 8B end-to-end plus
    the 70B TTFT."""
    trace = tmp_path / "alone.csv"
    trace.write_text("arrival_time_s,input_tokens,output_tokens\n" + "".join(f"{30 * i},512,64\n" for i in range(4)))
    small = simulate(llama_8b, gpu=h100, trace=trace)
    large = simulate(llama_70b, gpu=h100, gpus=4, tp=4, trace=trace)
    f = parse_fleet({"pools": [{"name": "s", "model": "llama-3.1-8b", "replicas": 1},
                               {"name": "l", "model": "llama-3.1-70b", "tp": 4, "replicas": 1}],
                     "services": [{"name": "chat", "pools": ["s", "l"], "escalate": [1.0], "trace": str(trace)}]})
    res = run_fleet(*build_fleet(f))
    svc = res.services["chat"]
    assert svc["served_by_tier"] == [0, 4]
    assert svc["e2e_ms"]["mean"] == pytest.approx(small.e2e_ms["mean"] + large.e2e_ms["mean"], rel=1e-9)
    assert svc["ttft_ms"]["mean"] == pytest.approx(small.e2e_ms["mean"] + large.ttft_ms["mean"], rel=1e-9)


def test_the_share_escalated_follows_the_given_fraction(pool_of):
    rng = np.random.default_rng(1)
    arr = poisson(rng, rate=2.0, n=2000)
    pools = [pool_of("tiny"), pool_of("big")]
    res = run_fleet(Environment(11), pools, [_service("s", arr, 128, 16, tiers=("tiny", "big"), escalate=[0.3])])
    n_big = res.services["s"]["served_by_tier"][1]
    # binomial(2000, 0.3): mean 600, sd 20.5; 5 sd either side
    assert 600 - 103 < n_big < 600 + 103


def test_autoscaling_follows_the_load_and_bills_less_than_always_on(pool_of):
    """A burst of 40 requests/s for 120 s between two quiet minutes at 1/s: the pool scales up within its bounds,
    back down after the delay, and per-second billing costs less than keeping the peak count on."""
    rng = np.random.default_rng(2)
    quiet1 = poisson(rng, rate=1.0, n=60)
    burst = quiet1[-1] + poisson(rng, rate=40.0, n=4800)
    quiet2 = burst[-1] + poisson(rng, rate=1.0, n=120)
    arr = np.concatenate([quiet1, burst, quiet2])
    scale = Autoscale(max_replicas=6, min_replicas=1, metric="queue", target=2.0, interval_s=5.0, cold_start_s=20.0,
                      scale_down_delay_s=30.0)  # fmt: skip
    res = run_fleet(Environment(0), [pool_of(replicas=None, autoscale=scale)], [_service("s", arr, 512, 128)])
    p = res.pools["pool"]
    counts = [billed for _, _, billed in p["replicas_over_time"]]
    assert max(counts) == p["peak_replicas"] and 1 < p["peak_replicas"] <= 6
    assert min(counts[1:]) >= 1 and counts[-1] < p["peak_replicas"]  # scaled back down after the burst
    assert p["usd_per_second_billing"] < p["usd_always_on"]
    assert p["idle_usd"] == pytest.approx((p["gpu_seconds_billed"] - p["gpu_seconds_busy"]) * 2.0 / 3600, rel=1e-12)


def test_scale_to_zero_makes_the_first_request_wait_its_cold_start(pool_of, llama_8b, h100, tmp_path):
    trace = tmp_path / "sparse.csv"
    trace.write_text("arrival_time_s,input_tokens,output_tokens\n" + "".join(f"{600 * i + 1},512,16\n"
                                                                             for i in range(3)))  # fmt: skip
    alone = simulate(llama_8b, gpu=h100, trace=trace)
    scale = Autoscale(max_replicas=1, min_replicas=0, interval_s=10.0, cold_start_s=45.0, scale_down_delay_s=60.0)
    arr = np.array([600.0 * i + 1 for i in range(3)])
    res = run_fleet(Environment(0), [pool_of(replicas=None, autoscale=scale)], [_service("s", arr, 512, 16)])
    # every request finds the pool at zero (it scaled down 60 s after the previous one) and waits 45 s
    assert res.services["s"]["ttft_ms"]["p50"] == pytest.approx(45e3 + alone.ttft_ms["p50"], rel=1e-9)
    # the first two requests each bill their cold start (45 s), their service (< 1 s) and the scale-down delay
    # (60 s, counted from the first tick whose interval saw no work: up to two 10 s ticks after the request ends,
    # and seen by a tick up to 10 s late); the last one bills until it completes; always-on bills all 1,201 s
    p = res.pools["pool"]
    assert 2 * (45 + 60) + 45 <= p["replica_seconds_billed"] <= 2 * (45 + 1 + 20 + 60 + 10) + 46
    assert p["usd_per_second_billing"] < 0.35 * p["usd_always_on"]


def test_disaggregated_serving_adds_the_kv_transfer_over_the_tier_between_the_pools(llama_8b, h100, tmp_path):
    trace = tmp_path / "alone.csv"
    trace.write_text("arrival_time_s,input_tokens,output_tokens\n" + "".join(f"{20 * i},2048,32\n" for i in range(3)))
    together = simulate(llama_8b, gpu=h100, trace=trace)

    def run(link):
        f = parse_fleet({"pools": [{"name": "p", "model": "llama-3.1-8b", "replicas": 1, "role": "prefill",
                                    "decode_pool": "d", "kv_link": link},
                                   {"name": "d", "model": "llama-3.1-8b", "replicas": 1, "role": "decode"}],
                         "services": [{"name": "s", "pools": ["p"], "trace": str(trace)}]})  # fmt: skip
        return run_fleet(*build_fleet(f)).services["s"]

    sys_ = system_of(h100)
    kv_bytes = build_model(llama_8b, gpu=h100).kv_bytes_per_token * 2048
    for link, stride in (("intra-node", 1), ("network", sys_.gpus_per_node)):
        s = run(link)
        transfer = float(collective_time_s("p2p", kv_bytes, system=sys_, size=2, stride=stride))
        assert s["ttft_ms"]["mean"] == pytest.approx(together.ttft_ms["mean"], rel=1e-9)
        assert s["e2e_ms"]["mean"] == pytest.approx(together.e2e_ms["mean"] + transfer * 1e3, rel=1e-9)
    assert run("network")["e2e_ms"]["mean"] > run("intra-node")["e2e_ms"]["mean"]


def test_speculative_decoding_yields_the_papers_expected_tokens_per_step():
    # Leviathan et al. 2023, eq. 1: (1 − α^(k+1)) / (1 − α)
    assert expected_tokens_per_step(0.8, 4) == pytest.approx((1 - 0.8**5) / 0.2)
    assert expected_tokens_per_step(0.0, 4) == 1.0
    assert expected_tokens_per_step(1.0, 4) == 5.0


def test_speculative_decoding_divides_batch_1_tpot_by_the_tokens_per_step(llama_8b, h100):
    """At batch 1 a verification step of k + 1 rows still streams the weights once (bandwidth-bound), so TPOT is
    about (1 + k·c) / E of the plain decode step; with α = 0 nothing is gained and the drafts are pure cost."""
    kw = dict(gpu=h100, input_len=512, output_len=128, concurrency=1, requests=3)
    plain = simulate(llama_8b, **kw).tpot_ms["mean"]
    fast = simulate(llama_8b, speculative=(0.8, 4, 0.05), **kw).tpot_ms["mean"]
    e = (1 - 0.8**5) / 0.2
    assert fast == pytest.approx(plain * (1 + 4 * 0.05) / e, rel=0.08)
    assert simulate(llama_8b, speculative=(0.0, 4, 0.05), **kw).tpot_ms["mean"] > plain


def test_same_seed_same_fleet_result(tmp_path):
    data = {"seed": 4, "pools": [{"name": "s", "model": "llama-3.1-8b", "replicas": 1},
                                 {"name": "l", "model": "llama-3.1-8b", "autoscale": {"max_replicas": 3}}],
            "services": [{"name": "a", "pools": ["s", "l"], "escalate": [0.5], "rate": 8, "requests": 300,
                          "arrival": "gamma", "burstiness": 0.5, "length_dist": "lognormal"}]}  # fmt: skip
    one = run_fleet(*build_fleet(parse_fleet(data))).as_dict()
    two = run_fleet(*build_fleet(parse_fleet(data))).as_dict()
    other = run_fleet(*build_fleet(parse_fleet(data | {"seed": 5}))).as_dict()
    assert json.dumps(one) == json.dumps(two)
    assert one != other


@pytest.mark.parametrize(("data", "message"), [
    ({"pools": [{"name": "a", "model": "llama-3.1-8b"}], "services": []},
     "pools.0: Value error, give replicas (a fixed count) or autoscale"),
    ({"pools": [{"name": "a", "model": "llama-3.1-8b", "replicas": 1}],
      "services": [{"name": "s", "pools": ["b"], "rate": 1}]}, "unknown pool 'b'; pools: a"),
    ({"pools": [{"name": "a", "model": "llama-3.1-8b", "replicas": 1}],
      "services": [{"name": "s", "pools": ["a"], "rate": 1, "escalate": [0.5]}]}, "1 pools need 0 escalate shares"),
    ({"pools": [{"name": "a", "model": "llama-3.1-8b", "replicas": 1, "colour": 1}],
      "services": [{"name": "s", "pools": ["a"], "rate": 1}]}, "pools.0.colour: unknown key"),
    ({"pools": [{"name": "a", "model": "llama-3.1-8b", "autoscale": {"max_replicas": 2, "target": 3}}],
      "services": [{"name": "s", "pools": ["a"], "rate": 1}]}, "busy share for metric utilisation"),
])  # fmt: skip
def test_bad_fleet_files_fail_in_one_line_naming_the_field(data, message):
    with pytest.raises(InputError) as exc:
        parse_fleet(data, source="f.yaml")
    text = str(exc.value)
    assert "\n" not in text and text.startswith("f.yaml: ")
    assert message.removeprefix("pools.0: Value error, ") in text


def test_speculative_inputs_are_checked(llama_8b, h100):
    base = build_model(llama_8b, gpu=h100)
    with pytest.raises(InputError, match=r"acceptance rate=1\.5 must lie in \[0, 1\]"):
        SpeculativeModel(base, acceptance=1.5)
    with pytest.raises(InputError, match=r"k=0 must be an integer in 1\.\.16"):
        SpeculativeModel(base, acceptance=0.5, k=0)
