"""``bench serve`` against a fake OpenAI-compatible server whose token timing is known exactly (fake_openai_server):
TTFT = a + b · prompt tokens, then one token every ``itl_s``. Loopback and thread scheduling only ever add time, so
each measured latency must lie between the known value and the known value plus a jitter allowance (``JITTER_S``);
the slope of TTFT against prompt length must be the fake's b; and the workload must be the simulator's draws."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from fake_openai_server import FakeOpenAIServer, FakeTiming

from scaleright.bench.db import RunStore
from scaleright.bench.serve import ServeBenchConfig, draw_workload, run_serve_bench
from scaleright.errors import InputError

JITTER_S = 0.150  # one request's worst delay: loopback connect, GIL hand-offs, a shared 2-core box at load 7
TYPICAL_S = 0.020  # the median delay over a run's requests
GAP_S = 0.008  # the median lateness of one inter-token sleep at load 5-9 (an 8 ms sleep measured 11.8 ms)
EARLY_S = 0.0005  # a clock read just before the chunk is counted may precede the server's write by a hair
TIMING = FakeTiming(ttft_base_s=0.020, ttft_per_prompt_token_s=3e-4, itl_s=0.008)


def _cfg(url: str, **kw) -> ServeBenchConfig:
    base = dict(endpoint=url, model="fake-model", input_len=150, output_len=12, concurrency=4, requests=24)
    return ServeBenchConfig(**{**base, **kw})


@pytest.fixture
def server():
    with FakeOpenAIServer(TIMING) as srv:
        yield srv


def test_each_requests_latencies_are_the_fakes_known_timing(server):
    res = run_serve_bench(_cfg(server.url, length_dist="lognormal"))
    _, inputs, outputs = draw_workload(_cfg(server.url, length_dist="lognormal").workload())
    assert res.metrics["requests"] == 24 and res.metrics["errors"] == 0
    # the server saw exactly the drawn prompt lengths and output budgets
    assert sorted((len(s["prompt"]), s["max_tokens"]) for s in server.seen) == sorted(
        zip(inputs.tolist(), outputs.tolist(), strict=True))
    ttft_known, ttft_meas, excess = [], [], []
    for r in res.requests:
        known_ttft = TIMING.ttft_s(r.input_tokens)
        known_e2e = known_ttft + (int(outputs[r.index]) - 1) * TIMING.itl_s
        assert r.output_tokens == outputs[r.index] and r.usage_reported
        assert known_ttft - EARLY_S <= r.ttft_s <= known_ttft + JITTER_S, (r.index, r.ttft_s, known_ttft)
        assert known_e2e - EARLY_S <= r.e2e_s <= known_e2e + 2 * JITTER_S, (r.index, r.e2e_s, known_e2e)
        assert len(r.itl_s) == r.output_tokens - 1
        assert sum(r.itl_s) == pytest.approx(r.e2e_s - r.ttft_s, abs=1e-9)  # the gaps tile the decode time
        ttft_known.append(known_ttft)
        ttft_meas.append(r.ttft_s)
        excess.append(r.ttft_s - known_ttft)
    assert np.median(excess) <= TYPICAL_S
    # TTFT grows with the prompt at the fake's rate b (lognormal prompts span a few hundred tokens)
    slope = np.polyfit([r.input_tokens for r in res.requests], ttft_meas, 1)[0]
    assert slope == pytest.approx(TIMING.ttft_per_prompt_token_s, rel=0.25)
    # the percentiles: at least the known ones, within the jitter allowance
    known_p = np.percentile(np.asarray(ttft_known) * 1e3, [50, 90, 99])
    for q, k in zip(("p50", "p90", "p99"), known_p, strict=True):
        assert k - 1 <= res.metrics["ttft_ms"][q] <= k + JITTER_S * 1e3
    assert res.metrics["ttft_ms"]["p50"] <= known_p[0] + TYPICAL_S * 1e3
    itl = res.metrics["itl_ms"]
    assert TIMING.itl_s * 1e3 - 0.5 <= itl["p50"] <= (TIMING.itl_s + GAP_S) * 1e3
    assert TIMING.itl_s * 1e3 - 0.5 <= res.metrics["tpot_ms"]["p50"] <= (TIMING.itl_s + GAP_S) * 1e3
    assert res.server == {"engine": "vllm", "engine_version": "0.0.0-fake", "engine_profile": "vllm",
                          "models": ["fake-model"], "server_header": None,
                          "engine_source": "GET /v1/models owned_by"}


def test_closed_loop_throughput_is_concurrency_over_the_known_request_time(server):
    # fixed lengths: every request takes T = ttft(150) + 11 · itl = 0.153 s; 4 clients → 4 / T requests/s at most
    res = run_serve_bench(_cfg(server.url, requests=16))
    t_req = TIMING.ttft_s(150) + 11 * TIMING.itl_s
    assert res.metrics["requests_per_s"] <= 4 / t_req * 1.01
    assert res.metrics["requests_per_s"] >= 4 / (t_req + JITTER_S)
    assert res.metrics["output_tokens_per_s"] == pytest.approx(12 * res.metrics["requests_per_s"])


def test_open_loop_sends_each_request_at_its_arrival_time(server):
    cfg = _cfg(server.url, concurrency=None, rate=25.0, requests=20, arrival="gamma", burstiness=0.5, seed=3)
    arrivals, _, _ = draw_workload(cfg.workload())
    res = run_serve_bench(cfg)
    sent = np.array([r.sent_s for r in res.requests])
    assert np.all(sent >= arrivals - EARLY_S)
    assert np.all(sent <= arrivals + JITTER_S)
    assert res.metrics["send_delay_ms"]["p50"] <= TYPICAL_S * 1e3


def test_the_workload_is_the_simulators_draw_for_the_same_seed():
    from scaleright.catalog import get_gpu
    from scaleright.serve.simulate import simulate
    from scaleright.workload import load_model

    spec = load_model("llama-3.1-8b")
    for mode in ({"rate": 3.0, "arrival": "gamma", "burstiness": 0.7}, {"concurrency": 3}):
        cfg = ServeBenchConfig(endpoint="http://127.0.0.1:9", model="m", input_len=300, output_len=40,
                               requests=30, length_dist="lognormal", seed=11, **mode)
        arrivals, inputs, outputs = draw_workload(cfg.workload())
        sim = simulate(spec, gpu=get_gpu("h100-sxm"), input_len=300, output_len=40, requests=30, seed=11,
                       input_dist="lognormal", output_dist="lognormal", **mode)
        rec = sim.records
        assert rec["input_tokens"].tolist() == inputs.tolist()
        assert rec["output_tokens"].tolist() == outputs.tolist()
        if arrivals is not None:
            assert rec["arrival_s"].tolist() == arrivals.tolist()


def test_goodput_counts_the_requests_within_the_slo(server):
    # TPOT of every request is at least itl_s = 8 ms: a 7 ms limit admits none, a 50 ms limit all
    none = run_serve_bench(_cfg(server.url, requests=8, slo_tpot_ms=7.0))
    assert none.metrics["goodput_requests_per_s"] == 0.0
    every = run_serve_bench(_cfg(server.url, requests=8, slo_tpot_ms=50.0, slo_ttft_ms=500.0))
    assert every.metrics["goodput_requests_per_s"] == pytest.approx(every.metrics["requests_per_s"])


def test_failed_requests_are_counted_with_their_message():
    with FakeOpenAIServer(TIMING, fail_every=3) as srv:
        res = run_serve_bench(_cfg(srv.url, requests=12, concurrency=1))
    assert res.metrics["errors"] == 4 and res.metrics["requests"] == 8
    assert res.metrics["error_messages"][0]["count"] == 4
    assert res.metrics["error_messages"][0]["error"].startswith("HTTP 500: ")
    assert "injected failure" in res.metrics["error_messages"][0]["error"]


def test_the_wall_time_bound_stops_sending_and_summarises_what_finished(server):
    # closed loop, 1 client, 0.153 s a request: 0.5 s holds 3 complete requests and part of a 4th (2 on a busy box)
    res = run_serve_bench(_cfg(server.url, concurrency=1, requests=50, max_duration_s=0.5))
    assert res.stopped == "max_duration_s"
    assert 2 <= res.metrics["requests"] <= 3
    assert res.metrics["not_completed"] == 50 - res.metrics["requests"]


def test_a_server_that_does_not_serve_the_model_is_one_line(server):
    with pytest.raises(InputError, match=r"^--model='llama': not served by http://127\.0\.0\.1:\d+; it serves: "
                                         r"fake-model$"):
        run_serve_bench(_cfg(server.url, model="llama"))


@pytest.mark.parametrize("url, message", [
    ("ftp://host", "need http:// or https:// and a host"),
    ("http://", "need http:// or https:// and a host"),
    ("http://h:99999", "not a URL"),
    ("http://h:80/v1?x=1", r"without \?query or #fragment"),
])
def test_bad_endpoints_are_refused_before_anything_is_sent(url, message):
    with pytest.raises(InputError, match=message):
        _cfg(url)


def test_a_trailing_v1_is_the_base_url():
    assert _cfg("http://127.0.0.1:8000/v1/").endpoint == "http://127.0.0.1:8000"


def test_bounds_on_count_concurrency_and_time():
    with pytest.raises(InputError, match=r"--requests must be <= 1,048,576"):
        _cfg("http://h:1", requests=2**21)
    with pytest.raises(InputError, match=r"--max-duration-s must be <= 604,800"):
        _cfg("http://h:1", max_duration_s=1e9)
    with pytest.raises(InputError, match=r"give exactly one of --rate or --concurrency"):
        _cfg("http://h:1", rate=2.0)


# ---- the CLI ------------------------------------------------------------------------------------------------------
def _unused_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_cli_json_has_the_simulators_keys_and_stores_the_engine(cli, server, tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = cli("bench", "serve", "--endpoint", server.url + "/v1", "--model", "fake-model", "--rate", "30",
               "--requests", "10", "--input-len", "100", "--output-len", "5", "--db", db, "--json",
               "--sim-model", "llama-3.1-8b", "--gpu", "h100-sxm")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(out[key]) == {"mean", "p50", "p90", "p99"}
    assert out["requests"] == 10 and out["engine"] == "vllm" and out["engine_version"] == "0.0.0-fake"
    assert out["ttft_ms"]["p50"] >= TIMING.ttft_s(100) * 1e3 - 1
    [run] = RunStore(db).list(kind="serve")
    assert run["id"] == out["run_id"] and run["status"] == "ok"
    assert run["software"]["engine"] == "vllm" and run["software"]["engine_version"] == "0.0.0-fake"
    assert run["metrics"]["ttft_ms"] == out["ttft_ms"]
    assert run["layout"]["rate"] == 30.0 and run["model"] == {"name": "fake-model", "sim_model": "llama-3.1-8b"}
    listed = cli("runs", "list", "--db", db, "--kind", "serve", "--json")
    assert [r["id"] for r in json.loads(listed.stdout)] == [run["id"]]
    table = cli("runs", "list", "--db", db).stdout
    assert "serve" in table and "TTFT" in table  # the headline of a serve run (rich may wrap it)


def test_cli_unreachable_server_is_one_line_and_stores_nothing(cli, tmp_path):
    db = tmp_path / "runs.sqlite"
    proc = cli("bench", "serve", "--endpoint", f"http://127.0.0.1:{_unused_port()}", "--model", "m",
               "--concurrency", "1", "--db", db)
    assert proc.returncode == 2
    assert proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("error: --endpoint=http://127.0.0.1:") and "cannot reach the server" in line
    assert not db.exists()


def test_cli_ctrl_c_stops_prints_what_was_measured_and_exits_130(tmp_path):
    slow = FakeTiming(ttft_base_s=0.01, ttft_per_prompt_token_s=0.0, itl_s=0.05)  # 10 tokens: 0.46 s a request
    db = tmp_path / "runs.sqlite"
    with FakeOpenAIServer(slow) as srv:
        proc = subprocess.Popen(
            [sys.executable, "-m", "scaleright", "bench", "serve", "--endpoint", srv.url, "--model", "fake-model",
             "--rate", "8", "--requests", "200", "--input-len", "8", "--output-len", "10", "--db", str(db),
             "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ.copy())
        deadline = time.time() + 60
        while len(srv.seen) < 12 and time.time() < deadline:  # a dozen requests sent: several have finished
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    data = json.loads(out)
    assert data["interrupted"] is True and data["stopped"] == "interrupted"
    assert 1 <= data["requests"] < 200 and data["errors"] == 0
    assert data["not_completed"] == 200 - data["requests"]
    assert data["e2e_ms"]["p50"] >= (0.01 + 9 * 0.05) * 1e3 - 1
    [run] = RunStore(db).list(kind="serve")
    assert run["metrics"]["stopped"] == "interrupted" and run["metrics"]["requests"] == data["requests"]


def test_max_concurrency_bounds_the_requests_in_flight(server):
    # 100 requests/s offered, one slot: the requests go one after another, each T = ttft(150) + 11 · itl long
    res = run_serve_bench(_cfg(server.url, concurrency=None, rate=100.0, requests=6, max_concurrency=1))
    t_req = TIMING.ttft_s(150) + 11 * TIMING.itl_s
    assert res.metrics["requests_per_s"] <= 1 / t_req * 1.01
    starts = sorted(r.sent_s for r in res.requests)
    assert all(b - a >= t_req - EARLY_S for a, b in itertools.pairwise(starts))
    assert res.metrics["send_delay_ms"]["p99"] >= 3 * t_req * 1e3  # the last ones waited for the slot


def test_cli_a_run_where_every_request_fails_is_stored_as_failed_and_exits_2(cli, tmp_path):
    db = tmp_path / "runs.sqlite"
    with FakeOpenAIServer(TIMING, fail_every=1) as srv:
        proc = cli("bench", "serve", "--endpoint", srv.url, "--model", "fake-model", "--concurrency", "2",
                   "--requests", "4", "--db", db)
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].startswith(f"error: --endpoint={srv.url}: no request completed (HTTP 500: ")
    [run] = RunStore(db).list(kind="serve")
    assert run["status"] == "failed" and run["metrics"]["errors"] == 4 and "HTTP 500" in run["error"]


def test_counts_must_be_whole_numbers():
    with pytest.raises(InputError, match=r"^--requests=2\.5 must be a whole number$"):
        _cfg("http://h:1", requests=2.5)


def test_prompts_are_a_function_of_the_seed_and_the_request():
    from scaleright.bench.serve_client import PROMPT_TOKEN_IDS

    seen = []
    for _ in range(2):
        with FakeOpenAIServer(TIMING) as srv:
            run_serve_bench(_cfg(srv.url, requests=6, concurrency=3, length_dist="lognormal"))
        seen.append(sorted(tuple(s["prompt"]) for s in srv.seen))
    assert seen[0] == seen[1] and len(set(seen[0])) == 6
    lo, hi = PROMPT_TOKEN_IDS
    assert all(lo <= t < hi for p in seen[0] for t in p)
    assert all(s["ignore_eos"] is True and s["stream"] is True for s in srv.seen)
