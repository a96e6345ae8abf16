"""Typed results: what ``--json`` prints is exactly what ``scaleright schema NAME`` publishes. Every example
scenario's plan validates against the plan schema (with the jsonschema library, independent of pydantic) and reads
back into the model unchanged; each published schema is a valid JSON Schema that admits no undeclared key; a key
added, dropped or retyped (in a result, or by the code producing it) fails loudly."""

from __future__ import annotations

import contextlib
import copy
import io
import json
import math
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError

from scaleright.results import RESULTS, result_json, result_model
from tests.cli_helpers import assert_one_line, run_main

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema validates the published schemas independently")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))

# One command per result (small, fast inputs), each printing one JSON object with --json.
COMMANDS = {
    "memory": ["estimate", "memory", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--task", "qlora"],
    "train": ["estimate", "train", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "8", "--zero", "3",
              "--tokens", "1e9"],
    "infer": ["estimate", "infer", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--gpus", "2", "--input-len",
              "512", "--output-len", "128"],
    "simulate": ["serve", "simulate", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--rate", "2", "--requests",
                 "60"],
    "plan": ["plan", str(ROOT / "examples" / "home-lab-4090.yaml")],
}


def _json(args, monkeypatch, capsys) -> tuple[dict, str]:
    code, out, err = run_main([*args, "--json"], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out), out


def _schema(name, monkeypatch, capsys) -> dict:
    code, out, err = run_main(["schema", name], monkeypatch, capsys)
    assert code == 0, err
    return json.loads(out)


def _errors(schema: dict, doc: object) -> list[str]:
    return [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]


@pytest.fixture(scope="module")
def outputs() -> dict[str, dict]:
    """Each command's --json object (run once for the module)."""
    mp, found = pytest.MonkeyPatch(), {}
    cap = _Capture()
    try:
        for name, args in COMMANDS.items():
            found[name] = json.loads(cap.run(mp, [*args, "--json"]))
    finally:
        mp.undo()
    return found


class _Capture:
    """``run_main`` for a module-scoped fixture (capsys is function-scoped): stdout of one in-process run."""

    def run(self, mp: pytest.MonkeyPatch, args: list[str]) -> str:
        from scaleright.cli.main import main

        mp.setattr(sys, "argv", ["scaleright", *args])
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as info:
            main()
        assert (info.value.code or 0) == 0
        return buf.getvalue()


@pytest.mark.parametrize("scenario", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_plan_validates_against_the_published_schema(scenario, monkeypatch, capsys):
    schema = _schema("plan", monkeypatch, capsys)
    doc, text = _json(["plan", str(scenario)], monkeypatch, capsys)
    assert _errors(schema, doc) == []
    model = result_model("plan").model_validate_json(text)  # and pydantic reads it back unchanged
    assert model.to_dict() == doc


@pytest.mark.parametrize("name", list(RESULTS))
def test_the_schema_command_prints_a_valid_json_schema(name, monkeypatch, capsys):
    schema = _schema(name, monkeypatch, capsys)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema" and schema["type"] == "object"

    def closed(node: object, where: str) -> None:  # every declared object admits no other key
        if isinstance(node, dict):
            if "properties" in node:
                assert node.get("additionalProperties") is False, where
            for k, v in node.items():
                closed(v, f"{where}/{k}")
        elif isinstance(node, list):
            for i, v in enumerate(node):
                closed(v, f"{where}/{i}")

    closed(schema, name)


@pytest.mark.parametrize("name", ["memory", "train", "infer", "simulate"])
def test_each_commands_json_validates_against_its_schema(name, outputs, monkeypatch, capsys):
    assert _errors(_schema(name, monkeypatch, capsys), outputs[name]) == []


def test_an_unknown_schema_name_is_one_line(monkeypatch, capsys):
    assert_one_line(*run_main(["schema", "plans"], monkeypatch, capsys),
                    r"^error: NAME='plans' not allowed; allowed: memory, train, infer, plan, simulate, capacity, "
                    r"fleet$")


def _corruptions(name: str, doc: dict):
    """(what, corrupted copy): an extra key, a missing key, a nested extra key, a retyped value."""
    nested = {"memory": "memory_breakdown_gb", "train": "time_breakdown_s", "infer": "layout", "simulate": "ttft_ms",
              "plan": "search"}[name]  # fmt: skip
    first = next(iter(doc))
    for what in ("extra", "missing", "nested extra", "retyped"):
        bad = copy.deepcopy(doc)
        if what == "extra":
            bad["deployment_note"] = "not declared"
        elif what == "missing":
            del bad[first]
        elif what == "nested extra":
            bad[nested]["surprise_s"] = 1.0
        else:
            *path, key = {"memory": ["total_gb"], "train": ["mfu"], "infer": ["ttft_s"], "simulate": ["requests"],
                          "plan": ["recommendation", "cost_usd"]}[name]  # fmt: skip
            node = bad
            for k in path:
                node = node[k]
            node[key] = "fast"
        yield what, bad


@pytest.mark.parametrize("name", list(COMMANDS))
def test_a_deliberate_extra_missing_or_retyped_key_fails(name, outputs, monkeypatch, capsys):
    doc = outputs[name]
    schema = _schema(name, monkeypatch, capsys)
    assert result_json(name, doc) == doc  # the real output passes
    for what, bad in _corruptions(name, doc):
        with pytest.raises(ValidationError):
            result_model(name).from_dict(bad)
        assert _errors(schema, bad), f"{name}: the schema admits a {what} key"


def test_a_key_drift_in_the_estimate_fails_the_json_loudly(monkeypatch, capsys):
    from scaleright.estimate.train import TrainEstimate

    real = TrainEstimate.as_dict
    monkeypatch.setattr(TrainEstimate, "as_dict", lambda self: real(self) | {"tokens_per_joule": 1.0})
    with pytest.raises(ValidationError, match="tokens_per_joule"):
        run_main(COMMANDS["train"] + ["--json"], monkeypatch, capsys)
    monkeypatch.setattr(TrainEstimate, "as_dict", lambda self: {k: v for k, v in real(self).items() if k != "mfu"})
    with pytest.raises(ValidationError, match="mfu"):
        run_main(COMMANDS["train"] + ["--json"], monkeypatch, capsys)


def test_optional_keys_stay_absent_and_a_training_plan_has_no_serving_keys(outputs):
    plan = outputs["plan"]  # home-lab-4090: a LoRA job, owned hardware
    rec = plan["recommendation"]
    assert "kv_cache" not in rec["memory_breakdown_gb"] and "ttft_s" not in rec and "spot" not in rec
    assert rec["pricing_kind"] == "own" and "ownership_inputs" in rec and "true_cost_usd_per_gpu_hour" in rec
    model = result_model("plan").from_dict(plan)
    assert type(model.recommendation).__name__ == "TrainingOption" and model.recommendation.spot is None
    assert "trainable_params" in outputs["memory"]  # qlora: the adapters' parameters


def test_non_finite_numbers_are_null_in_json_and_nan_on_the_model(outputs):
    doc = copy.deepcopy(outputs["train"])
    doc["step_time_s"] = math.inf
    doc["tokens_per_s"] = float("nan")
    doc["gpu_hours"] = None  # an optional number: None stays None
    model = result_model("train").from_dict(doc)
    assert model.step_time_s == math.inf and math.isnan(model.tokens_per_s) and model.gpu_hours is None
    out = model.to_dict()
    assert out["step_time_s"] is None and out["tokens_per_s"] is None and out["gpu_hours"] is None
    json.dumps(out, allow_nan=False)  # valid JSON
    back = result_model("train").model_validate_json(json.dumps(out))
    assert math.isnan(back.step_time_s) and back.gpu_hours is None


def test_an_integer_stays_an_integer_and_a_boolean_is_not_a_number(outputs):
    doc = copy.deepcopy(outputs["train"])
    doc["step_time_s"] = 2
    assert json.dumps(result_json("train", doc)["step_time_s"]) == "2"  # not "2.0": the bytes --json printed
    doc["step_time_s"] = True
    with pytest.raises(ValidationError):
        result_model("train").from_dict(doc)
    doc = copy.deepcopy(outputs["train"])
    doc["gpus"] = 8.0  # a float is not a count
    with pytest.raises(ValidationError):
        result_model("train").from_dict(doc)


@pytest.mark.parametrize("scenario", ["spot-training-preemptions", "chat-service-8b"])
def test_validating_keeps_the_bytes_the_planner_printed_before(scenario):
    """``--json`` used to print the planner's dict (non-finite numbers as null); through the model it prints the
    same bytes: the same keys in the same order, an int still an int."""
    from scaleright.cli.common import _clean
    from scaleright.estimate.calibration import load_profile
    from scaleright.plan.planner import plan
    from scaleright.plan.scenario import load_scenario
    from scaleright.results.plan import PlanResult

    res = plan(load_scenario(ROOT / "examples" / f"{scenario}.yaml"))
    record = load_profile(None).record()
    before = json.dumps(_clean(res.as_dict() | {"calibration": record}), indent=2, allow_nan=False)
    after = json.dumps(PlanResult.of(res, calibration=record).to_dict(), indent=2, allow_nan=False)
    assert after == before


def test_plain_converts_numpy_and_tuples_to_exact_python_types():
    """numpy's float64 is a float subclass and bool_ / int64 are not Python types: each comes out as the exact
    Python type (strict validation refuses the numpy ones), tuples and arrays as lists; plain values unchanged."""
    import numpy as np

    from scaleright.results.common import plain

    got = plain({"a": np.float64(1.5), "b": (np.int64(2), np.bool_(True)), "c": np.array([0.25, 4.0]),
                 3: [None, "x", True, 7, math.inf]})  # fmt: skip
    assert got == {"a": 1.5, "b": [2, True], "c": [0.25, 4.0], "3": [None, "x", True, 7, math.inf]}
    assert [type(v) for v in (got["a"], *got["b"], *got["c"])] == [float, int, bool, float, float]
    assert [type(v) for v in got["3"]] == [type(None), str, bool, int, float]
