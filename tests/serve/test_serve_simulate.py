"""Serving scenarios on the real iteration model: zero load, Little's law, load curves, determinism, capacity."""

from __future__ import annotations

import json

import pytest

from scaleright.errors import InputError, LayoutError
from scaleright.estimate.iteration import IterationModel, iteration_time_s
from scaleright.serve import capacity, simulate


@pytest.fixture(scope="module")
def run(llama_8b, h100):
    def go(**kw):
        kw.setdefault("input_len", 512)
        kw.setdefault("output_len", 128)
        return simulate(llama_8b, gpu=h100, **kw)

    return go


def test_at_zero_load_ttft_is_the_prefill_time_of_one_request(run, llama_8b, h100, tmp_path):
    trace = tmp_path / "alone.csv"  # each request finishes long before the next arrives
    trace.write_text("arrival_time_s,input_tokens,output_tokens\n" + "".join(f"{10 * i},512,16\n" for i in range(5)))
    res = run(trace=trace)
    prefill = iteration_time_s(llama_8b, gpu=h100, prefill_tokens=512)
    assert res.ttft_ms["p50"] == pytest.approx(prefill * 1e3, rel=1e-9)
    assert res.ttft_ms["p99"] == pytest.approx(prefill * 1e3, rel=1e-9)
    # alone, every decode iteration is one batch-1 step over a growing context
    model = IterationModel(llama_8b, gpu=h100)
    first = model.time_s(decode_batch=1, decode_context_tokens=512)
    last = model.time_s(decode_batch=1, decode_context_tokens=512 + 14)
    assert first * 1e3 <= res.tpot_ms["p50"] <= last * 1e3


def test_littles_law_holds_in_steady_state(run):
    rate = 10.0
    res = run(rate=rate, requests=3000)
    assert res.preemptions == 0
    assert res.mean_requests_in_system == pytest.approx(rate * res.e2e_ms["mean"] / 1e3, rel=0.03)


def test_p99_ttft_rises_with_load_and_diverges_past_capacity(run):
    rates = [5, 10, 20, 40, 80]
    p99 = [run(rate=r, requests=400).ttft_ms["p99"] for r in rates]
    assert p99 == sorted(p99) and len(set(p99)) == len(p99)
    assert p99[-1] > 20 * p99[0]  # 80 req/s is past what one H100 sustains at 512/128 tokens: the queue grows


def test_same_seed_same_result_and_another_seed_another(run):
    a = run(rate=20, requests=300, seed=3, input_dist="lognormal", output_dist="lognormal")
    b = run(rate=20, requests=300, seed=3, input_dist="lognormal", output_dist="lognormal")
    c = run(rate=20, requests=300, seed=4, input_dist="lognormal", output_dist="lognormal")
    assert json.dumps(a.as_dict()) == json.dumps(b.as_dict())
    assert a.as_dict() != c.as_dict()


def test_burstier_arrivals_raise_tail_latency_at_the_same_rate(run):
    smooth = run(rate=30, requests=600, arrival="gamma", burstiness=4.0)
    bursty = run(rate=30, requests=600, arrival="gamma", burstiness=0.25)
    assert bursty.ttft_ms["p99"] > smooth.ttft_ms["p99"]


def test_four_replicas_carry_four_times_the_rate_at_similar_latency(run):
    one = run(rate=10, requests=1000)
    four = run(rate=40, requests=4000, gpus=4)
    assert four.replicas == 4
    assert four.ttft_ms["p50"] == pytest.approx(one.ttft_ms["p50"], rel=0.15)
    assert four.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s, rel=0.1)


def test_closed_loop_concurrency_saturates_at_the_batch_limit(run):
    res = run(concurrency=64, requests=640)
    assert res.requests == 640 and res.tpot_ms["p50"] > 0
    assert res.mean_requests_in_system == pytest.approx(64, rel=0.05)


def test_a_tiny_kv_cache_preempts_and_still_serves_everything(run):
    res = run(rate=40, requests=300, gpu_memory_utilization=0.22)
    assert res.preemptions > 0 and res.requests == 300


def test_capacity_meets_the_slos_and_a_bit_more_load_does_not(llama_8b, h100):
    kw = dict(gpu=h100, input_len=512, output_len=128, requests=300)
    best, res, trials = capacity(llama_8b, slo_ttft_p99_ms=200, slo_tpot_p99_ms=25, **kw)
    assert best > 1 and res.ttft_ms["p99"] <= 200 and res.tpot_ms["p99"] <= 25
    failed = [r for r, ok in trials if not ok]
    assert failed and min(failed) <= best * 1.03


def test_chrome_trace_has_iteration_and_request_events(run):
    res = run(rate=5, requests=20, chrome_trace=True)
    ev = res.chrome_trace["traceEvents"]
    assert any(e["ph"] == "X" and e["name"].startswith("prefill") for e in ev)
    assert sum(1 for e in ev if e["ph"] == "b") == 40


