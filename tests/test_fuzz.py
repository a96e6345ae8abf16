"""The CLI's promise under generated and hostile input: exit 0 with finite numbers, or exit 2 with one line; no
input file changed; nothing known to be invalid accepted.

Four Hypothesis properties (scenario files, config.json files, user catalog directories, argument vectors) with a
bounded, derandomized example count; the issue's reproducers as explicit cases; and checks of the harness itself.
The long run is ``python benchmarks/fuzz.py`` (10,000 inputs), from the same generators.
"""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from fuzz import strategies as fs
from fuzz.harness import _changes, _check_json, run_case, run_cli
from fuzz.strategies import DIR, Case, Link

# No shrinking: each input already carries one mutation, and a shrink reruns the CLI hundreds of times.
FUZZ = settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _keeps_promise(case: Case) -> None:
    out = run_case(case)
    assert out.kind in ("ok", "rejected"), (
        f"{out.kind} ({out.detail or 'no detail'}{' at ' + out.where if out.where else ''}) on: {case.why}\n"
        f"{case.reproducer(limit=800)}\nstderr: {out.stderr[-600:]}"
    )


@FUZZ
@given(fs.scenarios)
def test_scenario_files_end_in_a_result_or_one_line(case: Case) -> None:
    _keeps_promise(case)


@FUZZ
@given(fs.configs)
def test_config_json_files_end_in_a_result_or_one_line(case: Case) -> None:
    _keeps_promise(case)


@FUZZ
@given(fs.catalogs)
def test_user_catalogs_end_in_a_result_or_one_line(case: Case) -> None:
    _keeps_promise(case)


@FUZZ
@given(fs.cli_args)
def test_argument_vectors_end_in_a_result_or_one_line(case: Case) -> None:
    _keeps_promise(case)


# ---- the issue's reproducers, one case each ----------------------------------------------------------------------

