"""The ``scaleright`` command line: JSON contracts of catalog / estimate / plan, and bad input as one line + exit 2.

Successful commands run in-process on ``scaleright.cli.main.app`` with typer's ``CliRunner``. A ``ScalerightError``
becomes "one line on stderr, exit 2" only in ``main()``, so error paths run ``main()`` itself (in-process, with
``sys.argv`` patched), and a few of them once more as ``python -m scaleright`` subprocesses to pin the real entry
point. Expected numbers come from arithmetic written here (seed formulas, datasheet facts), not from the CLI.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from scaleright.cli.main import app, main

REPO = Path(__file__).resolve().parents[1]
EXAMPLES_DIR = REPO / "examples"

runner = CliRunner()


def _json(args: list[str]):
    result = runner.invoke(app, args)
    assert result.exit_code == 0, f"{args}: exit {result.exit_code}\n{result.output}\n{result.exception!r}"
    return json.loads(result.stdout)


def _main(args: list[str], monkeypatch, capsys) -> tuple[int, str, str]:
    """Run ``main()`` as the console script does; (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["scaleright", *args])
    with pytest.raises(SystemExit) as info:
        main()
    out = capsys.readouterr()
    code = info.value.code
    return (0 if code is None else code), out.out, out.err


# ---------------------------------------------------------------------------------------------------------------
# catalog
# ---------------------------------------------------------------------------------------------------------------


def test_catalog_gpus_json_lists_every_accelerator_with_units_in_the_keys():
    gpus = _json(["catalog", "gpus", "--json"])
    assert len(gpus) >= 34
    for g in gpus:
        assert {"id", "aliases", "name", "memory_gb", "hbm_bandwidth_tb_per_s", "dense_tflops", "tdp_w"} <= set(g)
        assert isinstance(g["dense_tflops"], dict)
        assert isinstance(g["aliases"], list)
    ids = [g["id"] for g in gpus]
    assert len(ids) == len(set(ids))
    h100 = next(g for g in gpus if g["id"] == "h100-sxm")
    assert h100["memory_gb"] == pytest.approx(80 * 2**30 / 1e9, rel=1e-4)  # datasheet "80 GB" HBM3 = 80 GiB, in SI GB
    assert "bf16" in h100["dense_tflops"]


def test_catalog_models_json_has_shapes_and_exact_parameter_counts():
    models = _json(["catalog", "models", "--json"])
    keys = {"name", "family", "params_total", "params_active", "layers", "hidden", "heads", "kv_heads", "vocab"}
    for m in models:
        assert keys <= set(m)
        assert m["params_active"] <= m["params_total"]
    llama = next(m for m in models if m["name"] == "llama-3.1-8b")
    assert llama["params_total"] == pytest.approx(8.03e9, rel=0.005)  # Meta: 8.03 B parameters
    assert (llama["layers"], llama["hidden"], llama["heads"], llama["kv_heads"]) == (32, 4096, 32, 8)


def test_catalog_prices_for_the_4090_include_the_seed_marketplace_rate():
    rows = _json(["catalog", "prices", "--gpu", "rtx-4090", "--json"])
    assert rows
    assert all(r["gpu_id"] == "rtx-4090" for r in rows)
    # seed: "renting at US$0.18/hr" on a marketplace
    seed = [r for r in rows if r["kind"] == "marketplace" and r["usd"] == pytest.approx(0.18)]
    assert seed, rows
    assert seed[0]["unit"] == "usd_per_gpu_hour"
    assert seed[0]["source"]


# ---------------------------------------------------------------------------------------------------------------
# estimate memory
# ---------------------------------------------------------------------------------------------------------------

BREAKDOWN = {"weights", "gradients", "optimizer", "gathered", "activations", "kv_cache", "overhead"}