def test_bad_layouts_and_too_little_memory_are_named(llama_8b, llama_70b, h100):
    with pytest.raises(LayoutError, match=r"tp\(3\) does not divide num_attention_heads\(32\)"):
        simulate(llama_8b, gpu=h100, tp=3, gpus=3, rate=1)
    with pytest.raises(InputError, match=r"does not divide gpus\(3\)"):
        simulate(llama_8b, gpu=h100, tp=2, gpus=3, rate=1)
    with pytest.raises(InputError, match="before any KV cache"):
        simulate(llama_70b, gpu=h100, rate=1)
    with pytest.raises(InputError, match="exactly one of rate, concurrency or trace"):
        simulate(llama_8b, gpu=h100, rate=1, concurrency=2)


def test_engine_profiles_pick_their_kv_format_for_fp8_checkpoints(llama_8b, h100):
    kw = dict(gpu=h100, rate=2, requests=20, precision="fp8")
    trt = simulate(llama_8b, engine="trtllm", **kw)
    vllm = simulate(llama_8b, engine="vllm", **kw)
    assert trt.kv_blocks_per_replica > 1.9 * vllm.kv_blocks_per_replica  # fp8 KV holds twice the tokens of bf16


def test_goodput_and_cost_follow_from_the_measured_rates(run):
    res = run(rate=30, requests=600, slo_ttft_ms=60, slo_tpot_ms=20, price_usd_per_gpu_hour=3.0)
    assert 0 < res.goodput_requests_per_s <= res.requests_per_s
    assert res.usd_per_1m_output_tokens == pytest.approx(3.0 / 3600 / res.output_tokens_per_s * 1e6)


def test_moe_with_expert_parallel_and_pipeline_layouts_serve(mixtral_8x7b, llama_8b, h100):
    moe = simulate(mixtral_8x7b, gpu=h100, gpus=2, tp=2, ep=2, rate=4, requests=100)
    assert moe.requests == 100 and moe.layout == {"tp": 2, "pp": 1, "ep": 2, "replicas": 1, "gpus": 2}
    pp = simulate(llama_8b, gpu=h100, gpus=2, pp=2, rate=0.05, requests=30)
    one = simulate(llama_8b, gpu=h100, rate=0.05, requests=30)
    assert pp.kv_blocks_per_replica > one.kv_blocks_per_replica  # half the weights per GPU
    assert pp.layout["replicas"] == 1  # two micro-batch schedulers, one replica
    # a request alone (one every 20 s, each done in ~2 s): its iterations pass both stages one after another,
    # plus the activation hop; pipelining does not shorten one micro-batch's iteration
    assert pp.tpot_ms["p50"] > one.tpot_ms["p50"]


def test_a_result_cache_answers_repeated_prompts_without_the_gpu(run):
    base = run(rate=30, requests=1000)
    cached = run(rate=30, requests=1000, result_cache_hit_rate=0.5)
    assert 400 < cached.result_cache_hits < 600 and cached.requests == 1000
    assert cached.ttft_ms["p50"] < base.ttft_ms["p50"]
    assert cached.tpot_ms["mean"] < base.tpot_ms["mean"]  # half the load on the engine: smaller batches
    with pytest.raises(InputError, match=r"result_cache_hit_rate=1.0 must lie in \[0, 1\)"):
        run(rate=1, result_cache_hit_rate=1.0)


@pytest.mark.parametrize(("arrival", "extra", "duration_s"), [("diurnal", {}, 21_600.0), ("poisson", {}, 600.0)])
def test_duration_s_is_covered_by_arrivals_even_at_a_diurnal_peak(run, arrival, extra, duration_s):
    # the count was once drawn as rate * T * 1.1 and cut at T: a diurnal curve's peak quarter runs at ~1.3x the
    # mean rate, so the stream ended near 19,300 s of 21,600 and the window simulated was lighter than asked
    res = run(input_len=64, output_len=8, rate=1.0, duration_s=duration_s, arrival=arrival, seed=3, **extra)
    assert res.duration_s >= 0.99 * duration_s
    if arrival == "poisson":
        assert res.requests == pytest.approx(duration_s, rel=0.1)  # 1/s over the whole window (±4 sigma: 600 ± 98)


def test_capacity_under_a_generous_ttft_limit_stays_below_the_flop_roofline(llama_8b, h100):
    """A 5 s TTFT limit: a burst of a few hundred requests drains within it at any rate, so trials must span many
    limits (``SLO_SPANS``) for the search to stop. No fleet serves more requests/s than its dense peak over the
    2 · params FLOPs of every prompt and output token."""
    from scaleright.workload.params import count_params

    best, _, _ = capacity(llama_8b, gpu=h100, input_len=512, output_len=128, slo_ttft_p99_ms=5000,
                          slo_tpot_p99_ms=1000, requests=200, rel_tol=0.1)  # fmt: skip
    roofline = h100.dense_tflops["bf16"] * 1e12 / (2 * count_params(llama_8b).total * (512 + 128))
    assert 0 < best < roofline


