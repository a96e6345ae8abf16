"""``scaleright serve simulate|capacity``: the JSON contract, the Chrome trace file, and bad flags as one line naming
the flag. The command group is registered on a fresh typer app (the ``app`` fixture in ``conftest.py``)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from scaleright.errors import InputError

runner = CliRunner()
BASE = ["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "256", "--output-len", "32"]


def _json(app, args):
    res = runner.invoke(app, args)
    assert res.exit_code == 0, f"{args}: {res.output}\n{res.exception!r}"
    return json.loads(res.stdout)


def test_simulate_json_has_the_contract_keys(app):
    d = _json(app, [*BASE, "--rate", "4", "--requests", "50", "--json"])
    for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"):
        assert set(d[key]) == {"mean", "p50", "p90", "p99"}
    for key in ("output_tokens_per_s", "requests_per_s", "gpu_utilisation", "kv_utilisation", "preemptions"):
        assert key in d
    assert d["requests"] == 50 and d["model"] == "llama-3.1-8b" and d["gpu"] == "h100-sxm"


def test_simulate_replays_a_trace_and_writes_a_chrome_trace(app, tmp_path):
    trace = tmp_path / "in.csv"
    trace.write_text("arrival_time_s,input_tokens,output_tokens\n0,100,10\n0.5,200,20\n1.0,50,5\n")
    out = tmp_path / "trace.json"
    d = _json(app, [*BASE, "--trace", str(trace), "--trace-out", str(out), "--json"])
    assert d["requests"] == 3
    ev = json.loads(out.read_text())["traceEvents"]
    assert any(e["ph"] == "X" for e in ev)


def test_capacity_json_reports_the_highest_rate_and_its_metrics(app):
    d = _json(app, ["serve", "capacity", "--model", "llama-3.1-8b", "--gpu", "h100", "--input-len", "256",
                    "--output-len", "32", "--slo-ttft-p99-ms", "150", "--slo-tpot-p99-ms", "20", "--requests", "100",
                    "--json"])  # fmt: skip
    assert d["max_rate_per_s"] > 1
    assert d["ttft_ms"]["p99"] <= 150 and d["tpot_ms"]["p99"] <= 20
    assert d["trials"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--rate", "1", "--concurrency", "2"], "give exactly one of --rate, --concurrency or --trace"),
    ([], "give exactly one of --rate, --concurrency or --trace"),
    (["--rate", "-1"], "--rate=-1.0 must be a finite positive number"),
    (["--rate", "1", "--engine", "tgi"], "--engine='tgi' not allowed; allowed: vllm, sglang, trtllm, llama.cpp"),
    (["--rate", "1", "--tp", "2"], r"--tp\(2\) \* --pp\(1\) = 2 does not divide --gpus\(1\)"),
    (["--rate", "1", "--max-num-seqs", "512", "--max-num-batched-tokens", "256"],
     "--max-num-batched-tokens=256 must be >= --max-num-seqs=512"),
    (["--concurrency", "4", "--duration-s", "10"], "--duration-s needs --rate"),
    (["--rate", "1", "--requests", "0"], "--requests must be >= 1"),
    (["--rate", "1", "--kv-precision", "fp6"], "--kv-precision='fp6' not allowed"),
])  # fmt: skip
def test_bad_flags_are_one_error_naming_the_flag(app, extra, message):
    res = runner.invoke(app, BASE + extra)
    assert isinstance(res.exception, InputError), res.output
    with pytest.raises(InputError, match=message):
        raise res.exception


def test_empirical_lengths_from_files_and_a_diurnal_stream(app, tmp_path):
    lens = tmp_path / "in.txt"
    lens.write_text("100\n300\n")
    d = _json(app, [*BASE, "--rate", "2", "--requests", "40", "--input-lengths", str(lens), "--arrival", "diurnal",
                    "--diurnal-period-s", "60", "--diurnal-amplitude", "0.9", "--json"])  # fmt: skip
    assert d["requests"] == 40
    res = runner.invoke(app, [*BASE, "--rate", "2", "--input-lengths", str(tmp_path / "none.txt")])
    with pytest.raises(InputError, match="--input-lengths="):
        raise res.exception


def test_cost_uses_the_catalog_price_unless_one_is_given(app):
    d = _json(app, [*BASE, "--rate", "4", "--requests", "30", "--json"])
    assert d["price_usd_per_gpu_hour"] > 0 and d["price_source"].startswith("catalog on-demand")
    assert d["usd_per_1m_output_tokens"] == pytest.approx(
        d["price_usd_per_gpu_hour"] / 3600 / d["output_tokens_per_s"] * 1e6)
    g = _json(app, [*BASE, "--rate", "4", "--requests", "30", "--price-usd-per-gpu-hour", "2", "--json"])
    assert g["price_usd_per_gpu_hour"] == 2 and g["price_source"] == "--price-usd-per-gpu-hour"


def test_an_uncalibrated_engine_profile_is_flagged(app):
    d = _json(app, [*BASE, "--rate", "2", "--requests", "10", "--engine", "sglang", "--json"])
    assert d["engine_status"] == "uncalibrated"
    assert _json(app, [*BASE, "--rate", "2", "--requests", "10", "--json"])["engine_status"] == "fitted"


def test_the_serve_package_exports_what_it_names():
    import scaleright.serve as serve

    assert sorted(serve.__all__) == ["Environment", "FleetResult", "Priority", "SimulationResult", "capacity",
                                    "run_fleet", "simulate"]
    assert all(hasattr(serve, name) for name in serve.__all__)


FLEET = """\
seed: 2
pools:
  - {name: small, model: llama-3.1-8b, gpu: h100, replicas: 1}
  - {name: big, model: llama-3.1-8b, gpu: h100, autoscale: {min_replicas: 0, max_replicas: 2, cold_start_s: 5}}