def test_estimate_memory_json_total_is_the_sum_of_its_breakdown():
    d = _json(["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--json"])
    assert {"fits", "total_gb", "gpu_memory_gb", "headroom_gb", "memory_breakdown_gb"} <= set(d)
    b = d["memory_breakdown_gb"]
    assert set(b) == BREAKDOWN
    assert d["total_gb"] == pytest.approx(sum(b.values()), rel=1e-9)
    assert d["gpu_memory_gb"] == pytest.approx(80 * 2**30 / 1e9, rel=1e-4)  # 80 GiB in SI GB
    assert d["headroom_gb"] == pytest.approx(d["gpu_memory_gb"] - d["total_gb"], rel=1e-9)
    # seed: ~16 bytes per parameter for mixed-precision Adam (2 weights + 2 gradients + 12 optimizer)
    assert b["weights"] + b["gradients"] + b["optimizer"] == pytest.approx(16 * 8.03, rel=0.01)
    assert d["fits"] is False  # 128 GB of states alone exceed 80 GB


def test_estimate_memory_for_inference_has_a_kv_cache_and_no_training_state():
    d = _json(["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference", "--batch", "8",
               "--seq-len", "4096", "--json"])  # fmt: skip
    b = d["memory_breakdown_gb"]
    assert set(b) == BREAKDOWN
    assert b["gradients"] == 0 and b["optimizer"] == 0
    # KV cache: K and V x 32 layers x 8 KV heads x 128 head dim x 2 bytes (bf16) per token, 8 x 4096 tokens
    kv_bytes = 2 * 32 * 8 * 128 * 2 * 8 * 4096
    assert b["kv_cache"] == pytest.approx(kv_bytes / 1e9, rel=1e-6)
    assert b["weights"] == pytest.approx(2 * 8.03, rel=0.005)  # bf16 weights
    assert d["total_gb"] == pytest.approx(sum(b.values()), rel=1e-9)
    assert d["fits"] is True


# ---------------------------------------------------------------------------------------------------------------
# estimate train
# ---------------------------------------------------------------------------------------------------------------

TRAIN_KEYS = {"fits", "memory_gb_per_gpu", "memory_breakdown_gb", "step_time_s", "time_breakdown_s", "tokens_per_s",
              "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu",
              "scaling_efficiency", "train_time_h", "gpu_hours"}  # fmt: skip


def test_estimate_train_json_throughput_identities():
    tokens = 1.0e9
    d = _json(["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--zero", "3",
               "--global-batch", "64", "--tokens", str(tokens), "--json"])  # fmt: skip
    assert TRAIN_KEYS <= set(d)
    assert d["fits"] is True
    assert d["tokens_per_s"] == pytest.approx(d["tokens_per_s_per_gpu"] * 8, rel=1e-9)
    assert d["train_time_h"] == pytest.approx(tokens / d["tokens_per_s"] / 3600, rel=1e-9)
    assert d["gpu_hours"] == pytest.approx(d["train_time_h"] * 8, rel=1e-9)
    assert d["step_time_s"] == pytest.approx(sum(d["time_breakdown_s"].values()), rel=1e-6)
    assert d["memory_gb_per_gpu"] == pytest.approx(sum(d["memory_breakdown_gb"].values()), rel=1e-6)
    assert d["memory_gb_per_gpu"] <= 80
    # MFU = model FLOP/s achieved / peak; H100 SXM dense bf16 peak 989 TFLOP/s (datasheet)
    assert d["mfu"] == pytest.approx(d["model_tflops_per_gpu"] / 989, rel=0.01)
    assert 0 < d["mfu"] <= d["hfu"] <= 1
    assert 0 < d["scaling_efficiency"] <= 1 + 1e-9


def test_estimate_train_of_a_layout_that_does_not_fit_is_a_result_not_an_error():
    result = runner.invoke(app, ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "rtx-4090", "--json"])
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    assert d["fits"] is False
    assert d["reason"]
    assert "25.8 GB" in d["reason"]  # names the GPU's memory: 24 GiB = 25.8 GB
    # 70 B x 16 bytes ~ 1.1 TB (seed: "over 1.1 TB of GPU memory") against 24 GB
    assert d["memory_gb_per_gpu"] > 16 * 70


