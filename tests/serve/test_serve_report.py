"""The simulator's time series and the serving charts: the timeline's intervals add up to the run's totals, stay
within a bounded count, show a queue building under overload; ``serve simulate --report`` and the plan report draw
the latency CDF, utilisation and queue over time and cost against load, and say so instead of drawing one point."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from scaleright.serve import simulate
from scaleright.serve.metrics import TIMELINE_POINTS
from tests.cli_helpers import assert_one_line, run_main


@pytest.fixture(scope="module")
def loaded(llama_8b, h100):
    return simulate(llama_8b, gpu=h100, gpus=2, input_len=512, output_len=128, rate=30, requests=3000)


def test_the_timeline_integrates_to_the_runs_totals(loaded):
    """Interval means times interval lengths sum to the integrals behind the time averages (busy GPU-seconds,
    KV block-seconds, waiting request-seconds): before the first arrival and after the last completion each is
    0, so the windows' difference does not matter."""
    t = loaded.timeline
    w = t["end_s"] - t["start_s"]
    reps, span = loaded.replicas, loaded.duration_s
    assert (t["gpu_busy"] * w).sum() * reps == pytest.approx(loaded.gpu_utilisation * reps * span, rel=1e-9)
    assert (t["kv_used"] * w).sum() * reps == pytest.approx(loaded.kv_utilisation * reps * span, rel=1e-9)
    assert (t["queue"] * w).sum() == pytest.approx(loaded.mean_queue_length * span, rel=1e-9, abs=1e-12)
    assert (t["in_system"] * w).sum() == pytest.approx(loaded.mean_requests_in_system * span, rel=1e-9)
    assert np.all(np.diff(t["start_s"]) > 0) and t["start_s"][0] == 0.0 and t["end_s"][-1] >= span
    assert set(t["replicas"]) == {2.0}
    assert np.all((t["gpu_busy"] >= 0) & (t["gpu_busy"] <= 1 + 1e-9))


@pytest.mark.parametrize("requests", [200, 20_000])
def test_the_timeline_keeps_a_bounded_number_of_samples_and_out_of_the_event_count(llama_8b, h100, requests):
    res = simulate(llama_8b, gpu=h100, input_len=256, output_len=32, rate=20, requests=requests)
    n = len(res.timeline["start_s"])
    assert TIMELINE_POINTS / 2 <= n <= 2 * TIMELINE_POINTS
    # the samples are not simulation events: a closed loop (no arrival horizon) samples too and counts the same
    closed = simulate(llama_8b, gpu=h100, input_len=256, output_len=32, concurrency=8, requests=200)
    assert TIMELINE_POINTS / 2 <= len(closed.timeline["start_s"]) <= 2 * TIMELINE_POINTS
    assert res.events >= res.requests  # each request arrives once, at least


def test_an_overloaded_replica_shows_its_queue_building_and_an_idle_one_none(llama_8b, h100):
    over = simulate(llama_8b, gpu=h100, input_len=1024, output_len=256, rate=30, requests=3000).timeline
    quiet = simulate(llama_8b, gpu=h100, input_len=1024, output_len=256, rate=1, requests=200).timeline
    # 30 req/s is twice what one H100 completes at 1024/256 tokens: the waiting line grows while arrivals last
    arriving = over["end_s"] <= 100.0  # 3,000 arrivals at 30/s span ~100 s
    q = over["queue"][arriving]
    assert q[-5:].mean() > 4 * q[: len(q) // 4].mean() > 0
    assert quiet["queue"].max() < 0.5  # one request at a time mostly: hardly anyone waits


def test_serve_simulate_report_draws_every_chart_with_hover_text(tmp_path, monkeypatch, capsys):
    out = tmp_path / "run.html"
    code, _, err = run_main(["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "12",
                             "--requests", "300", "--report", str(out), "--price-usd-per-gpu-hour", "2.5"],
                            monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    html = out.read_text()
    for title in ("Latency CDF", "GPU busy share and KV-cache use over time", "Requests waiting and in the system",
                  "USD per 1M output tokens against offered load"):  # fmt: skip
        assert f"<title>{title}" in html
    assert len(re.findall(r"<circle[^>]*><title>", html)) > 20  # markers carry their numbers
    assert "TTFT p99: " in html and not re.search(r"\bnan\b", html, re.IGNORECASE)
    assert not list(tmp_path.glob("*.tmp*"))  # written atomically: no temporary file left


def test_a_report_of_one_request_says_what_it_cannot_draw(tmp_path, monkeypatch, capsys):
    out = tmp_path / "one.html"
    code, _, err = run_main(["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency",
                             "1", "--requests", "1", "--output-len", "1", "--report", str(out)],
                            monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    html = out.read_text()
    assert "fewer than two distinct latencies" in html and "Cost against load: drawn for --rate runs" in html


def test_an_unwritable_report_path_fails_in_one_line_before_simulating(tmp_path, monkeypatch, capsys):
    code, out, err = run_main(["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--report",
                               str(tmp_path)], monkeypatch, capsys)  # fmt: skip
    assert_one_line(code, out, err, r"--report")


def test_the_plan_report_draws_the_serving_simulation_of_the_recommendation():
    from scaleright.plan.planner import plan
    from scaleright.plan.report import render_html
    from scaleright.plan.scenario import parse_scenario

    res = plan(parse_scenario({"model": "llama-3.1-8b", "task": "inference",
                               "inference": {"requests_per_s": 12, "input_len": 1024, "output_len": 256,
                                             "ttft_slo_s": 0.5, "tpot_slo_s": 0.05},
                               "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 32}})).as_dict()  # fmt: skip
    rec = res["recommendation"]
    steps = rec["gpus_against_load"]
    # k replicas carry up to k capacities of peak · 1.2: the load where each step ends, by hand
    assert steps[0] == {"requests_per_s": pytest.approx(rec["replica_capacity"] / 1.2), "replicas": 1, "gpus": 1}
    assert all(b["requests_per_s"] > a["requests_per_s"] and b["gpus"] > a["gpus"]
               for a, b in itertools.pairwise(steps))  # fmt: skip
    html = render_html(res)
    section = html[html.index("<h2>Serving simulation"):html.index("<h2>Why")]
    assert section.count("<svg") == 4 and "GPU cost per month (USD) against offered load" in section
    assert "simulated fleet" in section


def test_a_fleet_report_draws_each_pools_replicas_over_time_and_each_services_latency(tmp_path, monkeypatch,
                                                                                      capsys):  # fmt: skip
    from tests.serve.test_serve_cli import FLEET

    f, out = tmp_path / "fleet.yaml", tmp_path / "fleet.html"
    f.write_text(FLEET)
    code, _, err = run_main(["serve", "simulate", "--fleet", str(f), "--report", str(out), "--json"], monkeypatch,
                            capsys)  # fmt: skip
    assert code == 0, err
    html = out.read_text()
    assert "<title>Replicas serving and billed per pool over time" in html
    # the autoscaled pool starts at zero and scales up: its first change is a cold start, billed before serving
    assert re.search(r"big at [0-9.]+ s: 0 serving, 1 billed", html)
    assert html.count("<title>Latency CDF") == 2 and "<h3>chat</h3>" in html and "<h3>batch</h3>" in html
