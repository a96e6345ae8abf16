"""Real training benchmarks on CPU with gloo via torchrun (world sizes 1 and 2), the JSON contract, the stored runs,
the scaling report and the ``runs`` commands on the database they produced."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

import pytest

from scaleright.bench import RunStore, gpt_spec, run_train_bench, scaling_efficiency, scaling_report
from scaleright.bench.report import render_html

pytest.importorskip("torch")
pytestmark = pytest.mark.slow

STEPS = 4


@pytest.fixture(scope="module")
def ddp_sweep(tmp_path_factory, cli):
    """The scripts' contract command, run once: ddp, tiny, world sizes 1 and 2."""
    db = tmp_path_factory.mktemp("train") / "runs.sqlite"
    proc = cli("bench", "train", "--nproc", "1,2", "--strategy", "ddp", "--model", "tiny", "--device", "cpu",
               "--steps", STEPS, "--warmup", 1, "--db", db, "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), db


def test_contract_prints_one_json_object_with_runs_and_efficiency(ddp_sweep):
    out, _ = ddp_sweep
    assert [r["world_size"] for r in out["runs"]] == [1, 2]
    for run in out["runs"]:
        for key in ("world_size", "step_time_s_median", "tokens_per_s", "peak_memory_gb", "step_time_s_p10",
                    "step_time_s_p90", "comm_time_s_median", "data_time_s_median", "compute_time_s_median"):
            assert isinstance(run[key], (int, float)), key
        assert run["step_time_s_p10"] <= run["step_time_s_median"] <= run["step_time_s_p90"]
        assert run["tokens_per_s"] == pytest.approx(run["world_size"] * 8 * 64 / run["step_time_s_median"])
        assert "getrusage" in run["peak_memory_method"]
        assert len(run["peak_memory_gb_per_rank"]) == run["world_size"]
    assert set(out["scaling_efficiency"]) == {"1", "2"} and out["scaling_efficiency"]["1"] == 1.0
    assert out["runs"][0]["comm_time_s_median"] == 0.0
    assert "no_sync" in out["runs"][1]["comm_method"]


def test_stored_runs_carry_what_calibration_needs(ddp_sweep):
    out, db = ddp_sweep
    runs = RunStore(db).list(kind="train")
    assert [r["layout"]["world_size"] for r in runs] == [1, 2] and {r["status"] for r in runs} == {"ok"}
    run = runs[1]
    assert run["model"] == {**gpt_spec("tiny").model_dump(), "params": gpt_spec("tiny").params, "preset": "tiny"}
    for key in ("micro_batch", "world_size", "strategy", "precision", "activation_checkpointing", "device_type",
                "device_name"):
        assert key in run["layout"], key
    for key in ("step_time_s_median", "tokens_per_s", "peak_memory_gb"):  # what the sweep printed is what it stored
        assert run["metrics"][key] == out["runs"][1][key], key
    assert len(run["fingerprint"]) == 12 and run["hardware"]["cpu_model"]
    assert run["software"]["torch"].startswith("2.13") and run["software"]["scaleright"]


def test_efficiency_from_stored_runs_is_speedup_over_relative_size(ddp_sweep):
    out, db = ddp_sweep
    runs = RunStore(db).list(kind="train", status="ok")
    t1, t2 = (r["metrics"]["tokens_per_s"] for r in runs)
    expected = (t2 / t1) / (2 / 1)
    assert out["scaling_efficiency"]["2"] == pytest.approx(expected)
    assert scaling_efficiency(speedup=t2 / t1, world_size=2) == pytest.approx(expected)
    [group] = scaling_report(runs, price_usd_per_gpu_hour=2.0, job_tokens=1e6)
    _row1, row2 = group["rows"]
    assert row2["scaling_efficiency"] == pytest.approx(expected)
    assert row2["job_cost_usd"] == pytest.approx(2 * 2.0 * 1e6 / t2 / 3600)


def test_report_command_prints_table_json_and_self_contained_html(ddp_sweep, cli, tmp_path):
    _, db = ddp_sweep
    page = tmp_path / "report.html"
    proc = cli("bench", "report", "--db", db, "--price-usd-per-gpu-hour", "2.5", "--html", page, "--json")
    assert proc.returncode == 0, proc.stderr
    [group] = json.loads(proc.stdout)
    assert [r["world_size"] for r in group["rows"]] == [1, 2] and group["key"]["strategy"] == "ddp"
    html = page.read_text()
    assert "<svg" in html and "<script" not in html and "http://" not in html
    charts = {ET.fromstring(s)[0].text: ET.fromstring(s) for s in re.findall(r"<svg\b.*?</svg>", html, re.S)}
    assert set(charts) == {"Speedup against world size", "Scaling efficiency = speedup / (N / N_base)",
                           "Cost per job against world size"}  # the cost chart because a price was given
    speedup = [t.text for t in charts["Speedup against world size"].iter("text")]
    assert {"1", "2"} <= set(speedup) and "group 1" in speedup and "ideal (linear)" in speedup  # ticks, legend
    tips = [t.text for t in charts["Speedup against world size"].iter("title")][1:]
    assert [t.split(":")[0] for t in tips] == ["group 1, N=1", "group 1, N=2"]  # hover values per measured point
    assert "Price $2.50 per GPU-hour" in html
    table = cli("bench", "report", "--db", db)
    assert table.returncode == 0 and "speedup" in table.stdout and "100%" in table.stdout
    assert render_html([]).startswith("<!DOCTYPE html>")


def test_runs_list_show_and_export(ddp_sweep, cli, tmp_path):
    _, db = ddp_sweep
    listed = json.loads(cli("runs", "list", "--db", db, "--json").stdout)
    assert [r["layout"]["world_size"] for r in listed] == [1, 2]
    shown = json.loads(cli("runs", "show", listed[1]["id"], "--db", db).stdout)
    assert shown == listed[1]
    out = tmp_path / "runs.csv"
    assert cli("runs", "export", "--format", "csv", "--out", out, "--db", db).returncode == 0
    assert [r["layout.world_size"] for r in csv.DictReader(io.StringIO(out.read_text()))] == ["1", "2"]
    assert json.loads(cli("runs", "export", "--format", "json", "--db", db).stdout) == listed
    assert "train" in cli("runs", "list", "--db", db).stdout
    missing = cli("runs", "show", "99", "--db", db)
    assert missing.returncode == 2 and missing.stderr.strip().startswith("error: no run with id 99")


def test_fsdp_full_shard_at_two_ranks_with_bf16_and_recompute(tmp_path):
    store = RunStore(tmp_path / "runs.sqlite")
    out = run_train_bench({"model": gpt_spec("tiny"), "strategy": "fsdp", "nproc": (2,), "steps": 3, "warmup": 1,
                           "device": "cpu", "precision": "bf16", "activation_checkpointing": True}, store=store)
    [run] = out["runs"]
    assert run["world_size"] == 2 and run["strategy"] == "fsdp-full"
    # 2 ranks x micro-batch 8 x 64 tokens (tiny) per measured step
    assert run["tokens_per_s"] == pytest.approx(2 * 8 * 64 / run["step_time_s_median"])
    [stored] = store.list("train")
    assert stored["layout"]["strategy"] == "fsdp-full" and stored["layout"]["activation_checkpointing"] is True
    assert stored["layout"]["precision"] == "bf16" and stored["layout"]["backend"] == "gloo"


def test_single_strategy_at_one_rank(tmp_path):
    out = run_train_bench({"model": gpt_spec("tiny", layers=1), "strategy": "single", "nproc": (1,), "steps": 2,
                           "warmup": 0, "device": "cpu"})
    [run] = out["runs"]
    assert run["world_size"] == 1 and run["run_id"] is None
    assert run["tokens_per_s"] == pytest.approx(8 * 64 / run["step_time_s_median"])
    assert run["step_time_s_p10"] <= run["step_time_s_median"] <= run["step_time_s_p90"]
    assert out["scaling_efficiency"] == {"1": 1.0}