_TRAIN = {"name": "t", "model": "gpt2", "task": "pretrain", "training": {"tokens": 1e8, "global_batch": 16},
          "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 2}}  # fmt: skip
_INFER = {"name": "i", "model": "gpt2", "task": "inference", "inference": {"requests_per_s": 1.0},
          "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 2}}  # fmt: skip
_GPT2 = fs._shipped()["gpt2"]
_LLAMA = fs._shipped()["llama-3.1-8b"]
_ESTIMATE = ("estimate", "memory", "--model", "gpt2", "--json")
_BIG = fs._digits(5001)


def _scenario(base: dict, section: str, key: str, value: object, *extra: str, invalid: bool = True) -> Case:
    doc = {k: dict(v) if isinstance(v, dict) else v for k, v in base.items()}
    if section:
        doc[section][key] = value
    else:
        doc[key] = value
    return Case("scenario", ("plan", "s.yaml", *extra), (("s.yaml", fs.to_yaml(doc) + "\n"),), invalid)


def _config(cfg: dict, *argv: str, raw: str | None = None, invalid: bool = True) -> Case:
    text = raw if raw is not None else fs.to_json(cfg) + "\n"
    return Case("config", ("estimate", "memory", "--model", "m.json", *argv), (("m.json", text),), invalid)


def _catalog(*files: tuple[str, object], argv: tuple[str, ...] = ("catalog", "gpus", "--catalog", "cat", "--json"),
             invalid: bool = True) -> Case:  # fmt: skip
    return Case("catalog", argv, (("cat", DIR), *files), invalid)  # type: ignore[arg-type]


def _export(*, drop: str = "", fmt: str = "torchrun", **fields: object) -> Case:
    plan = json.loads(fs._plan_json("training"))
    plan["recommendation"].pop(drop, None)
    plan["recommendation"].update(fields)
    return Case("cli", ("export", "plan.json", "--to", fmt), (("plan.json", json.dumps(plan) + "\n"),), True)


_PRICE_ROW = "h100-sxm,on-demand,2.5,,,usd_per_gpu_hour,fuzzcloud,,{date},fuzz,{notes}"
_DB = ("runs.sqlite", fs._runs_db("ok"))

ISSUE_CASES: dict[str, Case] = {
    "long --model path": Case("cli", ("estimate", "memory", "--model", "m" * 300 + ".json"), (), True),
    "long --catalog path": Case("cli", ("catalog", "gpus", "--catalog", "c" * 300), (), True),
    "long --db path": Case("cli", ("runs", "list", "--db", "r" * 300 + ".sqlite"), (), True),
    "long --calibration": Case("cli", ("estimate", "train", "--model", "gpt2", "--calibration", "k" * 300), (), True),
    "long --html path": _scenario(_TRAIN, "", "name", "t", "--html", "h" * 300 + ".html"),
    "long scenario model path": _scenario(_TRAIN, "", "model", "x" * 300 + ".json"),
    "long calibrate --name": Case(
        "cli",
        ("calibrate", "--name", "n" * 300, "--gpu", "h100-sxm", "--db", "runs.sqlite"),
        (_DB,),
        True,
        outputs=(".xdg/",),
    ),
    "training.global_batch 2**63": _scenario(_TRAIN, "training", "global_batch", 2**63, "--json"),
    "constraints.max_gpus 2**62": _scenario(_TRAIN, "constraints", "max_gpus", 2**62, "--json"),
    "requests_per_s 1e308": _scenario(_INFER, "inference", "requests_per_s", 1e308, "--json"),
    "scenario nested 5000 deep": _scenario(_TRAIN, "training", "tokens", fs._deep(5000), "--json"),
    "config nested 5000 deep": _config(_GPT2 | {"extra": fs._deep(5000)}, "--json"),
    "scenario int of 5001 digits": _scenario(_TRAIN, "training", "seq_len", _BIG, "--json"),
    "config int of 5001 digits": _config(_GPT2 | {"n_layer": _BIG}, "--json"),
    "model_type a list": _config(_GPT2 | {"model_type": ["gpt2"]}, "--json"),
    "model_type a mapping": _config(_GPT2 | {"model_type": {"a": 1}}, "--json"),
    "csv field over 131072 chars": _catalog(
        ("cat/prices.csv", fs.PRICE_HEADER + "\n" + _PRICE_ROW.format(date="2025-01-01", notes="n" * 140_000) + "\n"),
        invalid=False,
    ),
    "calibration file with a 5001-digit int": Case(
        "cli",
        ("estimate", "train", "--model", "gpt2", "--calibration", "cal.json", "--json"),
        (("cal.json", '{"parameters": {"gemm_efficiency": ' + _BIG.json + "}}\n"),),
        True,
    ),
    "runs show 2**63": Case("cli", ("runs", "show", "9223372036854775808", "--db", "runs.sqlite"), (_DB,), True),
    "stored row JSON that does not parse": Case(
        "cli", ("runs", "list", "--db", "runs.sqlite", "--json"), (("runs.sqlite", fs._runs_db("bad_json")),), True
    ),
    "calibration directory is a file": Case(
        "cli",
        ("estimate", "train", "--model", "gpt2", "--calibration", "mycal", "--json"),
        ((".xdg/scaleright/calibrations", "a file\n"),),
        True,
    ),
    "markup in the scenario name": _scenario(_TRAIN, "", "name", "[/bold]", invalid=False),
    "markup in a model path": Case(
        "config", ("estimate", "memory", "--model", "[/bold].json"), (("[/bold].json", fs.to_json(_GPT2)),), False
    ),
    "max_gpus: yes": _scenario(_TRAIN, "constraints", "max_gpus", fs.VALUES[0], "--json"),
    "--lora-rank -5 with pretrain": Case("cli", (*_ESTIMATE, "--task", "pretrain", "--lora-rank", "-5"), (), True),
    "--micro-batch 2**63": Case("cli", (*_ESTIMATE, "--micro-batch", str(2**63)), (), True),
    "--sequence-parallel with tp=1": Case("cli", (*_ESTIMATE, "--sequence-parallel"), (), True),
    "hidden size not divisible by heads": _config(_LLAMA | {"hidden_size": 4097}, "--json"),
    "n_embd and hidden_size both given": _config(_LLAMA | {"n_embd": 8192}, "--json"),
    "price date 9999-99-99": _catalog(
        ("cat/prices.csv", fs.PRICE_HEADER + "\n" + _PRICE_ROW.format(date="9999-99-99", notes="") + "\n")
    ),
    "catalog gpus.yaml is a directory": _catalog(("cat/gpus.yaml", DIR)),
    "catalog gpus.yaml is a broken link": _catalog(("cat/gpus.yaml", Link("nowhere.yaml"))),
    "catalog file misnamed gpu.yaml": _catalog(("cat/gpu.yaml", "[]\n")),
    "--catalog ''": Case("cli", ("catalog", "gpus", "--catalog", ""), (), True),
    "duplicate YAML key": Case(
        "scenario", ("plan", "s.yaml", "--json"), (("s.yaml", fs.to_yaml(_TRAIN) + "\nname: again\n"),), True
    ),
    "family disagrees with model_type": _catalog(
        ("cat/models.yaml", fs.to_yaml_list([fs._model_entry() | {"family": "gpt2"}])),
        ("cat/models/fuzz-model.json", fs.to_json(fs.FUZZ_MODEL_CONFIG)),
        argv=("catalog", "models", "--catalog", "cat", "--json"),
    ),
    "runs list --db typo.sqlite": Case("cli", ("runs", "list", "--db", "typo.sqlite"), (), True),
    "plan S.yaml --html S.yaml": _scenario(_TRAIN, "", "name", "t", "--html", "s.yaml"),
    # found by benchmarks/fuzz.py (10,000 inputs) after the reproducers above were fixed
    "YAML alias bomb": Case("scenario", ("plan", "s.yaml"), (("s.yaml", fs.to_yaml(_INFER) + "\n" + "".join(
        f"b{i}: &b{i} [{', '.join(['x'] * 9 if i == 0 else [f'*b{i - 1}'] * 9)}]\n" for i in range(9))),), True),
    "launch_year: yes": _catalog(("cat/gpus.yaml", fs.to_yaml_list([fs._h100_entry() | {"launch_year": True}]))),
    "a later dropout key out of range": _config(_GPT2 | {"embd_pdrop": 5}, "--json"),
    "--optimizer bogus with qlora": Case("cli", (*_ESTIMATE, "--task", "qlora", "--optimizer", "bogus"), (), True),
    "bench report price 1e308": Case(
        "cli", ("bench", "report", "--db", "runs.sqlite", "--price-usd-per-gpu-hour", "1e308", "--json"), (_DB,), True
    ),
    "--nproc 1,,2": Case(
        "cli", ("bench", "train", "--dry-run", "--model", "tiny", "--device", "cpu", "--nproc", "1,,2"), (), True
    ),
    "compare on runs without step times": Case(
        "cli", ("compare", "--gpu", "h100-sxm", "--db", "runs.sqlite"), (("runs.sqlite", fs._runs_db("incomplete")),),
        True,
    ),
    # found by benchmarks/fuzz.py (2,000 inputs) once it generated export, dashboard and the new estimate flags
    "export: plan without recommendation.gpus": _export(drop="gpus"),
    "export: recommendation.gpus a lone surrogate": _export(gpus="\ud800"),
    "export: recommendation.gpus 1e308": _export(gpus=1e308),
    "export: recommendation.layout yes": _export(layout=True),
    "export: plan without recommendation.layout": _export(drop="layout"),
    "export: recommendation.precision 2**62": _export(precision=2**62),
    "export: recommendation.precision with a NUL byte": _export(precision="nul\x00byte"),
    "export: recommendation.gpu with a newline": _export(gpu="h100\nrm -rf ~"),
    "export: recommendation.precision ''": _export(precision="", fmt="deepspeed"),
    "export: recommendation.layout.tp 'abc'": _export(layout={"tp": "abc"}, fmt="megatron"),
}


ISSUE_CASES = {name: dataclasses.replace(case, why=name) for name, case in ISSUE_CASES.items()}


@pytest.mark.parametrize("name", list(ISSUE_CASES))
def test_issue_reproducer_ends_in_a_result_or_one_line(name: str) -> None:
    _keeps_promise(ISSUE_CASES[name])


# ---- the harness itself ------------------------------------------------------------------------------------------


def test_a_valid_estimate_is_ok_and_a_bad_name_is_rejected() -> None:
    assert run_cli(_ESTIMATE).kind == "ok"
    out = run_cli(("estimate", "memory", "--model", "no-such-model"))
    assert (out.kind, out.exit_code) == ("rejected", 2)
    assert run_cli(("estimate", "memory", "--model", "no-such-model"), known_invalid=True).kind == "rejected"


def test_exit_0_on_a_known_invalid_input_is_silent_acceptance() -> None:
    assert run_cli(_ESTIMATE, known_invalid=True).kind == "silently_accepted"


def test_json_with_nan_infinity_or_negative_memory_breaks_the_promise() -> None:
    assert _check_json('{"a": [1, 2.5, {"b": null}]}') == ""
    assert "NaN" in _check_json('{"a": NaN}')
    assert "Infinity" in _check_json('{"a": [-Infinity]}')
    assert "negative memory" in _check_json('{"memory_breakdown_gb": {"weights": -1.0}}')
    assert "not JSON" in _check_json("table")


def test_changed_created_and_removed_files_are_reported_except_outputs() -> None:
    before = {"s.yaml": ("file", 1, 1, b"a"), "gone": ("file", 1, 1, b"")}
    after = {"s.yaml": ("file", 1, 2, b"b"), "new.sqlite": ("file", 1, 1, b""), "r.html": ("file", 1, 1, b"")}
    assert _changes(before, after, ("r.html",)) == ["gone removed", "new.sqlite created", "s.yaml modified"]
    assert _changes(before, before, ()) == []


def test_generation_is_deterministic_per_family_and_seed() -> None:
    for family in fs.FAMILIES:
        assert fs.generate(family, 3) == fs.generate(family, 3)
        assert len({fs.generate(family, i).why for i in range(30)}) > 5


def test_known_invalid_means_the_schema_forbids_it() -> None:
    count = fs.Spec("int", 1, False, 100)
    price = fs.Spec("float", 0, False, None, True)
    by_label = {v.label: v for v in fs.VALUES}
    assert fs.is_invalid(count, by_label["bool yes"]) and fs.is_invalid(count, by_label["int 2**63"])
    assert fs.is_invalid(count, by_label["float 2.5"]) and fs.is_invalid(count, by_label["int 0"])
    assert not fs.is_invalid(count, by_label["int 3"]) and not fs.is_invalid(count, by_label["numeric string '12'"])
    assert not fs.is_invalid(price, by_label["float 1e+308"]) and fs.is_invalid(price, by_label["float inf"])
    assert not fs.is_invalid(price, by_label["null"]) and fs.is_invalid(price, by_label["int -1"])
