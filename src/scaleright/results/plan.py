"""``scaleright plan SCENARIO --json``: the recommendation, the options behind it and why (``plan.planner``).

An option is a training option (a job: its time and cost) or a serving option (a fleet per month of service).
Both carry the offer they are priced at (``PriceOffer``); a hybrid, owned, spot or simulated option adds its own
keys. Explanations hold per-topic chart data (``plan.explain``), an open-ended mapping by design.
"""

from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import Discriminator, Tag

from scaleright.plan.scenario import Constraints, Inference, Pricing, Training
from scaleright.results.common import CalibrationRecord, MemoryBreakdownGb, OptReal, Part, Real, Result, TimeBreakdownS
from scaleright.results.memory import MemoryAccounting
from scaleright.results.train import TrainingOptionLayout

if TYPE_CHECKING:
    from scaleright.plan import planner

__all__ = ["PlanResult", "PlanScenario", "TrainingOption", "ServingOption", "PriceOffer", "Explanation",
           "CurvePoint", "TrainingSearch", "ServingSearch", "Infeasible"]  # fmt: skip


class PlanScenario(Part):
    """The scenario as validated (``plan.scenario.Scenario``: every field, defaults filled in) and what the planner
    derived from it. The sections are the scenario's own models."""

    name: str
    model: str
    task: Literal["pretrain", "full-finetune", "lora", "qlora", "inference"]
    training: Training | None
    inference: Inference | None
    constraints: Constraints
    pricing: Pricing
    defaults_used: dict[str, str | bool | int | float]  # dotted field name -> the default used
    model_params_total: int
    model_params_active: int
    tokens: OptReal = None  # training: tokens processed by the job
    requests_per_s: OptReal = None  # serving: the mean request rate
    peak_requests_per_s: OptReal = None  # serving: the rate the fleet is sized for


class ServingOptionLayout(Part):
    tp: int
    pp: int
    replicas: int
    batch_per_replica: int


class OwnershipInputs(Part):
    ops_overhead_usd_per_gpu_hour: Real
    server_share_usd_per_gpu: Real
    facility_upgrade_usd: Real
    cost_of_capital_per_year: Real  # the scenario's, else economics.defaults' cited figure for the GPU's site


class Hybrid(Part):
    """Mode hybrid: the cheapest owned baseline for the demand profile, bursts rented (``economics.hybrid``)."""

    owned_gpus: int
    owned_gpu_hours: Real
    rented_gpu_hours: Real
    cost_usd_per_month: Real
    all_rent_usd_per_month: Real
    all_own_usd_per_month: Real
    demand_gpu_hours: Real
    costs_usd_per_month: list[Real]  # per owned-GPU count tried
    burst_preemption_modelled: bool
    rate: str


class Spot(Part):
    """A spot training job's expected time with preemptions, checkpoints and restarts (``economics.spot``)."""

    preemption_free_time_h: Real
    expected_time_h: Real
    preemptions_per_hour: Real
    expected_preemptions: Real
    checkpoint_interval_h: Real
    checkpoint_write_s: Real
    restart_s: Real
    checkpoint_gb: Real
    checkpoint_gb_per_node: Real


class PriceOffer(Part):
    """The offer an option is priced at (``plan.planner._offer``) and what its pricing kind adds."""

    pricing_kind: str  # a rent kind, own or hybrid
    owned_gpus: int | None = None  # hybrid
    rented_gpu_hours: OptReal = None  # hybrid
    burst_kind: str | None = None  # hybrid
    burst_price_usd_per_gpu_hour: OptReal = None  # hybrid
    purchase_usd_per_gpu: OptReal = None  # own, hybrid
    ownership_site: str | None = None  # own
    ownership_inputs: OwnershipInputs | None = None  # own
    hybrid: Hybrid | None = None
    price_provider: str | None
    price_region: str | None
    price_date: str | None
    price_age_days: int | None
    price_stale: bool
    egress_usd: OptReal = None  # with pricing.data_provider: moving the data to this offer's provider
    true_cost_usd_per_gpu_hour: OptReal = None  # own, hybrid


class _Common(Part):
    gpu: str
    gpus: int