services:
  - {name: chat, pools: [small, big], escalate: [0.25], rate: 4, requests: 60, input_len: 256, output_len: 32,
     priority: 1}
  - {name: batch, pools: [small], rate: 2, requests: 30, input_len: 256, output_len: 32}
"""


def test_simulate_fleet_json_has_services_and_pools(app, tmp_path):
    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET)
    d = _json(app, ["serve", "simulate", "--fleet", str(f), "--json"])
    assert set(d["services"]) == {"chat", "batch"} and set(d["pools"]) == {"small", "big"}
    assert sum(d["services"]["chat"]["served_by_tier"]) == 60
    for key in ("usd_per_second_billing", "usd_always_on", "idle_usd", "replicas_over_time", "peak_replicas"):
        assert key in d["pools"]["big"]


@pytest.mark.parametrize(("extra", "message"), [
    (["--rate", "3"], "--fleet FILE holds the pools and services; --rate does not apply (set it in the file)"),
    (["--model", "llama-3.1-8b", "--tp", "2"], "--model, --tp do not apply"),
])  # fmt: skip
def test_fleet_refuses_the_single_pool_flags(app, tmp_path, extra, message):
    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET)
    res = runner.invoke(app, ["serve", "simulate", "--fleet", str(f), *extra])
    assert isinstance(res.exception, InputError) and message in str(res.exception)


def test_a_bad_fleet_field_is_one_line_naming_it(app, tmp_path):
    f = tmp_path / "fleet.yaml"
    f.write_text(FLEET.replace("escalate: [0.25]", "escalate: [1.5]"))
    res = runner.invoke(app, ["serve", "simulate", "--fleet", str(f)])
    text = str(res.exception)
    assert isinstance(res.exception, InputError) and "\n" not in text and "Value error" not in text
    assert text.startswith(f"{f}: services.0: ") and "escalate shares [1.5] must lie in [0, 1]" in text
    res = runner.invoke(app, ["serve", "simulate", "--rate", "1"])
    assert isinstance(res.exception, InputError) and "give --model (one pool) or --fleet FILE" in str(res.exception)


def test_speculative_flags_lower_batch_1_tpot(app):
    base = [*BASE, "--concurrency", "1", "--requests", "2", "--json"]
    plain = _json(app, base)["tpot_ms"]["mean"]
    fast = _json(app, [*base, "--speculative-acceptance", "0.8"])["tpot_ms"]["mean"]
    assert fast < plain
    res = runner.invoke(app, [*base, "--speculative-acceptance", "2"])
    assert isinstance(res.exception, InputError) and "--speculative-acceptance=2.0 must lie in [0, 1]" in str(
        res.exception)


def test_max_num_seqs_defaults_to_the_engines_cap_not_vllms(app):
    # TensorRT-LLM admits up to 2048 sequences (trtllm-build's max_batch_size default; EngineProfile.max_num_seqs):
    # 512 closed-loop clients all run at once by default, while a 256 cap makes half of them wait for a slot
    args = [*BASE, "--engine", "trtllm", "--concurrency", "512", "--requests", "1024", "--json"]
    default, capped = _json(app, args), _json(app, [*args, "--max-num-seqs", "256"])
    assert default["ttft_ms"]["mean"] < 0.6 * capped["ttft_ms"]["mean"]  # (the token budget still queues prefills)
    explicit = _json(app, [*args, "--max-num-seqs", "2048"])
    assert explicit["ttft_ms"] == default["ttft_ms"]
