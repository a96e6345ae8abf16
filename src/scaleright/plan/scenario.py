"""A planning scenario: the workload, its constraints and how the hardware would be paid for, from YAML.

Every field is validated; unknown keys are rejected with their name. Defaults are documented per field and are
printed with every plan (``Scenario.defaults_used``) so a reader sees what was assumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from scaleright.errors import CatalogFileError, InputError
from scaleright.limits import LIMITS, _show, bounds, text_bounds
from scaleright.textfile import _short, path_problem, read_text
from scaleright.userdata import load_yaml

__all__ = ["Scenario", "Training", "Inference", "Constraints", "Pricing", "load_scenario", "PRICING_MODES"]

PRICING_MODES = ("on-demand", "spot", "marketplace", "own")


class _Strict(BaseModel):
    # every number must be finite: .inf / .nan in a YAML file are errors, never a silent infinity
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


# Numbers: booleans are refused (YAML ``yes`` is not 1), an int is fine for a float, and every count, size, rate,
# price and duration has an upper bound from ``scaleright.limits`` (the message gives the bound and its reason).
_Tokens = Annotated[float, *bounds("tokens")]
_Epochs = Annotated[float, *bounds("epochs")]
_SeqLen = Annotated[int, *bounds("seq_len")]
_GlobalBatch = Annotated[int, *bounds("global_batch")]
_LoraRank = Annotated[int, *bounds("lora_rank")]
_PerS = Annotated[float, *bounds("requests_per_s")]
_PerDay = Annotated[float, *bounds("requests_per_day")]
_ReqTokens = Annotated[int, *bounds("tokens_per_request")]
_Seconds = Annotated[float, *bounds("latency_s")]
_Hours = Annotated[float, *bounds("hours")]
_Gpus = Annotated[int, *bounds("gpus")]
_NodeGpus = Annotated[int, *bounds("chips_per_domain")]
_UsdTotal = Annotated[float, *bounds("usd")]
_UsdHour = Annotated[float, *bounds("usd_per_hour")]
_Months = Annotated[float, *bounds("months")]
_Years = Annotated[float, *bounds("years")]
_UsdKwh = Annotated[float, *bounds("usd_per_kwh")]
_Co2 = Annotated[float, *bounds("kg_co2e_per_kwh")]
_Pue = Annotated[float, *bounds("pue")]
_Fraction = Annotated[float, *bounds("fraction")]
_MAX_ITEMS = int(LIMITS["list_items"].high)  # GPU names in a list, price overrides in a mapping
_Name = Annotated[str, *text_bounds("name_chars")]  # a GPU id or alias, a scenario name
_PathText = Annotated[str, *text_bounds("path_chars")]  # a catalog model name or a path to a config.json

_Usd = Annotated[_UsdTotal, Field(ge=0, allow_inf_nan=False)]  # a finite, non-negative price in US dollars
_UsdPerHour = Annotated[_UsdHour, Field(ge=0, allow_inf_nan=False)]  # a finite, non-negative hourly rate


class Training(_Strict):
    """What to train. Give ``tokens``, or ``dataset_tokens`` and ``epochs``."""

    tokens: _Tokens | None = Field(None, gt=0)  # tokens processed by the whole job
    dataset_tokens: _Tokens | None = Field(None, gt=0)  # tokens in the dataset (with epochs)
    epochs: _Epochs = Field(1.0, gt=0)  # passes over dataset_tokens
    seq_len: _SeqLen = Field(4096, ge=1)  # tokens per sequence
    # sequences per optimizer step; layouts whose dp · micro-batch does not divide it are skipped
    global_batch: _GlobalBatch = Field(256, ge=1)
    precision: Literal["fp32", "bf16", "fp16", "fp8", "fp4"] = "bf16"
    optimizer: Literal["adamw", "adam", "adam8bit", "sgd"] = "adamw"
    lora_rank: _LoraRank = Field(16, ge=1)  # LoRA / QLoRA adapter rank
    # the training framework the step times assume: a preset name (megatron-2021, megatron-core, deepspeed, fsdp2,
    # accelerate, llm-foundry) or a mapping {name: <preset>, <field>: <value>} overriding its fields
    # (scaleright.estimate.framework); default fsdp2
    framework: str | dict[str, str | bool] | None = None

    @field_validator("framework")
    @classmethod
    def _framework(cls, v: str | dict[str, str | bool] | None) -> str | dict[str, str | bool] | None:
        from scaleright.estimate.framework import framework_of

        try:
            framework_of(v, field="training.framework")
        except InputError as exc:
            raise ValueError(str(exc).removeprefix("training.framework: ")) from None
        return v

    @model_validator(mode="after")
    def _tokens(self) -> Training:
        if self.tokens is None and self.dataset_tokens is None:
            raise ValueError("give training.tokens, or training.dataset_tokens with training.epochs")
        if self.tokens is not None and self.dataset_tokens is not None:
            raise ValueError("give training.tokens or training.dataset_tokens, not both")
        lim = LIMITS["tokens"]
        if self.total_tokens > lim.high:
            raise ValueError(f"training.dataset_tokens x training.epochs = {self.total_tokens:g} tokens must be <= "
                             f"{lim.high:g} ({lim.why})")  # fmt: skip
        return self

    @property
    def total_tokens(self) -> float:
        return self.tokens if self.tokens is not None else cast(float, self.dataset_tokens) * self.epochs


class Inference(_Strict):
    """What to serve. Give ``requests_per_s`` or ``requests_per_day``."""

    requests_per_s: _PerS | None = Field(None, gt=0)  # mean arrival rate at peak
    requests_per_day: _PerDay | None = Field(None, gt=0)  # converted to a rate over ``Pricing.hours_per_day`` hours
    input_len: _ReqTokens = Field(1024, ge=1)  # prompt tokens per request
    output_len: _ReqTokens = Field(256, ge=1)  # generated tokens per request
    ttft_slo_s: _Seconds | None = Field(None, gt=0)  # time-to-first-token limit (None: no limit)
    tpot_slo_s: _Seconds | None = Field(None, gt=0)  # time-per-output-token limit (None: no limit)
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4"] = "bf16"
    kv_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8"] = "bf16"
    api_usd_per_1m_output_tokens: _UsdTotal | None = Field(None, gt=0)  # an API's price to compare self-hosting with

    @model_validator(mode="after")
    def _rate(self) -> Inference:
        if (self.requests_per_s is None) == (self.requests_per_day is None):
            raise ValueError("give exactly one of inference.requests_per_s and inference.requests_per_day")
        return self


class Constraints(_Strict):
    """Limits the recommendation must respect."""

    deadline_h: _Hours | None = Field(None, gt=0)  # wall-clock limit for a training job
    budget_usd: _UsdTotal | None = Field(None, gt=0)  # cost limit for the job (training) or per month (inference)
    # allowed GPU ids/aliases (None: every catalog GPU with a price)
    gpu_types: list[_Name] | None = Field(None, max_length=_MAX_ITEMS)
    max_gpus: _Gpus = Field(512, ge=1)  # most GPUs one option may use
    gpus_per_node: _NodeGpus | None = Field(None, ge=1)  # override the GPU's typical node size
    interconnect: Literal["any", "nvlink", "pcie"] = "any"  # only GPUs whose intra-node link is of this kind

    @field_validator("gpu_types")
    @classmethod
    def _some_gpu(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("empty list; give at least one GPU or omit the key (every catalog GPU with a price)")
        return v


class Pricing(_Strict):
    """How GPU time is paid for, and the facts needed for total cost of ownership and carbon."""

    mode: Literal["on-demand", "spot", "marketplace", "own"] = "on-demand"
    # rent prices by GPU id overriding the catalog
    price_usd_per_gpu_hour: dict[_Name, _UsdPerHour] = Field({}, max_length=_MAX_ITEMS)
    # purchase prices by GPU id overriding the catalog
    purchase_usd_per_gpu: dict[_Name, _Usd] = Field({}, max_length=_MAX_ITEMS)
    hours_per_day: _Hours = Field(24.0, gt=0, le=24)  # hours a day the hardware is used (utilisation)
    horizon_months: _Months = Field(36.0, gt=0)  # period over which owning and renting are compared
    electricity_usd_per_kwh: _UsdKwh = Field(0.127, ge=0)  # default: US average commercial retail price 2023 (EIA)
    # power usage effectiveness; default: the 2023 global average (Uptime Institute Global Data Center Survey 2023)
    pue: _Pue = Field(1.58, ge=1.0)
    # default: world average 2023, 480 g/kWh (Ember Global Electricity Review 2024)
    grid_kg_co2e_per_kwh: _Co2 = Field(0.48, ge=0)
    # average board power / TDP while busy; default is an assumption (training runs near TDP, decode-heavy serving
    # below it)
    load_fraction: _Fraction = Field(0.8, gt=0, le=1)
    ops_overhead_usd_per_gpu_hour: _UsdHour = Field(0.0, ge=0)  # staff, space, support per owned GPU-hour
    server_share_usd_per_gpu: _UsdTotal = Field(0.0, ge=0)  # CPU, RAM, chassis, network per owned GPU
    facility_upgrade_usd: _UsdTotal = Field(0.0, ge=0)  # one-off power/cooling work for owned hardware
    depreciation_years: _Years = Field(4.0, gt=0)  # accounting life of owned hardware
    resale_fraction: _Fraction = Field(0.2, ge=0, le=1)  # resale value at the end of the horizon, of purchase


class Scenario(_Strict):
    """One planning question."""

    name: _Name = "scenario"  # plain text, printed as written (never read as markup)
    model: _PathText = Field(min_length=1)  # catalog name or path to a HF config.json
    task: Literal["pretrain", "full-finetune", "lora", "qlora", "inference"]
    training: Training | None = None
    inference: Inference | None = None
    constraints: Constraints = Constraints()
    pricing: Pricing = Pricing()

    @model_validator(mode="after")
    def _task_section(self) -> Scenario:
        if self.task == "inference":
            if self.constraints.deadline_h is not None:
                raise ValueError("constraints.deadline_h applies to training; for serving use inference.ttft_slo_s "
                                 "and inference.tpot_slo_s")
            if self.inference is None:
                raise ValueError("task 'inference' needs an 'inference' section")
            if self.training is not None:
                raise ValueError("task 'inference' takes no 'training' section")
        else:
            if self.training is None:
                raise ValueError(f"task {self.task!r} needs a 'training' section")
            if self.inference is not None:
                raise ValueError(f"task {self.task!r} takes no 'inference' section")
        return self

    def defaults_used(self) -> dict[str, object]:
        """Every field the file did not set, with the default that was used."""
        out: dict[str, object] = {}

        def walk(obj: BaseModel, prefix: str) -> None:
            for name in type(obj).model_fields:
                val = getattr(obj, name)
                key = f"{prefix}{name}"
                if isinstance(val, BaseModel):
                    walk(val, key + ".")
                elif name not in obj.model_fields_set and val not in (None, {}, []):
                    out[key] = val

        walk(self, "")
        return out


def _first_error(exc: ValidationError, source: str) -> str:
    """pydantic's first error as one line: the file, the field path as the user wrote it, what is allowed."""
    err = exc.errors()[0]
    loc = ".".join(_short(x, 40) for x in err["loc"] if x != "[key]") or "(top level)"
    if err["loc"] and err["loc"][-1] == "[key]":
        loc += " (a key)"
    msg = err["msg"]
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif err["type"] == "literal_error":
        msg = f"must be one of {err['ctx']['expected']}" if "ctx" in err else msg
    elif err["type"] in ("int_parsing", "int_type", "int_from_float", "float_parsing", "float_type",
                         "string_type", "dict_type", "list_type", "model_type", "model_attributes_type"):  # fmt: skip
        msg = f"{msg} (got {_show(err.get('input'))})"
    msg = " ".join(msg.removeprefix("Value error, ").split())  # one line, whatever the message held
    return f"{source}: {loc}: {msg}"


def parse_scenario(data: object, *, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise CatalogFileError(f"{source}: expected a mapping at the top level")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise CatalogFileError(_first_error(exc, source)) from None


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a YAML scenario; one-line ``CatalogFileError`` naming the file and field on error.

    A path that is not a regular file is refused with the truth (not found, a directory, a device such as
    ``/dev/null``, a FIFO, a symlink loop, a name too long), never read."""
    why = path_problem(path)
    if why is not None:
        shown = repr(_short(path))
        if why == "file not found":
            raise InputError(f"scenario file {shown} not found")
        if why.startswith("is a directory"):
            raise InputError(f"scenario file {shown} is a directory, expected a YAML file")
        raise InputError(f"scenario file {shown}: {why}")
    p = Path(path)
    data = load_yaml(read_text(p), str(p))
    return parse_scenario(data, source=str(p))
