"""The top-level Python API: the public names are the reviewed set and each resolves to scaleright's own object,
``import scaleright`` stays light, docs/api.md's examples run as written, a result's ``to_dict()`` is what the
matching command prints with ``--json``, and an API error is the CLI's message where the check is shared."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import scaleright
from tests.cli_helpers import CLI_ONLY, fresh_modules, run_main

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "api.md"

# The reviewed public API: adding or removing a name is a deliberate change of this list (and of docs/api.md).
PUBLIC = {
    "ScalerightError", "InputError", "__version__",
    "Catalog", "get_gpu", "load_model", "Layout", "LoraConfig", "Framework", "framework_of", "load_calibration",
    "estimate_memory", "estimate_train", "estimate_infer", "simulate", "plan_scenario", "parse_scenario",
    "load_scenario", "export_plan",
    "MemoryResult", "TrainResult", "InferResult", "SimulateResult", "PlanResult",
}  # fmt: skip
RESULT_FUNCTIONS = {"estimate_memory": "MemoryResult", "estimate_train": "TrainResult",
                    "estimate_infer": "InferResult", "simulate": "SimulateResult", "plan_scenario": "PlanResult"}


def test_all_is_the_reviewed_public_api():
    assert set(scaleright.__all__) == PUBLIC and len(scaleright.__all__) == len(PUBLIC)
    assert sorted(scaleright.__all__) == sorted(set(dir(scaleright)) & PUBLIC)


def test_every_public_name_resolves_to_a_scaleright_object():
    for name in scaleright.__all__:
        obj = getattr(scaleright, name)
        if name != "__version__":
            assert getattr(obj, "__module__", "").startswith("scaleright."), name
    with pytest.raises(AttributeError):
        _ = scaleright.no_such_name


def test_each_result_function_is_documented_with_its_result_type():
    doc = DOC.read_text()
    for fn, result in RESULT_FUNCTIONS.items():
        assert re.search(rf"\| `{fn}\(.*\| `{result}`", doc), fn
        assert getattr(scaleright, fn).__annotations__["return"] == result  # postponed annotations: the name


def test_import_scaleright_loads_no_model_code():
    model_code = ("numpy", "pydantic", "scaleright.estimate", "scaleright.plan", "scaleright.results", "scaleright.api")
    assert fresh_modules("import scaleright", model_code) == ([], [])


def test_the_api_imports_no_cli_library():
    """Each result function, its catalog and calibration resolution included, and the scenario parser, run in a
    fresh interpreter that then holds none of the CLI's modules (typer, its click, rich, scaleright.cli)."""
    code = ("import scaleright as sr\n"
            "import scaleright.api, scaleright.results, scaleright.plan.scenario\n"
            f"sr.plan_scenario({str(ROOT / 'examples' / 'full-finetune-13b.yaml')!r}, calibration='default')\n"
            "sr.estimate_memory('llama-2-7b', gpu='h100-sxm')\n"
            "sr.estimate_train('llama-2-7b', gpu='h100-sxm')\n"
            "sr.estimate_infer('llama-2-7b', gpu='h100-sxm', input_len=64, output_len=8)\n"
            "sr.simulate('llama-2-7b', gpu='h100-sxm', rate=2.0, requests=16)\n"
            "try:\n    sr.estimate_train('llama-2-7b', catalog='/nonexistent-catalog-dir')\n"
            "except sr.InputError as exc:\n    print(exc)\n")  # fmt: skip
    lines, held = fresh_modules(code, CLI_ONLY)
    assert lines[0] == "catalog=/nonexistent-catalog-dir: directory not found", lines[0]
    assert held == [], held


@pytest.mark.parametrize("block", re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S),
                         ids=lambda b: b.splitlines()[2][:40] if len(b.splitlines()) > 2 else b[:40])
def test_the_docs_examples_run(block, capsys):
    exec(compile(block, str(DOC), "exec"), {})
    assert capsys.readouterr().out.strip()  # each example prints its answer


