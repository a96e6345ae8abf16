"""Scenario files: every example loads, and every mistake a user can make in one is a one-line error that names
the file and the field (STYLE habits 3, 4 and 12).

Scenarios are built from a small valid mapping (``_training`` / ``_inference``) with one field changed, so each test
reads as "this one mistake gives this one message".
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from pydantic import ValidationError

from scaleright.errors import CatalogFileError, InputError, ScalerightError
from scaleright.plan.scenario import Scenario, load_scenario, parse_scenario

EXAMPLES_DIR = Path(__file__).resolve().parents[1] / "examples"
EXAMPLES = sorted(EXAMPLES_DIR.glob("*.yaml"))


def _training(**training) -> dict:
    """A minimal valid training scenario; ``training`` keys override the training section."""
    return {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 1.0e8, **training}}


def _inference(**inference) -> dict:
    """A minimal valid inference scenario; ``inference`` keys override the inference section."""
    return {"model": "llama-3.1-8b", "task": "inference", "inference": {"requests_per_s": 2.0, **inference}}


def _with(base: dict, path: str, value) -> dict:
    """``base`` with the dotted ``path`` set to ``value`` (sections created as needed)."""
    out = copy.deepcopy(base)
    *parents, leaf = path.split(".")
    node = out
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value
    return out


def _error(data: object, source: str = "scenario") -> str:
    with pytest.raises(CatalogFileError) as info:
        parse_scenario(data, source=source)
    msg = str(info.value)
    assert "\n" not in msg, f"error message is not one line: {msg!r}"
    return msg


# ---------------------------------------------------------------------------------------------------------------
# The shipped examples
# ---------------------------------------------------------------------------------------------------------------


def test_there_are_examples_to_check():
    assert len(EXAMPLES) >= 5, f"expected the shipped examples under {EXAMPLES_DIR}"


def _leaves(node: object, prefix: str = "") -> dict[str, object]:
    """Dotted path -> value of every leaf of a mapping (dicts of prices count as sections)."""
    if not isinstance(node, dict):
        return {prefix: node}
    out: dict[str, object] = {}
    for k, v in node.items():
        out.update(_leaves(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_loads_as_a_scenario(path: Path):
    scn = load_scenario(path)
    assert isinstance(scn, Scenario)
    # every value written in the file is the value the scenario holds (the file, read by PyYAML, is the reference)
    written = _leaves(yaml.safe_load(path.read_text(encoding="utf-8")))
    held = _leaves(scn.model_dump())
    assert written, path
    for key, value in written.items():
        if isinstance(value, str) and isinstance(held.get(key), float):
            value = float(value)  # PyYAML (YAML 1.1) reads 1.0e9 as a string; YAML 1.2, as scaleright does, a float
        assert held.get(key) == value, f"{path.name}: {key} is {held.get(key)!r}, the file says {value!r}"
    # and every field the file left out is reported as a default
    assert not set(written) & set(scn.defaults_used())
    if scn.task == "inference":
        assert scn.inference is not None and scn.training is None
    else:
        assert scn.training is not None and scn.inference is None
        t = written
        expected = t.get("training.tokens") or float(t["training.dataset_tokens"]) * t.get("training.epochs", 1.0)
        assert scn.training.total_tokens == pytest.approx(float(expected), rel=1e-12)


def test_dataset_tokens_times_epochs_is_the_job_size():
    scn = load_scenario(EXAMPLES_DIR / "lora-7b-one-gpu.yaml")
    # the file: dataset_tokens 5.0e7, epochs 3
    assert scn.training.total_tokens == pytest.approx(5.0e7 * 3)


def test_scenarios_are_frozen():
    scn = parse_scenario(_training())
    with pytest.raises(ValidationError, match="frozen"):
        scn.task = "pretrain"


# ---------------------------------------------------------------------------------------------------------------
# Unknown keys are rejected with their name
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "where"),
    [
        ("foo", "foo"),
        ("training.foo", "training.foo"),
        ("constraints.deadline_hours", "constraints.deadline_hours"),
        ("pricing.price_per_hour", "pricing.price_per_hour"),
    ],
)
def test_unknown_key_is_rejected_with_its_dotted_name(path, where):
    msg = _error(_with(_training(), path, 1), source="my.yaml")
    assert msg == f"my.yaml: {where}: unknown key"


def test_unknown_key_in_the_inference_section_is_rejected():
    with pytest.raises(CatalogFileError, match=r"^scenario: inference\.rate: unknown key$"):
        parse_scenario(_with(_inference(), "inference.rate", 3))


def test_unknown_key_in_a_file_names_the_file_and_the_key(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining:\n  tokens: 1.0e8\n  foo: 3\n")
    with pytest.raises(CatalogFileError, match=r"s\.yaml: training\.foo: unknown key"):
        load_scenario(p)


# ---------------------------------------------------------------------------------------------------------------
# Wrong types and out-of-range values name the field
# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        ("training.tokens", "lots", "training.tokens"),
        ("training.tokens", -5, "training.tokens"),
        ("training.tokens", 0, "training.tokens"),
        ("training.seq_len", 0, "training.seq_len"),
        ("training.seq_len", 2048.5, "training.seq_len"),
        ("training.global_batch", "big", "training.global_batch"),
        ("training.epochs", 0, "training.epochs"),
        ("training.lora_rank", 0, "training.lora_rank"),
        ("constraints.max_gpus", 0, "constraints.max_gpus"),
        ("constraints.deadline_h", -1, "constraints.deadline_h"),
        ("constraints.budget_usd", 0, "constraints.budget_usd"),
        ("constraints.gpu_types", "h100-sxm", "constraints.gpu_types"),
        ("constraints.gpus_per_node", 0, "constraints.gpus_per_node"),
        ("pricing.hours_per_day", 25, "pricing.hours_per_day"),
        ("pricing.hours_per_day", 0, "pricing.hours_per_day"),
        ("pricing.pue", 0.9, "pricing.pue"),
        ("pricing.load_fraction", 1.5, "pricing.load_fraction"),
        ("pricing.resale_fraction", -0.1, "pricing.resale_fraction"),
        ("pricing.electricity_usd_per_kwh", -0.1, "pricing.electricity_usd_per_kwh"),
        ("pricing.price_usd_per_gpu_hour", {"h100-sxm": "cheap"}, "pricing.price_usd_per_gpu_hour.h100-sxm"),
        ("pricing.price_usd_per_gpu_hour", {"h100-sxm": -1.0}, "pricing.price_usd_per_gpu_hour.h100-sxm"),
        ("pricing.price_usd_per_gpu_hour", {"h100-sxm": float("inf")}, "pricing.price_usd_per_gpu_hour.h100-sxm"),
        ("pricing.purchase_usd_per_gpu", {"h100-sxm": -1.0}, "pricing.purchase_usd_per_gpu.h100-sxm"),
        ("pricing.purchase_usd_per_gpu", {"h100-sxm": float("nan")}, "pricing.purchase_usd_per_gpu.h100-sxm"),
        ("training.tokens", float("inf"), "training.tokens"),
        ("training.tokens", float("nan"), "training.tokens"),
        ("constraints.budget_usd", float("inf"), "constraints.budget_usd"),
        ("pricing.horizon_months", float("inf"), "pricing.horizon_months"),
    ],
)
def test_wrong_type_or_range_names_the_field(path, value, field):
    msg = _error(_with(_training(), path, value))
    assert msg.startswith(f"scenario: {field}: "), msg


def test_infinite_training_tokens_are_rejected_not_planned():
    msg = _error(_with(_training(), "training.tokens", float("inf")))
    assert msg == "scenario: training.tokens: Input should be a finite number", msg


def test_an_empty_gpu_types_list_is_rejected_not_read_as_every_gpu():
    msg = _error(_with(_training(), "constraints.gpu_types", []))
    assert msg.startswith("scenario: constraints.gpu_types: empty list; give at least one GPU or omit the key"), msg


def test_omitting_gpu_types_still_means_every_gpu():
    assert parse_scenario(_training()).constraints.gpu_types is None
    assert parse_scenario(_with(_training(), "constraints.gpu_types", ["h100-sxm"])).constraints.gpu_types == [
        "h100-sxm"]


@pytest.mark.parametrize(
    ("path", "value", "field", "allowed"),
    [
        ("task", "finetune", "task", "'pretrain'"),
        ("training.precision", "fp7", "training.precision", "'bf16'"),
        ("training.optimizer", "lion", "training.optimizer", "'adamw'"),
        ("constraints.interconnect", "infiniband", "constraints.interconnect", "'nvlink'"),
        ("pricing.mode", "lease", "pricing.mode", "'on-demand'"),
    ],
)
def test_a_choice_outside_the_allowed_values_lists_them(path, value, field, allowed):
    msg = _error(_with(_training(), path, value))
    assert msg.startswith(f"scenario: {field}: must be one of "), msg
    assert allowed in msg


def test_inference_precision_outside_the_choices_names_the_field():
    msg = _error(_with(_inference(), "inference.kv_precision", "int4"))
    assert msg.startswith("scenario: inference.kv_precision: must be one of "), msg


def test_missing_model_names_the_field():
    data = _training()
    del data["model"]
    assert _error(data).startswith("scenario: model: ")


def test_a_scenario_that_is_not_a_mapping_is_rejected():
    assert _error(["model", "task"]) == "scenario: expected a mapping at the top level"


# ---------------------------------------------------------------------------------------------------------------
# Cross-field rules: one line each
# ---------------------------------------------------------------------------------------------------------------


def test_inference_without_a_rate_is_rejected():
    data = _inference()
    del data["inference"]["requests_per_s"]
    msg = _error(data)
    assert msg == ("scenario: inference: give exactly one of inference.requests_per_s, inference.requests_per_day "
                   "and inference.batch_job")


def test_inference_with_both_rates_is_rejected():
    msg = _error(_with(_inference(), "inference.requests_per_day", 1000))
    assert "give exactly one of inference.requests_per_s, inference.requests_per_day and inference.batch_job" in msg


def test_training_without_tokens_is_rejected():
    data = _training()
    del data["training"]["tokens"]
    msg = _error(data)
    assert msg == "scenario: training: give training.tokens, or training.dataset_tokens with training.epochs"


def test_training_with_both_tokens_and_dataset_tokens_is_rejected():
    msg = _error(_training(dataset_tokens=5e7))
    assert msg == "scenario: training: give training.tokens or training.dataset_tokens, not both"


def test_a_training_section_on_an_inference_task_is_rejected():
    data = _inference()
    data["training"] = {"tokens": 1e8}
    assert _error(data) == "scenario: (top level): task 'inference' takes no 'training' section"


def test_an_inference_task_needs_an_inference_section():
    data = _inference()
    del data["inference"]
    assert _error(data) == "scenario: (top level): task 'inference' needs an 'inference' section"


def test_a_training_task_needs_a_training_section():
    data = _training()
    del data["training"]
    assert _error(data) == "scenario: (top level): task 'lora' needs a 'training' section"


def test_an_inference_section_on_a_training_task_is_rejected():
    data = _training()
    data["inference"] = {"requests_per_s": 1.0}
    assert _error(data) == "scenario: (top level): task 'lora' takes no 'inference' section"


# ---------------------------------------------------------------------------------------------------------------
# Defaults are reported
# ---------------------------------------------------------------------------------------------------------------


def test_defaults_used_lists_every_unset_field_with_its_default():
    scn = parse_scenario(_training(seq_len=2048))
    used = scn.defaults_used()
    # Documented defaults of the fields the mapping did not set (scenario.py's field comments).
    expected = {
        "name": "scenario",
        "training.epochs": 1.0,
        "training.global_batch": 256,
        "training.precision": "bf16",
        "training.optimizer": "adamw",
        "training.lora_rank": 16,
        "constraints.max_gpus": 512,
        "constraints.interconnect": "any",
        "pricing.mode": "on-demand",
        "pricing.hours_per_day": 24.0,
        "pricing.horizon_months": 36.0,
        "pricing.electricity_usd_per_kwh": 0.127,  # EIA 2023 US commercial average
        "pricing.pue": 1.58,  # Uptime Institute 2023 global average PUE
        "pricing.grid_kg_co2e_per_kwh": 0.48,  # Ember 2024: world average 2023
        "pricing.load_fraction": 0.8,
        "pricing.depreciation_years": 4.0,
        "pricing.resale_fraction": 0.2,
    }
    for key, value in expected.items():
        assert used.get(key) == value, f"{key}: {used.get(key)!r} != {value!r}"


def test_defaults_used_omits_the_fields_the_file_set():
    scn = parse_scenario(_with(_training(seq_len=2048, lora_rank=16), "pricing.mode", "spot"))
    used = scn.defaults_used()
    # set in the mapping, even where equal to the default (lora_rank 16): not "assumed"
    for key in ("model", "task", "training.tokens", "training.seq_len", "training.lora_rank", "pricing.mode"):
        assert key not in used


def test_defaults_used_omits_limits_that_default_to_none():
    used = parse_scenario(_training()).defaults_used()
    # "no deadline", "no budget", "every GPU": absent rather than printed as None
    for key in ("constraints.deadline_h", "constraints.budget_usd", "constraints.gpu_types", "training.dataset_tokens"):
        assert key not in used


def test_defaults_used_of_an_inference_scenario_has_no_training_fields():
    used = parse_scenario(_inference()).defaults_used()
    assert used["inference.input_len"] == 1024
    assert used["inference.output_len"] == 256
    assert not any(k.startswith("training.") for k in used)


# ---------------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------------


def test_malformed_yaml_names_the_file_and_the_line(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining:\n  tokens: [1, 2\n  seq_len: 2048\n")
    with pytest.raises(CatalogFileError) as info:
        load_scenario(p)
    msg = str(info.value)
    assert "\n" not in msg
    assert str(p) in msg
    assert "not valid YAML" in msg
    # PyYAML reports the flow sequence as unclosed at the next key: line 5 (1-based) of the file
    assert "line 5" in msg, msg


def test_bad_indentation_is_reported_with_its_line(tmp_path):
    p = tmp_path / "indent.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\n  training: 3\n")
    with pytest.raises(CatalogFileError, match=r"indent\.yaml: not valid YAML \(line 3: "):
        load_scenario(p)


def test_empty_file_is_not_a_mapping(tmp_path):
    p = tmp_path / "empty.yaml"
    p.write_text("")
    with pytest.raises(CatalogFileError, match=r"empty\.yaml: expected a mapping at the top level"):
        load_scenario(p)


def test_a_missing_file_is_an_input_error_naming_it(tmp_path):
    p = tmp_path / "nowhere.yaml"
    with pytest.raises(InputError, match=r"scenario file '.*nowhere\.yaml' not found"):
        load_scenario(p)


def test_a_directory_is_not_reported_as_missing(tmp_path):
    with pytest.raises(InputError, match=r"scenario file '.*' is a directory, expected a YAML file"):
        load_scenario(tmp_path)


def test_a_binary_file_is_one_line_naming_it(tmp_path):
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"\xff\xfe\x00\x01binary")
    with pytest.raises(CatalogFileError, match=r"bin\.yaml: not a UTF-8 text file \(byte 0"):
        load_scenario(p)


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("training: {tokens: .inf}", "training.tokens"),
        ("training: {tokens: .nan}", "training.tokens"),
        ("training: {tokens: 1.0e8}\nconstraints: {gpu_types: []}", "constraints.gpu_types"),
        ("training: {tokens: 1.0e8}\npricing: {price_usd_per_gpu_hour: {h100-sxm: -.inf}}",
         "pricing.price_usd_per_gpu_hour.h100-sxm"),
        ("training: {tokens: 1.0e8}\npricing: {purchase_usd_per_gpu: {h100-sxm: .inf}}",
         "pricing.purchase_usd_per_gpu.h100-sxm"),
    ],
    ids=["tokens-inf", "tokens-nan", "empty-gpu-types", "price-minus-inf", "purchase-inf"],
)  # fmt: skip
def test_yaml_infinities_and_empty_lists_name_the_file_and_field(tmp_path, text, field):
    p = tmp_path / "odd.yaml"
    p.write_text(f"model: llama-3.1-8b\ntask: lora\n{text}\n")
    with pytest.raises(CatalogFileError, match=rf"odd\.yaml: {field.replace('.', '[.]')}: "):
        load_scenario(p)


def test_every_scenario_error_is_a_scaleright_error(tmp_path):
    # the CLI turns exactly these into one line and exit 2
    assert issubclass(CatalogFileError, ScalerightError)
    p = tmp_path / "bad.yaml"
    p.write_text("model: llama-3.1-8b\ntask: lora\ntraining: {tokens: 1.0e8, seq_len: -1}\n")
    with pytest.raises(ScalerightError, match=r"bad\.yaml: training\.seq_len: "):
        load_scenario(p)
