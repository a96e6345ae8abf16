"""A planning scenario: the workload, its constraints and how the hardware would be paid for, from YAML.

Every field is validated; unknown keys are rejected with their name. Defaults are documented per field and are
printed with every plan (``Scenario.defaults_used``) so a reader sees what was assumed.

No ``from __future__ import annotations`` here: pydantic would compile and evaluate each field's annotation string
when it builds the models, at import.
"""

import datetime
from pathlib import Path
from typing import Annotated, Literal, Self, cast

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from scaleright.catalog.prices import MAX_PRICE_AGE_DAYS
from scaleright.errors import CatalogFileError, InputError
from scaleright.limits import LIMITS, bounds, text_bounds
from scaleright.textfile import _short, path_problem, read_text
from scaleright.userdata import load_yaml, validation_line

__all__ = ["Scenario", "Training", "Inference", "BatchJob", "Constraints", "Pricing", "MonthlyJob", "load_scenario",
           "PRICING_MODES"]

# a rent kind of ``catalog.prices.KINDS``, ``own`` (buy: total cost of ownership) or ``cheapest`` (every kind the
# buyer can get, spot at its expected preempted time, owned at its TCO; the cheapest option wins)
# ``hybrid``: own a baseline, rent the bursts of a demand profile (pricing.demand_gpus_by_hour or monthly_jobs)
PRICING_MODES = ("on-demand", "spot", "marketplace", "reserved", "reserved-1y", "reserved-3y", "committed", "own",
                 "hybrid", "cheapest")
_PricingMode = Literal["on-demand", "spot", "marketplace", "reserved", "reserved-1y", "reserved-3y", "committed",
                       "own", "hybrid", "cheapest"]
_RentKind = Literal["on-demand", "spot", "marketplace", "reserved", "reserved-1y", "reserved-3y", "committed"]
# AWS: "the average frequency of interruption across all Regions and instance types" has been under 5 % a month
# (Amazon EC2 Spot Instance Advisor / "Spot Instance interruptions" documentation): 0.05 / (365/12 x 24) per
# instance-hour. An all-instance average; GPU instances are reclaimed more often, so set your provider's figure.
SPOT_PREEMPTIONS_PER_HOUR = 0.05 / (365.0 / 12.0 * 24.0)
# AWS's price to move data out to the internet, first 10 TB a month, US regions: $0.09/GB (Amazon EC2 On-Demand
# pricing, "Data Transfer OUT From Amazon EC2 To Internet")
EGRESS_USD_PER_GB = 0.09
# AWS EBS gp3's maximum throughput, 1,000 MiB/s per volume (Amazon EBS volume types documentation): a checkpoint
# that must outlive a spot instance is written to network storage
CHECKPOINT_WRITE_GB_PER_S = 1000 * 2**20 / 1e9


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
_GbPerS = Annotated[float, *bounds("gb_per_s")]
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
    def _tokens(self) -> Self:
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


class PooledService(_Strict):
    """One of several services pooled on the fleet: its share of the request rate and its own traffic shape."""

    name: _Name = Field(min_length=1)
    share: Annotated[float, Field(gt=0, le=1)]  # of inference.requests_per_s
    priority: Annotated[int, Field(ge=-1000, le=1000)] = 0  # higher is served first on the shared replicas
    input_len: _ReqTokens | None = Field(None, ge=1)  # default: inference.input_len
    output_len: _ReqTokens | None = Field(None, ge=1)  # default: inference.output_len
    burstiness: Annotated[float, Field(gt=0, le=1000)] | None = None  # default: inference.burstiness


class Tier(_Strict):
    """A smaller model tried before the scenario's (a cascade): ``escalate`` of the requests it answers go on."""

    model: _PathText = Field(min_length=1)  # catalog name or config.json path
    escalate: _Fraction = Field(ge=0, le=1)  # share of this tier's requests sent on to the next tier


class BatchJob(_Strict):
    """An occasional inference job (``inference.batch_job``), costed per run and per month of runs
    (``economics.batch``) instead of as a service kept up every day."""

    requests_per_run: _PerDay = Field(gt=0)  # requests (documents, prompts) one run processes
    runs_per_month: Annotated[float, Field(gt=0, le=24 * 31)]  # e.g. 1 for a monthly job, 4.35 for a weekly one
    # a run must finish within this: the fleet is sized to carry requests_per_run over run_within_h (x headroom)
    run_within_h: _Hours = Field(24.0, gt=0)
    # paid start-up per run (provisioning, engine start, loading the weights); None: the weights of a replica read
    # at pricing.checkpoint_write_gb_per_s (network storage), with no provisioning time (give it if you know it)
    startup_s: _Seconds | None = Field(None, ge=0)