def _cli_json(args, monkeypatch, capsys) -> dict:
    code, out, err = run_main([*args, "--json"], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize(("call", "args"), [
    (lambda: scaleright.estimate_memory("llama-3.1-8b", gpu="h100-sxm", task="lora",
                                        layout=scaleright.Layout(dp=4, zero=3), seq_len=2048),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--task", "lora", "--gpus", "4",
      "--zero", "3", "--seq-len", "2048"]),
    (lambda: scaleright.estimate_memory("llama-3.1-70b", gpu="a100-80gb", layout=scaleright.Layout(tp=2)),
     ["estimate", "memory", "--model", "llama-3.1-70b", "--gpu", "a100-80gb", "--gpus", "2", "--tp", "2"]),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", gpu="l40s", task="inference", batch=8, seq_len=1024),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "l40s", "--task", "inference", "--batch", "8",
      "--seq-len", "1024"]),
    (lambda: scaleright.estimate_train("llama-3.1-70b", gpu="h100-sxm", tokens=1e9,
                                       layout=scaleright.Layout(tp=8, pp=2, dp=4, global_batch=64)),
     ["estimate", "train", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--gpus", "64", "--tp", "8", "--pp",
      "2", "--global-batch", "64", "--tokens", "1e9"]),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", gpu="h100-sxm", gpus=4, input_len=512, output_len=128,
                                       batch="max"),
     ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "4", "--input-len", "512",
      "--output-len", "128", "--batch", "max"]),
    (lambda: scaleright.simulate("llama-3.1-8b", gpu="h100-sxm", rate=3.0, requests=80, seed=1,
                                 slo_ttft_ms=200.0, slo_tpot_ms=40.0),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "3", "--requests", "80",
      "--seed", "1", "--slo-ttft-ms", "200", "--slo-tpot-ms", "40"]),
], ids=["memory-lora", "memory-hints", "memory-inference", "train", "infer", "simulate"])  # fmt: skip
def test_a_result_to_dict_is_the_commands_json(call, args, monkeypatch, capsys):
    api = call().to_dict()
    cli = _cli_json(args, monkeypatch, capsys)
    if args[0] == "serve":  # the only difference: the API names its argument where the CLI names its flag
        assert api.pop("price_source") == "catalog on-demand: " + cli.pop("price_source").split(": ", 1)[1]
    assert api == cli


def test_a_plan_result_to_dict_is_the_plans_json(monkeypatch, capsys):
    scenario = ROOT / "examples" / "lora-7b-one-gpu.yaml"
    result = scaleright.plan_scenario(scenario)
    cli = _cli_json(["plan", str(scenario)], monkeypatch, capsys)
    assert result.recommendation == scaleright.PlanResult.model_validate(cli).recommendation
    assert scaleright.plan_scenario(scaleright.load_scenario(scenario)).recommendation == result.recommendation
    api = result.to_dict()
    for d in (api, cli):  # the search's own timing differs run to run
        for k in ("wall_s", "cpu_s", "layouts_per_s"):
            d["search"].pop(k)
    assert api == cli