def test_a_one_day_ttft_limit_gives_the_capacity_of_a_two_minute_one_in_short_trials(llama_8b, h100):
    """With a one-day TTFT limit only throughput (and TPOT) can bind: the search stops at the saturated rate, and
    its trials stay short (each once ran 200,000 requests: a plan took 83 s). A two-minute limit is as generous for
    a replica whose queue waits seconds below saturation, so both give the same answer."""
    from scaleright.serve.simulate import MAX_TRIAL_REQUESTS, build_model, saturated_rate

    kw = dict(gpu=h100, input_len=1024, output_len=256, requests=300, rel_tol=0.05)
    day, res_day, trials_day = capacity(llama_8b, slo_ttft_p99_ms=86_400_000, slo_tpot_p99_ms=1000, **kw)
    two_min, _, trials_two = capacity(llama_8b, slo_ttft_p99_ms=120_000, slo_tpot_p99_ms=1000, **kw)
    assert day == two_min and trials_day == trials_two
    assert res_day is not None and res_day.requests < MAX_TRIAL_REQUESTS / 10
    sat, _ = saturated_rate(llama_8b, model=build_model(llama_8b, gpu=h100), clients=256, gpu=h100, input_len=1024,
                            output_len=256)  # fmt: skip
    assert day <= sat
    # the saturated rate is a real limit: a stream 10 % above it, run long, keeps queueing (p99 TTFT grows with
    # the run), one 10 % below it does not
    over = [simulate(llama_8b, gpu=h100, input_len=1024, output_len=256, rate=1.1 * sat, requests=n).ttft_ms["p99"]
            for n in (1000, 4000)]  # fmt: skip
    under = [simulate(llama_8b, gpu=h100, input_len=1024, output_len=256, rate=0.9 * sat, requests=n).ttft_ms["p99"]
             for n in (1000, 4000)]  # fmt: skip
    assert over[1] > 2 * over[0] and under[1] < 2 * under[0]


def test_a_fitted_engine_profile_object_runs_as_its_name_does_plus_its_frontend_latency(run):
    """``engine`` takes an ``EngineProfile`` (a fitted one, ``benchmarks/serve_accuracy.py``'s held-out folds): the
    same factors give the same run, and a frontend latency delays every TTFT and end-to-end time by exactly it."""
    import dataclasses

    from scaleright.estimate.engines import get_engine

    named = run(rate=8, requests=200, engine="vllm")
    same = run(rate=8, requests=200, engine=get_engine("vllm"))
    slow = run(rate=8, requests=200, engine=dataclasses.replace(get_engine("vllm"), frontend_latency_s=0.010))
    assert same.as_dict() == named.as_dict()
    for stat in ("mean", "p50", "p99"):
        assert slow.ttft_ms[stat] == pytest.approx(named.ttft_ms[stat] + 10.0, abs=1e-9)
        assert slow.e2e_ms[stat] == pytest.approx(named.e2e_ms[stat] + 10.0, abs=1e-9)
    assert slow.tpot_ms == named.tpot_ms and slow.engine == "vllm"


def test_a_backlog_runs_in_one_batch_up_to_the_engines_default_cap(run, llama_8b, h100):
    """With no ``max_num_seqs`` the engine's default cap applies: vLLM's ``--max-num-seqs`` 256, TensorRT-LLM's
    ``max_batch_size`` 2048 (``trtllm-build``'s default). 512 requests at once: TensorRT-LLM runs them in one wave
    (one batch of 512, so no request waits for another's decode: the last TTFT is the prefill of all of them, well
    under one request's decode), vLLM in two (the second wave waits for the first's 64 decode steps)."""
    kw = dict(concurrency=512, requests=512, input_len=128, output_len=64)
    trt, trt256 = run(engine="trtllm", **kw), run(engine="trtllm", max_num_seqs=256, **kw)
    vllm, vllm256 = run(engine="vllm", **kw), run(engine="vllm", max_num_seqs=256, **kw)
    assert vllm.as_dict() == vllm256.as_dict()
    assert trt.as_dict() == run(engine="trtllm", max_num_seqs=2048, **kw).as_dict()
    # one wave: the slowest first token comes before the fastest request has finished its decode
    one_decode_ms = 63 * trt.tpot_ms["p50"]
    assert trt.ttft_ms["p99"] < one_decode_ms
    # two waves: the second wave's first tokens wait for the first wave's decode
    assert trt256.ttft_ms["p99"] > 63 * trt256.tpot_ms["p50"]
    # the larger batch costs more per iteration (more KV read, more rows), never less
    assert trt.tpot_ms["p50"] > trt256.tpot_ms["p50"]