def test_estimate_train_table_output_runs():
    result = runner.invoke(app, ["estimate", "train", "--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "2"])
    assert result.exit_code == 0, result.output
    assert "tokens/s" in result.stdout


# ---------------------------------------------------------------------------------------------------------------
# estimate infer
# ---------------------------------------------------------------------------------------------------------------

INFER_KEYS = {"fits", "layout", "memory_gb_per_gpu", "max_batch", "ttft_s", "tpot_s", "e2e_latency_s",
              "output_tokens_per_s", "total_tokens_per_s", "requests_per_s"}  # fmt: skip


def test_estimate_infer_picks_the_layout_with_the_most_output_throughput():
    i, o = 1000, 200
    d = _json(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "4",
               "--input-len", str(i), "--output-len", str(o), "--batch", "16", "--json"])  # fmt: skip
    assert INFER_KEYS <= set(d)
    fitting = [a for a in d["alternatives"] if a["fits"]]
    assert len(fitting) >= 2, "tp 1, 2 and 4 all fit an 8B model on 80 GB GPUs"
    best = max(fitting, key=lambda a: a["output_tokens_per_s"])
    assert d["layout"] == best["layout"]
    assert d["output_tokens_per_s"] == pytest.approx(best["output_tokens_per_s"], rel=1e-12)
    lay = d["layout"]
    assert lay["tp"] * lay["pp"] * lay["replicas"] == 4
    # every request reads I prompt tokens and writes O tokens
    assert d["total_tokens_per_s"] == pytest.approx(d["requests_per_s"] * (i + o), rel=1e-9)
    assert d["output_tokens_per_s"] == pytest.approx(d["requests_per_s"] * o, rel=1e-9)


def test_estimate_infer_with_a_given_tp_uses_it():
    d = _json(["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "2", "--tp", "2",
               "--input-len", "512", "--output-len", "128", "--json"])  # fmt: skip
    assert d["layout"]["tp"] == 2
    assert d["layout"]["replicas"] == 1
    assert d["ttft_s"] > 0 and d["tpot_s"] > 0


# ---------------------------------------------------------------------------------------------------------------
# plan
# ---------------------------------------------------------------------------------------------------------------

OPTION_KEYS = {"gpu", "gpus", "layout", "time_h", "cost_usd", "cost_per_1m_tokens_usd", "energy_kwh", "co2e_kg"}


def test_plan_json_keeps_the_contract():
    d = _json(["plan", str(EXAMPLES_DIR / "llama70b-full-finetune.yaml"), "--json"])
    assert {"scenario", "recommendation", "options", "pareto", "explanations"} <= set(d)
    rec = d["recommendation"]
    assert OPTION_KEYS <= set(rec)
    assert rec["time_h"] <= 168  # deadline_h in the file
    assert rec["cost_usd"] == pytest.approx(rec["gpus"] * rec["price_usd_per_gpu_hour"] * rec["time_h"], rel=1e-9)
    for o in d["options"]:
        assert OPTION_KEYS <= set(o)
    assert d["scenario"]["model"] == "llama-3.1-70b"


def test_plan_table_output_names_the_recommendation():
    result = runner.invoke(app, ["plan", str(EXAMPLES_DIR / "lora-7b-one-gpu.yaml")])
    assert result.exit_code == 0, result.output
    assert "Recommendation" in result.stdout
    assert "defaults used" in result.stdout


def test_plan_html_writes_a_standalone_page(tmp_path):
    pytest.importorskip("scaleright.plan.report")
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["plan", str(EXAMPLES_DIR / "full-finetune-13b.yaml"), "--html", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert out.is_file()
    assert out.read_text().startswith("<!DOCTYPE html>")


# ---------------------------------------------------------------------------------------------------------------
# --help
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        [], ["catalog"], ["catalog", "gpus"], ["catalog", "prices"], ["catalog", "models"], ["estimate"],
        ["estimate", "memory"], ["estimate", "train"], ["estimate", "infer"], ["plan"],
    ],
    ids=lambda a: " ".join(a) or "scaleright",
)  # fmt: skip
def test_help_of_every_command_exits_zero(args):
    result = runner.invoke(app, [*args, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize("args", [["catalog", "gpus"], ["estimate", "train"], ["plan"]], ids=" ".join)
def test_help_shows_no_value_after_an_on_off_flag(args):
    """``--json`` takes no value, so help must not print ``--json <bool>``; options that take one keep their type."""
    result = runner.invoke(app, [*args, "--help"], terminal_width=200)
    assert result.exit_code == 0, result.output
    json_line = next(line for line in result.output.splitlines() if "--json" in line)
    assert "<bool>" not in json_line and "<bool>" not in result.output
    assert "<path>" in result.output or "<int>" in result.output or "<text>" in result.output


# ---------------------------------------------------------------------------------------------------------------
# Bad input: exit 2, one line on stderr, nothing on stdout, no traceback
# ---------------------------------------------------------------------------------------------------------------


@pytest.fixture
def bad_catalog(tmp_path) -> Path:
    d = tmp_path / "catalog"
    d.mkdir()
    (d / "gpus.yaml").write_text("- id: my-gpu\n  memory_gb: [80\n")
    return d


@pytest.fixture
def unknown_key_scenario(tmp_path) -> Path:
    p = tmp_path / "typo.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining:\n  tokens: 1.0e8\n  foo: 3\n")
    return p


INFER = ["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "100", "--output-len", "10"]

BAD_INPUT = {
    "unknown model": (["estimate", "memory", "--model", "llama-3.1-8bb"],
                      r"unknown model 'llama-3\.1-8bb'; closest: llama-3\.1-8b"),
    "unknown gpu": (["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-foo"],
                    r"unknown GPU 'h100-foo'; closest: .*h100"),
    "tp=3 for 32 heads": (["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "3", "--tp", "3"],
                          r"tp\(3\) does not divide num_attention_heads\(32\)"),
    "tp=3 for 32 heads (infer)": ([*INFER, "--gpus", "3", "--tp", "3"], r"tp\(3\) does not divide .*\(32\)"),
    "tp*pp*cp does not divide gpus": (
        ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "4", "--tp", "2", "--pp", "3"],
        r"tp\(2\) \* pp\(3\) \* cp\(1\) = 6 does not divide gpus\(4\)"),
    "precision fp7": (["estimate", "train", "--model", "llama-3.1-8b", "--precision", "fp7"],
                      r"--precision='fp7' not allowed; allowed: .*bf16"),
    "batch foo": ([*INFER, "--batch", "foo"], r"--batch='foo' must be a positive integer or 'max'"),
    "catalog not a directory": (["catalog", "gpus", "--catalog", "/nonexistent/catalog"],
                                r"--catalog=/nonexistent/catalog: directory not found"),
    # tracebacks that became one line
    "tp=0 (infer)": ([*INFER, "--gpus", "8", "--tp", "0"], r"--tp=0 must be a positive integer"),
    "html is a directory": (["plan", str(EXAMPLES_DIR / "lora-7b-one-gpu.yaml"), "--html", str(EXAMPLES_DIR)],
                            r"--html=.*examples: is a directory; give a file path"),
    "html in a missing directory": (["plan", str(EXAMPLES_DIR / "lora-7b-one-gpu.yaml"), "--html",
                                     "/nonexistent/x.html"],
                                    r"--html=/nonexistent/x\.html: directory '/nonexistent' does not exist"),
    "bench report html in a missing directory": (
        ["bench", "report", "--db", "/nonexistent/runs.sqlite", "--html", "/nonexistent/x.html"],
        r"--html=/nonexistent/x\.html: directory '/nonexistent' does not exist"),
    "runs db is a directory": (["runs", "list", "--db", str(EXAMPLES_DIR)],
                               r"examples is a directory; a run database is a file"),
    # silently accepted values that are now rejected
    "tokens nan": (["estimate", "train", "--model", "llama-3.1-8b", "--tokens", "nan"],
                   r"--tokens=nan must be a finite positive number"),
    "tokens inf": (["estimate", "train", "--model", "llama-3.1-8b", "--tokens", "inf"],
                   r"--tokens=inf must be a finite positive number"),
    "inter-node bandwidth nan": (["estimate", "train", "--model", "llama-3.1-8b", "--inter-node-gbps-per-gpu", "nan"],
                                 r"--inter-node-gbps-per-gpu=nan must be a finite positive number"),
    "empty lora targets": (["estimate", "train", "--model", "llama-3.1-8b", "--task", "lora", "--lora-targets", ""],
                           r"--lora-targets='' names no projection; give at least one of q, k, v, o, gate, up, down"),
    "fsdp with zero 1": (["estimate", "train", "--model", "llama-3.1-8b", "--fsdp", "--zero", "1"],
                         r"--fsdp is ZeRO-3; drop --zero or set --zero 3"),
    "seq-len too large": (["estimate", "train", "--model", "llama-3.1-8b", "--seq-len", "100000000"],
                          r"--seq-len must be <= 16,777,216 \(2\*\*24 tokens; .*\); got 100000000"),
    "input-len too large": (["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "100000000",
                             "--output-len", "10"], r"--input-len must be <= 16,777,216 .*; got 100000000"),
    "gpus too many": (["estimate", "train", "--model", "llama-3.1-8b", "--gpus", str(10**24)],
                      r"--gpus must be <= 1,048,576 \(2\*\*20; .*\); got an integer of about 25 digits"),
    # misleading messages, now naming what is wrong
    "pp does not divide gpus (infer)": ([*INFER, "--gpus", "4", "--pp", "3"],
                                        r"^error: pp\(3\) does not divide gpus\(4\)$"),
    "pp above layers (infer)": ([*INFER, "--gpus", "64", "--pp", "64"], r"pp\(64\) > num_hidden_layers\(32\)"),
    "plan a directory": (["plan", str(EXAMPLES_DIR)], r"is a directory, expected a YAML file"),
    "concurrency 0": ([*INFER, "--concurrency", "0"], r"--concurrency=0 must be a positive integer"),
    "zero with inference": (["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference", "--zero", "3"],
                            r"--zero=3 applies to training; --task inference does not use it"),
    "ep with inference": (["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference", "--ep", "2"],
                          r"--ep=2 applies to training"),
    "micro-batch with inference": (["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference",
                                    "--micro-batch", "4"], r"--micro-batch=4 applies to training"),
    "recompute with inference": (["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference",
                                  "--recompute", "full"], r"--recompute=full applies to training"),
    "batch with training": (["estimate", "memory", "--model", "llama-3.1-8b", "--batch", "4"],
                            r"--batch=4 applies to --task inference; --task pretrain does not use it"),
}  # fmt: skip


_GPU_FIELDS = """\
- id: my-gpu
  name: My GPU
  vendor: me
  architecture: hopper
  memory_gb: {memory_gb}
  memory_type: HBM3
  hbm_bandwidth_tb_per_s: 3.35
  dense_tflops: {{fp32: 67, tf32: 495, bf16: 989, fp16: 989, fp8: 1979, int8: 1979, fp4: null}}
  intra_node_link: nvlink
  intra_node_gb_per_s_per_gpu: 450
  gpus_per_node: 8
  nic_gbps_per_gpu: 400
  form_factor: SXM
  source: a test
"""


def _config(tmp_path: Path, **fields) -> str:
    """A copy of the catalog's llama-3.1-8b config.json with ``fields`` changed; its path."""
    from scaleright.catalog.models import load_model_config

    cfg, _ = load_model_config("llama-3.1-8b")
    p = tmp_path / "config.json"
    p.write_text(json.dumps({**cfg, **fields}))
    return str(p)


def _file(tmp_path: Path, name: str, content: str | bytes) -> Path:
    p = tmp_path / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode())
    return p


BINARY = b"\xff\xfe\x00\x01 not text"
SCENARIO = "model: llama-3.1-8b\ntask: lora\n"

# name -> (tmp_path -> args, pattern): bad files written to tmp_path
BAD_FILES = {
    "binary scenario": (lambda t: ["plan", str(_file(t, "bin.yaml", BINARY))],
                        r"bin\.yaml: not a UTF-8 text file"),
    "binary model config": (lambda t: ["estimate", "memory", "--model", str(_file(t, "bin.json", BINARY))],
                            r"bin\.json: not a UTF-8 text file"),
    "binary prices.csv": (lambda t: ["catalog", "prices", "--catalog", str(_file(t, "cat/prices.csv", BINARY).parent)],
                          r"prices\.csv: not a UTF-8 text file"),
    "binary gpus.yaml": (lambda t: ["catalog", "gpus", "--catalog", str(_file(t, "cat/gpus.yaml", BINARY).parent)],
                         r"gpus\.yaml: not a UTF-8 text file"),
    "zero heads": (lambda t: ["estimate", "memory", "--model", _config(t, num_attention_heads=0)],
                   r"config\.json: field 'num_attention_heads' must be an integer from 1 to 10,000,000, got 0"),
    "dropout not a number": (lambda t: ["estimate", "memory", "--model", _config(t, attention_dropout="x")],
                             r"config\.json: field 'attention_dropout' must be a number from 0 to 1, got 'x'"),
    "hidden size 1e30": (lambda t: ["estimate", "memory", "--model", _config(t, hidden_size=10**30)],
                         r"config\.json: field 'hidden_size' must be an integer from 1 to 10,000,000"),
    "string boolean": (lambda t: ["estimate", "memory", "--model", _config(t, tie_word_embeddings="false")],
                       r"config\.json: field 'tie_word_embeddings' must be true or false, got 'false'"),
    "calibration efficiency 0": (
        lambda t: ["estimate", "train", "--model", "gpt2", "--calibration",
                   str(_file(t, "cal.json", '{"gemm_efficiency": 0}'))],
        r"cal\.json: calibration gemm_efficiency=0 must be greater than 0 and at most 1"),
    "calibration efficiency nan": (
        lambda t: ["estimate", "train", "--model", "gpt2", "--calibration",
                   str(_file(t, "cal.json", '{"memory_efficiency": NaN}'))],
        r"cal\.json: line 1: NaN is not a JSON number"),
    "gpu memory .inf": (lambda t: ["catalog", "gpus", "--catalog",
                                   str(_file(t, "cat/gpus.yaml", _GPU_FIELDS.format(memory_gb=".inf")).parent)],
                        r"gpus\.yaml: my-gpu\.memory_gb: Input should be a finite number"),
    "gpu memory .nan": (lambda t: ["catalog", "gpus", "--catalog",
                                   str(_file(t, "cat/gpus.yaml", _GPU_FIELDS.format(memory_gb=".nan")).parent)],
                        r"gpus\.yaml: my-gpu\.memory_gb: Input should be a finite number"),
    "scenario tokens .inf": (lambda t: ["plan", str(_file(t, "s.yaml", SCENARIO + "training: {tokens: .inf}\n"))],
                             r"s\.yaml: training\.tokens: Input should be a finite number"),
    "scenario empty gpu_types": (
        lambda t: ["plan", str(_file(t, "s.yaml", SCENARIO + "training: {tokens: 1.0e8}\n"
                                                             "constraints: {gpu_types: []}\n"))],
        r"s\.yaml: constraints\.gpu_types: empty list; give at least one GPU or omit the key"),
    "scenario negative price": (
        lambda t: ["plan", str(_file(t, "s.yaml", SCENARIO + "training: {tokens: 1.0e8}\n"
                                     "pricing: {price_usd_per_gpu_hour: {h100-sxm: -1}}\n"))],
        r"s\.yaml: pricing\.price_usd_per_gpu_hour\.h100-sxm: Input should be greater than or equal to 0"),
    "scenario infinite purchase": (
        lambda t: ["plan", str(_file(t, "s.yaml", SCENARIO + "training: {tokens: 1.0e8}\n"
                                     "pricing: {purchase_usd_per_gpu: {h100-sxm: .inf}}\n"))],
        r"s\.yaml: pricing\.purchase_usd_per_gpu\.h100-sxm: Input should be a finite number"),
}  # fmt: skip


def _assert_one_line_error(code: int, out: str, err: str, pattern: str) -> None:
    import re

    assert code == 2, f"exit {code}; stderr: {err!r}"
    assert out == ""
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got {lines!r}"
    assert lines[0].startswith("error: ")
    assert re.search(pattern, lines[0]), f"{pattern!r} not in {lines[0]!r}"


@pytest.mark.parametrize("case", list(BAD_INPUT), ids=list(BAD_INPUT))
def test_bad_input_is_one_line_on_stderr_and_exit_2(case, monkeypatch, capsys):
    args, pattern = BAD_INPUT[case]
    _assert_one_line_error(*_main(args, monkeypatch, capsys), pattern)


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_bad_file_is_one_line_on_stderr_and_exit_2(case, tmp_path, monkeypatch, capsys):
    make_args, pattern = BAD_FILES[case]
    _assert_one_line_error(*_main(make_args(tmp_path), monkeypatch, capsys), pattern)


def test_kv_precision_help_states_the_fp32_default():
    result = runner.invoke(app, ["estimate", "infer", "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "default: fp32 with --precision fp32, else bf16" in " ".join(result.output.split())


def test_runs_show_and_export_offer_json(monkeypatch):
    for cmd in ("show", "export"):
        result = runner.invoke(app, ["runs", cmd, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "--json" in result.output


def test_a_scenario_with_an_unknown_key_is_one_line_naming_file_and_key(unknown_key_scenario, monkeypatch, capsys):
    code, out, err = _main(["plan", str(unknown_key_scenario)], monkeypatch, capsys)
    _assert_one_line_error(code, out, err, r"typo\.yaml: training\.foo: unknown key")


def test_a_missing_scenario_file_is_one_line(tmp_path, monkeypatch, capsys):
    code, out, err = _main(["plan", str(tmp_path / "absent.yaml")], monkeypatch, capsys)
    _assert_one_line_error(code, out, err, r"scenario file '.*absent\.yaml' not found")


def test_a_malformed_user_catalog_is_one_line_naming_the_file(bad_catalog, monkeypatch, capsys):
    code, out, err = _main(["catalog", "gpus", "--catalog", str(bad_catalog)], monkeypatch, capsys)
    _assert_one_line_error(code, out, err, r"gpus\.yaml")


def test_a_good_command_through_main_exits_zero(monkeypatch, capsys):
    code, out, err = _main(["catalog", "models", "--json"], monkeypatch, capsys)
    assert code == 0
    assert err == ""
    assert any(m["name"] == "gpt2" for m in json.loads(out))


def _subprocess(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "scaleright", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


@pytest.mark.parametrize("case", ["unknown model", "tp=3 for 32 heads"])
def test_python_m_scaleright_turns_errors_into_one_line_and_exit_2(case):
    args, pattern = BAD_INPUT[case]
    p = _subprocess(args)
    _assert_one_line_error(p.returncode, p.stdout, p.stderr, pattern)


def test_python_m_scaleright_reports_a_bad_scenario_file(unknown_key_scenario):
    p = _subprocess(["plan", str(unknown_key_scenario)])
    _assert_one_line_error(p.returncode, p.stdout, p.stderr, r"typo\.yaml: training\.foo: unknown key")