@pytest.mark.parametrize(("call", "args", "flag"), [
    (lambda: scaleright.get_gpu("h100-sxn"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxn"], None),
    (lambda: scaleright.estimate_train("llama-3.1-8b", gpu="h100-sxn"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxn"], None),
    (lambda: scaleright.estimate_infer("llama-3.1-8x", input_len=8, output_len=8),
     ["estimate", "infer", "--model", "llama-3.1-8x", "--input-len", "8", "--output-len", "8"], None),
    (lambda: scaleright.estimate_train("llama-3.1-8b", layout=scaleright.Layout(tp=3, dp=1)),
     ["estimate", "train", "--model", "llama-3.1-8b", "--gpus", "3", "--tp", "3"], None),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", layout=scaleright.Layout(tp=3, dp=1)),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--gpus", "3", "--tp", "3"], None),
    (lambda: scaleright.estimate_train("llama-3.1-8b", calibration="no-such-profile"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--calibration", "no-such-profile"], None),
    (lambda: scaleright.plan_scenario("no/such/scenario.yaml"), ["plan", "no/such/scenario.yaml"], None),
    (lambda: scaleright.estimate_train("llama-3.1-8b", precision="bf17"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--precision", "bf17"], "--precision"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", seq_len=0),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--seq-len", "0"], "--seq-len"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, engine="no-such-engine"),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--engine", "no-such-engine"], "--engine"),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", gpus=4, pp=3, input_len=8, output_len=8),
     ["estimate", "infer", "--model", "llama-3.1-8b", "--gpus", "4", "--pp", "3", "--input-len", "8",
      "--output-len", "8"], None),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", gpus=64, pp=64, input_len=8, output_len=8),
     ["estimate", "infer", "--model", "llama-3.1-8b", "--gpus", "64", "--pp", "64", "--input-len", "8",
      "--output-len", "8"], None),
    # the argument checks the CLI calls (scaleright.api.check_*): the same line, the flag named where the API names
    # the argument
    (lambda: scaleright.estimate_train("llama-3.1-8b", tokens=float("inf")),
     ["estimate", "train", "--model", "llama-3.1-8b", "--tokens", "inf"], "--tokens"),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", input_len=8, output_len=8, batch="all"),
     ["estimate", "infer", "--model", "llama-3.1-8b", "--input-len", "8", "--output-len", "8", "--batch", "all"],
     "--batch"),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", tp=0, input_len=8, output_len=8),
     ["estimate", "infer", "--model", "llama-3.1-8b", "--tp", "0", "--input-len", "8", "--output-len", "8"], "--tp"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", task="inference", precision="fp7"),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--task", "inference", "--precision", "fp7"], "--precision"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, slo_ttft_ms=-1.0),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--slo-ttft-ms=-1"], "--slo-ttft-ms"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, diurnal_amplitude=2.0),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--diurnal-amplitude", "2"],
     "--diurnal-amplitude"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, requests=0),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--requests", "0"], "--requests"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, precision="tf32"),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--precision", "tf32"], "--precision"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, gpu_memory_utilization=1.5),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--gpu-memory-utilization", "1.5"],
     "--gpu-memory-utilization"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", task="inference"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--task", "inference"], "--task"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", framework="megatron-3000"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--framework", "megatron-3000"], "--framework"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", framework="megatron-3000"),
     ["estimate", "memory", "--model", "llama-3.1-8b", "--framework", "megatron-3000"], "--framework"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", catalog="/no/such/catalog"),
     ["estimate", "train", "--model", "llama-3.1-8b", "--catalog", "/no/such/catalog"], "--catalog"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", catalog=""),
     ["estimate", "train", "--model", "llama-3.1-8b", "--catalog", ""], "--catalog"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, diurnal_period_s=0.0),
     ["serve", "simulate", "--model", "llama-3.1-8b", "--rate", "1", "--diurnal-period-s", "0"],
     "--diurnal-period-s"),
], ids=["get_gpu", "gpu", "model", "layout-train", "layout-memory", "calibration", "scenario", "precision", "seq_len",
        "engine", "pp-divides", "pp-layers", "tokens", "batch-word", "tp", "inference-precision", "slo",
        "diurnal-amplitude", "requests", "serve-precision", "memory-share", "train-task", "train-framework",
        "memory-framework", "catalog", "catalog-empty", "diurnal-period"])  # fmt: skip
def test_an_api_error_is_the_clis_message(call, args, flag, monkeypatch, capsys):
    """The same line; where the CLI names its flag (``--seq-len``) the API names the argument (``seq_len``)."""
    with pytest.raises(scaleright.InputError) as err:
        call()
    code, _, cli_err = run_main(args, monkeypatch, capsys)
    expected = cli_err.strip().removeprefix("error: ")
    if flag is not None:
        assert expected.startswith(flag) and expected[len(flag)] in "=: "
        expected = flag[2:].replace("-", "_") + expected.removeprefix(flag)
    assert code == 2 and str(err.value) == expected


