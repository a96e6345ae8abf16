"""A fitted engine profile, stored by name, serves like a built-in one.

The story: ``bench serve`` measures a fake OpenAI server on loopback (known token timing: 10 ms to the first token
plus 0.1 ms per prompt token, 5 ms between tokens) into a run store; ``calibrate --serving --name fake-vllm`` fits
the vLLM profile to that run and stores it under the calibration directory with its provenance; ``calibrate list``
shows it; ``serve simulate --engine fake-vllm`` runs it and gives what the simulator gives for the stored factors
passed as an ``EngineProfile`` object (the stored file's numbers, read independently with ``json``); a fleet file
takes the name; an unknown engine is one line (exit 2) naming the built-in and the stored ones."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scaleright.estimate.engines import EngineProfile
from scaleright.serve.simulate import simulate
from tests.bench.fake_openai_server import FakeOpenAIServer, FakeTiming
from tests.cli_helpers import assert_one_line, run_main

SIM = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-len", "100", "--output-len", "5", "--rate", "4",
       "--requests", "20", "--seed", "3"]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    """A calibration directory holding ``fake-vllm`` fitted to one ``bench serve`` run of the fake server."""
    import contextlib
    import io
    import sys

    from scaleright.cli.main import main

    root = tmp_path_factory.mktemp("engines")
    cal_dir, db = root / "calibrations", root / "runs.sqlite"
    mp = pytest.MonkeyPatch()
    mp.setenv("SCALERIGHT_CALIBRATION_DIR", str(cal_dir))

    def cli(*args: str) -> str:
        mp.setattr(sys, "argv", ["scaleright", *args])
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), pytest.raises(SystemExit) as info:
            main()
        assert (info.value.code or 0) == 0, err.getvalue()
        return out.getvalue()

    try:
        with FakeOpenAIServer(FakeTiming(0.01, 1e-4, 0.005)) as srv:
            cli("bench", "serve", "--endpoint", srv.url, "--model", "fake-model", "--rate", "20", "--requests", "12",
                "--input-len", "100", "--output-len", "5", "--seed", "4", "--sim-model", "llama-3.1-8b", "--gpu",
                "h100-sxm", "--db", str(db), "--json")
        fitted = json.loads(cli("calibrate", "--serving", "--name", "fake-vllm", "--db", str(db), "--json"))
        yield {"dir": cal_dir, "db": db, "fitted": fitted, "cli": cli}
    finally:
        mp.undo()


@pytest.fixture
def cal_env(store, monkeypatch):
    monkeypatch.setenv("SCALERIGHT_CALIBRATION_DIR", str(store["dir"]))
    return store


def test_the_fit_is_stored_by_name_with_its_provenance(cal_env):
    path = cal_env["dir"] / "engines" / "fake-vllm.json"
    assert cal_env["fitted"]["path"] == str(path)
    body = json.loads(path.read_text())
    assert body["profile"]["name"] == "fake-vllm" and body["profile"]["status"] == "fitted"
    prov = body["provenance"]
    assert prov["base"] == "vllm" and prov["runs"] == [1] and prov["in_sample"] is True
    assert prov["engines"] == ["vllm 0.0.0-fake"] and prov["gpus"] == ["h100-sxm"]
    assert len(prov["runs_sha256"]) == 64
    for k in ("iteration_overhead_s", "hbm_fraction", "frontend_latency_s"):
        assert body["profile"][k] == prov["after"][k]  # the stored factors are the fitted ones
    assert prov["median_abs_pct_error_after"] <= prov["median_abs_pct_error_before"]


def test_calibrate_list_and_show_include_the_engine_profile(cal_env, monkeypatch, capsys):
    code, out, _ = run_main(["calibrate", "list", "--json"], monkeypatch, capsys)
    assert code == 0
    d = json.loads(out)
    [e] = d["engine_profiles"]
    assert e["name"] == "fake-vllm" and e["ok"] and e["provenance"]["base"] == "vllm"
    assert d["profiles"] == []  # a training calibration list is not confused by the engines/ directory
    code, out, _ = run_main(["calibrate", "list"], monkeypatch, capsys)
    assert code == 0 and "fake-vllm" in out and "Engine profiles" in out
    code, out, _ = run_main(["calibrate", "show", "fake-vllm", "--serving", "--json"], monkeypatch, capsys)
    assert code == 0 and json.loads(out)["profile"]["name"] == "fake-vllm"


def test_serve_simulate_takes_the_stored_name(cal_env, monkeypatch, capsys):
    code, out, err = run_main(["serve", "simulate", *SIM, "--engine", "fake-vllm", "--json"], monkeypatch, capsys)
    assert code == 0, err
    d = json.loads(out)
    assert d["engine"] == "fake-vllm" and d["engine_status"] == "fitted"
    p = json.loads((cal_env["dir"] / "engines" / "fake-vllm.json").read_text())["profile"]
    by_object = simulate_with(EngineProfile(**{**p, "grounded_in": tuple(p["grounded_in"])}))
    assert d["ttft_ms"] == pytest.approx(by_object.ttft_ms, rel=1e-12)
    assert d["tpot_ms"] == pytest.approx(by_object.tpot_ms, rel=1e-12)
    vllm = json.loads(run_main(["serve", "simulate", *SIM, "--json"], monkeypatch, capsys)[1])
    assert d["ttft_ms"]["mean"] != vllm["ttft_ms"]["mean"]  # the fitted factors are in use, not vLLM's


def simulate_with(profile: EngineProfile):
    from scaleright.catalog import get_gpu
    from scaleright.workload import load_model

    return simulate(load_model("llama-3.1-8b"), gpu=get_gpu("h100-sxm"), input_len=100, output_len=5, rate=4,
                    requests=20, seed=3, engine=profile)  # fmt: skip


def test_serve_capacity_and_a_fleet_file_take_the_stored_name(cal_env, monkeypatch, capsys, tmp_path):
    code, out, err = run_main(["serve", "capacity", "--model", "llama-3.1-8b", "--input-len", "100", "--output-len",
                               "5", "--slo-ttft-p99-ms", "500", "--slo-tpot-p99-ms", "100", "--requests", "50",
                               "--engine", "fake-vllm", "--json"], monkeypatch, capsys)  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["engine"] == "fake-vllm"
    f = tmp_path / "fleet.yaml"
    f.write_text("pools:\n  - {name: a, model: llama-3.1-8b, gpu: h100, replicas: 1, engine: fake-vllm}\n"
                 "services:\n  - {name: s, pools: [a], rate: 2, requests: 10, input_len: 100, output_len: 5}\n")
    code, out, err = run_main(["serve", "simulate", "--fleet", str(f), "--json"], monkeypatch, capsys)
    assert code == 0, err
    assert json.loads(out)["services"]["s"]["requests"] == 10


def test_an_unknown_engine_lists_built_in_and_stored_names(cal_env, monkeypatch, capsys):
    assert_one_line(*run_main(["serve", "simulate", *SIM, "--engine", "fake-vlm"], monkeypatch, capsys),
                    r"^error: --engine='fake-vlm' not allowed; allowed: vllm, sglang, trtllm, llama\.cpp \(built-in\); "
                    r"stored: fake-vllm \(calibrate --serving --name NAME stores one\)$")  # fmt: skip


def test_a_built_in_name_or_an_existing_one_is_refused_before_the_fit(cal_env, monkeypatch, capsys):
    db = str(cal_env["db"])
    assert_one_line(*run_main(["calibrate", "--serving", "--name", "vllm", "--db", db], monkeypatch, capsys),
                    r"^error: --name='vllm' names a built-in engine profile")
    assert_one_line(*run_main(["calibrate", "--serving", "--name", "fake-vllm", "--db", db], monkeypatch, capsys),
                    r"^error: --name=fake-vllm: an engine profile already exists at .*; pass --force")


def test_a_damaged_stored_profile_is_one_line_naming_the_field(cal_env, monkeypatch, capsys):
    d: Path = cal_env["dir"] / "engines"
    body = json.loads((d / "fake-vllm.json").read_text())
    body["profile"]["hbm_fraction"] = 1.5
    (d / "broken.json").write_text(json.dumps({**body, "profile": {**body["profile"], "name": "broken"}}))
    try:
        assert_one_line(*run_main(["serve", "simulate", *SIM, "--engine", "broken"], monkeypatch, capsys),
                        r"^error: engine profile .*broken\.json: hbm_fraction=1\.5 must lie in \(0, 1\]")
    finally:
        (d / "broken.json").unlink()


def test_delete_removes_only_a_stored_engine_profile(cal_env, monkeypatch, capsys):
    d: Path = cal_env["dir"] / "engines"
    (d / "copy.json").write_text((d / "fake-vllm.json").read_text().replace('"fake-vllm"', '"copy"'))
    code, out, err = run_main(["calibrate", "delete", "copy", "--serving"], monkeypatch, capsys)
    assert code == 0, err
    assert "deleted engine profile 'copy'" in out
    assert not (d / "copy.json").exists() and (d / "fake-vllm.json").exists()
    assert_one_line(*run_main(["calibrate", "delete", "nothing", "--serving"], monkeypatch, capsys),
                    r"^error: NAME=nothing: no engine profile of that name in .*; stored: fake-vllm$")


def test_the_fit_stored_without_the_fields_added_since_loads_simulates_and_shows(cal_env, monkeypatch, capsys):
    # the file as a scaleright before fused_elementwise, max_num_seqs, sequence_overhead_s and dequantize_above_rows
    # wrote it: the fake-vllm fit (vLLM base, which the fit left those fields at) with the four keys removed
    d: Path = cal_env["dir"] / "engines"
    body = json.loads((d / "fake-vllm.json").read_text())
    new = ("fused_elementwise", "max_num_seqs", "sequence_overhead_s", "dequantize_above_rows")
    assert all(k in body["profile"] for k in new)  # a profile written now holds them
    old = {k: v for k, v in body["profile"].items() if k not in new} | {"name": "fake-old"}
    (d / "fake-old.json").write_text(json.dumps({**body, "profile": old}))
    try:
        code, out, err = run_main(["serve", "simulate", *SIM, "--engine", "fake-old", "--json"], monkeypatch, capsys)
        assert code == 0, err
        assert [line for line in err.splitlines() if line.startswith("note:")] == [
            f"note: engine profile {d / 'fake-old.json'} was stored before fused_elementwise, max_num_seqs, "
            "sequence_overhead_s, dequantize_above_rows existed: fused_elementwise=False, max_num_seqs=256, "
            "sequence_overhead_s=0.0, dequantize_above_rows=None taken from its base, the built-in engine 'vllm', "
            "not fitted (refit it with calibrate --serving --name fake-old --force)"]
        full = json.loads(run_main(["serve", "simulate", *SIM, "--engine", "fake-vllm", "--json"], monkeypatch,
                                   capsys)[1])  # fmt: skip
        got = json.loads(out)
        for key in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "output_tokens_per_s"):
            assert got[key] == full[key]  # the removed fields held vLLM's values: the same simulation
        code, out, err = run_main(["calibrate", "show", "fake-old", "--serving"], monkeypatch, capsys)
        assert code == 0, err
        assert "Engine profile 'fake-old' (fitted from vllm" in out and "iteration_overhead_s" in out
    finally:
        (d / "fake-old.json").unlink()