class _TrainingCore(_Common):
    layout: TrainingOptionLayout
    time_h: Real
    cost_usd: Real
    cost_per_1m_tokens_usd: Real
    energy_kwh: Real
    co2e_kg: Real
    price_usd_per_gpu_hour: Real
    price_source: str
    precision: str
    precision_note: str | None  # when the GPU has no tensor rate for the precision and runs wider
    tokens_per_s: Real
    mfu: Real
    step_time_s: Real
    memory_gb_per_gpu: Real
    gpu_memory_gb: Real
    time_breakdown_s: TimeBreakdownS
    memory_breakdown_gb: MemoryBreakdownGb
    framework: str
    memory_accounting: MemoryAccounting  # the framework's memory inputs the memory figures assumed
    calibrated: bool
    calibration_note: str


class TrainingOption(PriceOffer, _TrainingCore):
    """A training job on ``gpus`` GPUs of one type: the fastest fitting layout at that count."""

    spot: Spot | None = None  # pricing kind spot


class _ServingCore(_Common):
    layout: ServingOptionLayout
    time_h: Real  # service hours per month
    service_hours_per_month: Real
    cost_usd: Real  # per month
    cost_per_1m_tokens_usd: Real
    energy_kwh: Real
    co2e_kg: Real
    price_usd_per_gpu_hour: Real
    price_source: str
    usd_per_hour: Real
    ttft_s: Real
    tpot_s: Real
    e2e_latency_s: Real
    utilisation: Real
    capacity_requests_per_s: Real
    max_batch: int
    gpu_memory_gb: Real
    memory_gb_per_gpu: Real
    memory_breakdown_gb: MemoryBreakdownGb
    precision_note: str | None
    sizing: Literal["steady-state", "simulated"]


class BatchJobSpot(Part):
    """A batch job on spot: its expected preemptions and what each costs (Daly 2006; ``economics.batch``)."""

    preemption_free_work_h: Real
    expected_work_h: Real
    preemptions_per_hour: Real
    expected_preemptions_per_replica: Real
    restart_s: Real
    lost_per_preemption_s: Real


class ServerlessOffer(Part):
    """The serverless price a comparison uses (``plan.serving.serverless_price``): the scenario's
    ``pricing.serverless_usd_per_gpu_hour`` (provider "scenario override"), else the GPU's cheapest ``serverless``
    catalog offer; ``usd_per_gpu_hour`` null when neither exists, ``notes`` then saying why and how to add one."""

    usd_per_gpu_hour: OptReal
    provider: str | None
    date: str | None
    age_days: int | None
    stale: bool | None
    source: str | None
    notes: str


class ServerlessService(Part):
    """The recommended always-on service against a serverless endpoint of the same workers
    (``plan.serving.serverless_service``); the USD figures null when the GPU has no serverless price."""

    serverless_usd_per_month: OptReal
    always_on_usd_per_month: Real
    serverless_gpu_hours_per_month: Real
    cold_starts_per_month: Real
    cold_start_gpu_hours_per_month: Real
    cold_start_s: Real
    idle_timeout_s: Real
    serverless_usd_per_gpu_hour: OptReal
    always_on_gpu_hours_per_month: Real
    serverless_offer: ServerlessOffer


class BatchJob(Part):
    """An occasional inference job costed per run (``inference.batch_job``; ``plan.serving``, ``economics.batch``):
    start-up plus the requests at the fleet's sustained throughput, against the same fleet always on and serverless."""

    requests_per_run: Real
    runs_per_month: Real
    run_within_h: Real
    work_h: Real
    startup_s: Real
    startup_source: str
    run_h: Real
    busy_share: Real
    use_hours_per_day: Real
    spot: BatchJobSpot | None  # null unless the job runs on spot
    usd_per_run: Real
    usd_per_month: Real
    always_on_usd_per_month: Real
    idle_usd_per_month: Real
    always_on_over_batch: Real
    usd_per_1m_output_tokens: Real
    serverless_usd_per_run: OptReal
    serverless_usd_per_month: OptReal
    serverless_note: str
    serverless_offer: ServerlessOffer


class GpusAtLoad(Part):
    """A step of the GPUs-against-load curve: ``replicas`` carry every load up to ``requests_per_s``."""

    requests_per_s: Real
    replicas: int
    gpus: int


class ServingOption(PriceOffer, _ServingCore):
    """A serving fleet of one GPU type and TP size, sized for the peak rate; ``sizing`` simulated adds the
    simulation's figures (latencies then at ``latency_percentile``)."""

    gpu_busy_share: OptReal = None
    replica_capacity_requests_per_s: OptReal = None
    replica_capacity: OptReal = None
    sized_at_requests_per_s: OptReal = None
    latency_percentile: str | None = None
    serving_charts: dict[str, Any] | None = None  # simulated: the report's chart data (serve.report.chart_data)
    gpus_against_load: list[GpusAtLoad] | None = None  # simulated: the fleet size against offered load
    batch_job: BatchJob | None = None  # inference.batch_job: the job costed per run
    serverless: ServerlessService | None = None  # a service (not a batch job): vs a serverless endpoint