def test_a_scenario_error_names_the_field_as_the_cli_does(tmp_path, monkeypatch, capsys):
    bad = {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 1e8, "seq_len": 0}}
    path = tmp_path / "bad.yaml"
    path.write_text(json.dumps(bad))  # JSON is YAML
    with pytest.raises(scaleright.InputError) as from_file:
        scaleright.plan_scenario(path)
    code, _, cli_err = run_main(["plan", str(path)], monkeypatch, capsys)
    assert code == 2 and cli_err.strip() == f"error: {from_file.value}" and "training.seq_len" in cli_err
    with pytest.raises(scaleright.InputError, match=r"training\.seq_len"):
        scaleright.plan_scenario(bad)


@pytest.mark.parametrize(("call", "match"), [
    (lambda: scaleright.estimate_train("llama-3.1-8b", tokens=float("inf")), r"^tokens=inf must be a finite"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", task="inference", layout=scaleright.Layout(zero=3)),
     r"^layout\.zero=3 applies to training; task='inference' does not use it \(drop it\)$"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", task="inference",
                                        layout=scaleright.Layout(offload_activations=True)),
     r"^layout\.offload_activations applies to training; task='inference' does not use it"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", task="inference", framework="megatron-core"),
     r"^framework='megatron-core' applies to training; task='inference' does not use it"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", task="inference", lora=scaleright.LoraConfig()),
     r"^lora applies to task lora or qlora; task='inference' does not use it \(drop it\)$"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", gpu="gh200", layout=scaleright.Layout(zero=1,
                                                                                               offload_optimizer=True)),
     r"^layout\.offload_optimizer on gh200: the catalog gives it no PCIe host link \(pcie_gen\)"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", layout=scaleright.Layout(zero=5)),
     r"^layout\.zero=5 not allowed; allowed: 0, 1, 2, 3$"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", layout=scaleright.Layout(recompute="some")),
     r"^layout\.recompute='some' not allowed; allowed: none, selective, full, op-selective$"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", batch=4),
     r"^batch=4 applies to task='inference'; task='pretrain' does not use it \(drop it\)$"),
    (lambda: scaleright.estimate_infer("llama-3.1-8b", input_len=8, output_len=8, batch="all"),
     r"^batch='all' must be a positive integer or 'max'$"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, rps=2.0), r"^simulate: unknown option 'rps'; known: "),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, slo_ttft_ms=-1.0),
     r"^slo_ttft_ms=-1.0 must be a finite positive number$"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, burstiness=0.0),
     r"^burstiness=0.0 must be a finite positive number$"),
    (lambda: scaleright.simulate("llama-3.1-8b", rate=1.0, router="random"),
     r"^router='random' not allowed; allowed: "),
    (lambda: scaleright.estimate_train("llama-3.1-8b", layout=scaleright.Layout(sequence_parallel=True)),
     r"^layout\.sequence_parallel splits activations over tensor parallelism; it needs tp > 1 \(got tp=1\)$"),
    (lambda: scaleright.estimate_memory("llama-3.1-8b", layout=scaleright.Layout(dp=2**21)),
     r"^layout\.dp must be <= 1,048,576 \(.*\); got 2097152$"),
    (lambda: scaleright.estimate_train("llama-3.1-8b", layout=scaleright.Layout(dp=2**10, cp=2**11)),
     r"^layout\.gpus must be <= 1,048,576 \(.*\); got 2097152$"),
], ids=["tokens", "inference-layout", "inference-offload", "inference-framework", "inference-lora",
        "offload-no-host-link", "zero-stage", "recompute", "training-batch", "infer-batch", "option", "slo",
        "burstiness", "router", "sequence-parallel", "dp-bound", "gpus-bound"])  # fmt: skip
def test_api_arguments_are_checked_by_name(call, match):
    with pytest.raises(scaleright.InputError, match=match):
        call()