class Inference(_Strict):
    """What to serve. Give ``requests_per_s`` or ``requests_per_day`` (or, with ``arrival: trace``, a trace whose
    mean rate is taken), or ``batch_job`` for an occasional job run a few times a month. Fleets are sized with the
    serving simulator (``plan.serving``)."""

    requests_per_s: _PerS | None = Field(None, gt=0)  # mean arrival rate (diurnal: the daily mean; peak above it)
    requests_per_day: _PerDay | None = Field(None, gt=0)  # converted to a rate over ``Pricing.hours_per_day`` hours
    input_len: _ReqTokens = Field(1024, ge=1)  # prompt tokens per request
    output_len: _ReqTokens = Field(256, ge=1)  # generated tokens per request
    ttft_slo_s: _Seconds | None = Field(None, gt=0)  # time-to-first-token limit (None: no limit)
    tpot_slo_s: _Seconds | None = Field(None, gt=0)  # time-per-output-token limit (None: no limit)
    # weights as stored (workload.precision.STORAGE_PRECISIONS); q8_0 .. q4_0 are GGUF file types (llama.cpp)
    precision: Literal["fp32", "bf16", "fp16", "fp8", "int8", "int4", "fp4",
                       "q8_0", "q6_k", "q5_k_m", "q4_k_m", "q4_0"] = "bf16"  # fmt: skip
    kv_precision: Literal["fp32", "bf16", "fp16", "fp8", "int8"] = "bf16"
    api_usd_per_1m_output_tokens: _UsdTotal | None = Field(None, gt=0)  # an API's price to compare self-hosting with
    # the API's prompt-token price (economics.tokens: blended with the completion price over input_len/output_len)
    api_usd_per_1m_input_tokens: _UsdTotal | None = Field(None, ge=0)
    # the arrival pattern: constant (Poisson at the rate; burstiness < 1 makes it a burstier gamma process, as vllm
    # bench serve's --burstiness), diurnal (rate · (1 + amplitude · sin(2π t / 24 h)): sized for its peak), or
    # trace (a CSV arrival_time_s,input_tokens,output_tokens replayed)
    arrival: Literal["constant", "diurnal", "trace"] = "constant"
    burstiness: Annotated[float, Field(gt=0, le=1000)] = 1.0
    diurnal_amplitude: _Fraction = Field(0.5, ge=0, le=1)
    trace: _PathText | None = None
    engine: str = "vllm"  # the engine profile simulated: built-in or stored by calibrate --serving --name
    # capacity kept above the offered (peak) rate: the fleet is sized to meet the SLOs at rate x (1 + headroom)
    headroom: Annotated[float, Field(ge=0, le=10)] = 0.2
    prefix_cache_hit_rate: Annotated[float, Field(ge=0, lt=1)] = 0.0  # share of each prompt found in the KV cache
    result_cache_hit_rate: Annotated[float, Field(ge=0, lt=1)] = 0.0  # share of requests answered from a cache
    # several services sharing the fleet (shares of the rate summing to 1): the pooling lever compares one shared
    # pool against one pool per service, each sized by simulation
    services: list[PooledService] | None = Field(None, min_length=2, max_length=8)
    # smaller models tried first, smallest first (the scenario's model is the last tier): the routing lever
    tiers: list[Tier] | None = Field(None, min_length=1, max_length=3)
    # an occasional job instead of a service: costed per run (economics.batch), never as hours_per_day every day
    batch_job: BatchJob | None = None

    @field_validator("engine")
    @classmethod
    def _engine(cls, v: str) -> str:
        from scaleright.estimate.engine_store import check_engine_name

        return check_engine_name(v)

    @model_validator(mode="after")
    def _gguf_engine(self) -> Self:
        from scaleright.errors import InputError
        from scaleright.workload.precision import check_gguf_engine

        try:
            check_gguf_engine(self.precision, self.engine, field="inference.precision")
        except InputError as exc:
            raise ValueError(str(exc)) from None
        return self

    @model_validator(mode="after")
    def _rate(self) -> Self:
        if self.batch_job is not None:
            given = [k for k in ("requests_per_s", "requests_per_day", "trace", "services", "tiers")
                     if getattr(self, k) is not None]  # fmt: skip
            if given or self.arrival != "constant":
                what = f"inference.{given[0]}" if given else f"arrival {self.arrival!r}"
                raise ValueError(f"inference.batch_job sets the load (requests_per_run over run_within_h); "
                                 f"{what} describes a service: give one or the other")  # fmt: skip
            return self
        if self.services is not None:
            total = sum(x.share for x in self.services)
            if abs(total - 1) > 1e-6:
                raise ValueError(f"inference.services shares sum to {total:g}; they must sum to 1")
            names = [x.name for x in self.services]
            if len(set(names)) != len(names):
                raise ValueError(f"inference.services names must be unique, got {names}")
            if self.arrival == "trace":
                raise ValueError("inference.services split a rate; a trace holds its own requests")
        if self.arrival == "trace":
            if self.trace is None:
                raise ValueError("arrival 'trace' needs inference.trace (a CSV arrival_time_s,input_tokens,"
                                 "output_tokens)")  # fmt: skip
            if self.requests_per_s is not None or self.requests_per_day is not None:
                raise ValueError("arrival 'trace' takes its rate from the trace: give no requests_per_s or "
                                 "requests_per_day")  # fmt: skip
            return self
        if self.trace is not None:
            raise ValueError("inference.trace applies to arrival 'trace'")
        if (self.requests_per_s is None) == (self.requests_per_day is None):
            raise ValueError("give exactly one of inference.requests_per_s, inference.requests_per_day and "
                             "inference.batch_job")
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
    # false: the search never moves optimizer states or activations to host memory (ZeRO-Offload, activation
    # offload), e.g. where the hosts' memory is taken by other work; true: offload is searched for layouts that do
    # not fit without it, on parts with a PCIe host link (plan.search)
    allow_offload: StrictBool = True

    @field_validator("gpu_types")
    @classmethod
    def _some_gpu(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not v:
            raise ValueError("empty list; give at least one GPU or omit the key (every catalog GPU with a price)")
        return v


class MonthlyJob(_Strict):
    """One job of a month's demand (mode hybrid): GPUs it runs on and hours it runs per month."""

    gpus: _Gpus = Field(ge=1)
    hours: _Hours = Field(gt=0, le=24 * 31)


class Pricing(_Strict):
    """How GPU time is paid for, and the facts needed for total cost of ownership and carbon."""

    mode: _PricingMode = "on-demand"
    # offers older than this are flagged stale and passed over for fresher ones (catalog.prices.MAX_PRICE_AGE_DAYS)
    max_price_age_days: _Hours = Field(MAX_PRICE_AGE_DAYS, ge=0)
    # the day prices are aged from (YYYY-MM-DD); None: today (UTC). Set it to reproduce a plan later
    prices_as_of: datetime.date | None = None
    # spot training (economics.spot, Daly 2006): preemptions per instance-hour (an instance = one node of
    # constraints.gpus_per_node GPUs; default SPOT_PREEMPTIONS_PER_HOUR), checkpoint storage throughput per
    # instance, extra time to re-acquire an instance after a preemption (0 unless given: not modelled), and the
    # hours of work between checkpoints (None: Daly's optimum)
    spot_preemptions_per_hour: _Hours = Field(SPOT_PREEMPTIONS_PER_HOUR, ge=0, le=3600)
    checkpoint_write_gb_per_s: _GbPerS = Field(CHECKPOINT_WRITE_GB_PER_S, gt=0)
    spot_reprovision_s: _Seconds = Field(0.0, ge=0)
    checkpoint_interval_h: _Hours | None = Field(None, gt=0)
    # mode hybrid (economics.hybrid): the fleet's demand, as GPUs busy in each of the 24 hours of a typical day, or
    # as the month's jobs (run one after another); bursts above the owned baseline are rented at burst_kind
    demand_gpus_by_hour: list[Annotated[int, *bounds("gpus"), Field(ge=0)]] | None = Field(None, min_length=24,
                                                                                         max_length=24)
    monthly_jobs: list[MonthlyJob] | None = Field(None, min_length=1, max_length=_MAX_ITEMS)
    burst_kind: _RentKind = "on-demand"
    # multi-provider training: the data lives at data_provider (a provider name as in prices.csv, e.g. "AWS");
    # renting from another provider first moves data_gb out at egress_usd_per_gb (default EGRESS_USD_PER_GB). With
    # both set the plan weighs the cheapest offer anywhere (plus egress) against the data provider's own offer
    data_provider: _Name | None = None
    data_gb: _UsdTotal = Field(0.0, ge=0)
    egress_usd_per_gb: _UsdTotal = Field(EGRESS_USD_PER_GB, ge=0)
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
    # owned hardware: None takes the cited default for the GPU's site (economics.defaults: data-centre parts the
    # seed article's low ends, $2/GPU-hour, $5 K per GPU, $25 K per site; consumer and workstation cards $0)
    ops_overhead_usd_per_gpu_hour: _UsdHour | None = Field(None, ge=0)  # staff, space, support per owned GPU-hour
    server_share_usd_per_gpu: _UsdTotal | None = Field(None, ge=0)  # CPU, RAM, chassis, network per owned GPU
    facility_upgrade_usd: _UsdTotal | None = Field(None, ge=0)  # one-off power/cooling work for owned hardware
    # interest or required return on the money invested, per year; None takes the cited default for the GPU's site
    # (economics.defaults: data centre 8.91 % = US 10-year Treasury 4.58 % + Damodaran's implied equity risk premium
    # 4.33 %, start of 2025; home lab the Treasury rate alone); 0 = capital is free
    cost_of_capital_per_year: _Fraction | None = Field(None, ge=0)
    depreciation_years: _Years = Field(4.0, gt=0)  # accounting life of owned hardware (a month at least)
    resale_fraction: _Fraction = Field(0.2, ge=0, le=1)  # resale value at the end of the horizon, of purchase
    # the Deployment Decision Tree (economics.decision): "on-premises" when the data may not leave your own
    # hardware (compliance), which rules renting out whatever it costs
    data_sensitivity: Literal["none", "on-premises"] = "none"
    # a serverless endpoint's price per GPU-hour of worker time (billed per second, cold starts included), to weigh
    # against a batch job or an always-on service; None: the GPU's cheapest serverless catalog offer
    # (plan.serving.serverless_price), and not priced when the catalog has none for it
    serverless_usd_per_gpu_hour: _UsdPerHour | None = None
    # how long a serverless worker stays warm after its last request (economics.batch). Default: Modal's default
    # scale-down window, 60 s (modal.com/docs/guide/cold-start, "scaledown_window"; RunPod Serverless defaults to
    # 5 s): set your endpoint's
    serverless_idle_timeout_s: _Seconds = Field(60.0, ge=0)

    @field_validator("depreciation_years")
    @classmethod
    def _a_month_at_least(cls, v: float) -> float:
        # the hardware is bought again every depreciation_years over the horizon (economics.ownership.purchases):
        # a life shorter than a month would buy it thousands of times, and 5e-324 years overflows the count
        if v < 1 / 12:
            raise ValueError(f"{v:g} years is shorter than a month; give the hardware's accounting life in years "
                             "(at least 1/12, e.g. 4)")
        return v

    @model_validator(mode="after")
    def _hybrid_profile(self) -> Self:
        given = [k for k in ("demand_gpus_by_hour", "monthly_jobs") if getattr(self, k) is not None]
        if self.mode == "hybrid" and len(given) != 1:
            raise ValueError("pricing.mode hybrid needs exactly one demand profile: pricing.demand_gpus_by_hour "
                             "(24 values) or pricing.monthly_jobs (a list of {gpus, hours})")
        if self.mode != "hybrid" and given:
            raise ValueError(f"pricing.{given[0]} is the demand profile of mode hybrid; mode is {self.mode!r}")
        if (self.data_gb > 0) != (self.data_provider is not None):
            raise ValueError("pricing.data_gb and pricing.data_provider go together: the data's size and where it "
                             "lives (egress is paid to move it elsewhere)")
        if self.mode == "hybrid" and self.demand_gpus_by_hour is not None and not any(self.demand_gpus_by_hour):
            raise ValueError("pricing.demand_gpus_by_hour: every hour is 0; give the GPUs busy in some hour")
        return self


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
    def _task_section(self) -> Self:
        if self.task == "inference":
            if self.constraints.deadline_h is not None:
                raise ValueError("constraints.deadline_h applies to training; for serving use inference.ttft_slo_s "
                                 "and inference.tpot_slo_s")
            if "allow_offload" in self.constraints.model_fields_set:
                raise ValueError("constraints.allow_offload applies to training (optimizer and activation offload); "
                                 "serving offloads nothing to host memory here, omit it")
            if self.inference is None:
                raise ValueError("task 'inference' needs an 'inference' section")
            if self.training is not None:
                raise ValueError("task 'inference' takes no 'training' section")
            if self.inference.batch_job is not None and "hours_per_day" in self.pricing.model_fields_set:
                raise ValueError("pricing.hours_per_day: a batch job's use is its runs (inference.batch_job."
                                 "runs_per_month x the run's hours); omit hours_per_day")  # fmt: skip
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
        if self.inference is not None and self.inference.batch_job is not None:
            out.pop("pricing.hours_per_day", None)  # a batch job's use is its runs, not this field
        return out


def parse_scenario(data: object, *, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise CatalogFileError(f"{source}: expected a mapping at the top level")
    try:
        return Scenario.model_validate(data)
    except ValidationError as exc:
        raise CatalogFileError(validation_line(exc, source)) from None


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