def _option_kind(v: object) -> str:
    """A serving option says how it was sized; a training option never does (the tag that picks the model)."""
    return "serving" if ("sizing" in v if isinstance(v, dict) else isinstance(v, ServingOption)) else "training"


Option = Annotated[Annotated[TrainingOption, Tag("training")] | Annotated[ServingOption, Tag("serving")],
                   Discriminator(_option_kind)]


class Explanation(Part):
    topic: str
    title: str
    text: str
    data: dict[str, Any]  # the topic's figures and chart data (plan.explain); keys differ per topic


class CurvePoint(Part):
    """A point of the Utilisation Efficiency Curve: speedup and scaling efficiency over GPU count."""

    gpu: str
    gpus: int
    time_h: Real
    speedup: Real
    scaling_efficiency: Real
    cost_usd: Real
    meets_deadline: bool
    optimal: bool


class Skipped(Part):
    gpu: str
    reason: str


class TrainingSearch(Part):
    """What a training plan's search covered, and how fast it ran."""

    layouts_evaluated: int
    layouts_fit: int
    layouts_fit_offload: int  # of layouts_fit, those that fit only with optimizer and/or activation offload
    wall_s: Real
    cpu_s: Real
    gpu_types: int
    skipped: list[Skipped]  # GPU types with no fitting layout or no price, and why
    layouts_per_s: OptReal
    limits: dict[str, str]  # search axis -> the values searched, in words (plan.search.SEARCH_LIMITS)
    precision_notes: list[str]
    price_data_errors: list[str]


class ServingSearch(Part):
    """What a serving plan's search covered: ``simulated`` options were re-sized by the serving simulator."""

    layouts_evaluated: int
    layouts_fit: int
    wall_s: Real
    skipped: list[Skipped]
    gpu_types: int
    layouts_per_s: OptReal
    limits: dict[str, str]
    precision_notes: list[str]
    simulated: int
    price_data_errors: list[str]


PlanSearch = Annotated[Annotated[TrainingSearch, Tag("training")] | Annotated[ServingSearch, Tag("serving")],
                       Discriminator(lambda v: "serving" if ("simulated" in v if isinstance(v, dict)
                                                             else isinstance(v, ServingSearch)) else "training")]


class Infeasible(Part):
    """Why nothing was recommended: the binding constraint and, where one exists, the closest option."""

    binding: str  # memory, price, deadline, budget, latency SLO or memory
    closest: Option | None = None
    message: str


class DecisionBranch(Part):
    """One branch of the seeds' Deployment Decision Tree: whether it applies, why, and what would flip it."""

    branch: str  # rent, buy, hybrid, on-prem, multi-provider
    seed_rule: str  # the seed's rule, quoted
    applies: bool
    because: str
    flips_when: str
    numbers: dict[str, Any]  # the figures that decide the branch; keys differ per branch


class DeploymentDecision(Part):
    """The Deployment Decision Tree, computed (``plan.deployment``, ``economics.decision``); ``decision`` None
    (with the reason in ``text``) where it cannot be computed, e.g. no purchase price."""

    decision: str | None
    text: str
    branches: list[DecisionBranch]
    numbers: dict[str, Any]


class PlanResult(Result):
    """A plan: the recommendation (None when nothing meets the constraints; ``infeasible`` then says why), the
    options behind it and the explanations."""

    scenario: PlanScenario
    recommendation: Option | None
    options: list[Option]  # the best option per GPU type
    pareto: list[Option]  # not beaten on both time (serving: TPOT) and cost
    explanations: list[Explanation]
    curve: list[CurvePoint]
    search: PlanSearch
    infeasible: Infeasible | None
    all_options: list[Option]  # the best option per GPU type and count
    deployment_decision: DeploymentDecision | None
    calibration: CalibrationRecord

    @classmethod
    def of(cls, res: "planner.PlanResult", *, calibration: dict[str, Any]) -> Self:
        """The result of the planner's ``res``, with the calibration record (``Profile.record()``) behind it."""
        return cls.from_dict(res.as_dict() | {"calibration": calibration})
