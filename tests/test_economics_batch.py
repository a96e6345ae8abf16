"""Batch jobs vs services (issue 11 item 6): an occasional job costed per run and per month, against the same
fleet always on (its idle cost) and serverless with a billed cold start; hand-computed closed forms, the
scenario's boundary, and the planner on examples/batch-job-occasional.yaml."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.errors import CatalogFileError, InputError
from scaleright.plan import economics as econ
from scaleright.plan.planner import plan
from scaleright.plan.scenario import load_scenario, parse_scenario

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "batch-job-occasional.yaml"


def test_a_run_is_paid_from_start_up_to_its_last_request():
    # 1,000 requests at 2 req/s = 500 s of work, + 60 s start-up = 560 s
    assert econ.batch_run_h(requests=1000, capacity_requests_per_s=2.0, startup_s=60) == pytest.approx(560 / 3600)


def test_per_run_per_month_always_on_and_idle_by_hand():
    # 2 GPUs at $3/GPU-hour, 0.5 h of work + 1,800 s start-up = 1 h a run, 4 runs a month
    c = econ.batch_costs_usd(gpus=2, usd_per_gpu_hour=3.0, work_h=0.5, startup_s=1800, runs_per_month=4)
    assert c["run_h"] == pytest.approx(1.0)
    assert c["usd_per_run"] == pytest.approx(2 * 3.0 * 1.0)  # $6
    assert c["usd_per_month"] == pytest.approx(24.0)
    assert c["always_on_usd_per_month"] == pytest.approx(2 * 3.0 * 730)  # 8,760 h / 12 = 730 h a month: $4,380
    assert c["idle_usd_per_month"] == pytest.approx(4380 - 2 * 3.0 * 0.5 * 4)  # start-up hours are idle: $4,368
    assert c["always_on_over_batch"] == pytest.approx(4380 / 24)


def test_serverless_bills_the_cold_start():
    # 1 GPU at $5/h serverless, 1 h of work, one 360 s cold start: 5 x (1 + 0.1) = $5.50
    assert econ.serverless_cost_usd(gpus=1, serverless_usd_per_gpu_hour=5.0, work_h=1.0, cold_starts=1,
                                    cold_start_s=360) == pytest.approx(5.5)  # fmt: skip


@settings(max_examples=60, deadline=None, derandomize=True)
@given(work=st.floats(0.01, 100), startup=st.floats(0, 3600), runs=st.floats(0.1, 7), price=st.floats(0.1, 10),
       gpus=st.integers(1, 64))  # fmt: skip
def test_always_on_never_costs_less_than_the_runs_it_would_serve(work, startup, runs, price, gpus):
    """While the runs fit in the month (work x runs <= 730 h), keeping the fleet up costs at least their work, and
    the batch bill is linear in the runs."""
    c = econ.batch_costs_usd(gpus=gpus, usd_per_gpu_hour=price, work_h=work, startup_s=startup, runs_per_month=runs)
    assert c["idle_usd_per_month"] >= -1e-9
    two = econ.batch_costs_usd(gpus=gpus, usd_per_gpu_hour=price, work_h=work, startup_s=startup,
                               runs_per_month=2 * runs)  # fmt: skip
    assert two["usd_per_month"] == pytest.approx(2 * c["usd_per_month"])


@pytest.mark.parametrize(("call", "field"), [
    (lambda: econ.batch_run_h(requests=0, capacity_requests_per_s=1), "requests"),
    (lambda: econ.batch_run_h(requests=1, capacity_requests_per_s=0), "capacity_requests_per_s"),
    (lambda: econ.batch_costs_usd(gpus=1, usd_per_gpu_hour=1, work_h=1, startup_s=-1, runs_per_month=1), "startup_s"),
    (lambda: econ.batch_costs_usd(gpus=1, usd_per_gpu_hour=1, work_h=1, startup_s=0, runs_per_month=0),
     "runs_per_month"),
])  # fmt: skip
def test_bad_numbers_name_their_field(call, field):
    with pytest.raises(InputError, match=field):
        call()


def _scenario(**batch) -> dict:
    d = yaml.safe_load(EXAMPLE.read_text())
    d["inference"]["batch_job"] |= batch
    return d


@pytest.mark.parametrize(("edit", "needle"), [
    (lambda d: d["inference"].update(requests_per_day=200000), "inference.requests_per_day describes a service"),
    (lambda d: d["inference"].update(arrival="diurnal"), "arrival 'diurnal' describes a service"),
    (lambda d: d["pricing"].update(hours_per_day=4), "pricing.hours_per_day: a batch job's use is its runs"),
    (lambda d: d["inference"]["batch_job"].pop("runs_per_month"), "runs_per_month"),
    (lambda d: d["inference"]["batch_job"].update(runs_per_month=0), "runs_per_month"),
    (lambda d: d["inference"]["batch_job"].update(startup_s=-5), "startup_s"),
])  # fmt: skip
def test_the_scenario_refuses_a_batch_job_mixed_with_a_service_in_one_line(edit, needle):
    d = _scenario()
    edit(d)
    with pytest.raises(CatalogFileError) as exc:
        parse_scenario(d)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def _rec(**batch):
    d = _scenario(**batch)
    d["pricing"] = {"mode": "on-demand", "price_usd_per_gpu_hour": {"h100-sxm": 2.0},
                    "serverless_usd_per_gpu_hour": 4.0}
    d["constraints"] = {"gpu_types": ["h100-sxm"], "max_gpus": 16}
    return plan(parse_scenario(d)).recommendation


def test_the_example_is_costed_once_a_month_not_every_day():
    """The example was costed as 200,000 requests every day for 4 h; a monthly job pays for one run."""
    scn = load_scenario(EXAMPLE)
    assert scn.inference.batch_job is not None and scn.inference.batch_job.runs_per_month == 1
    rec = plan(scn).recommendation
    b = rec["batch_job"]
    assert rec["cost_usd"] == pytest.approx(b["usd_per_run"])  # one run a month
    # a whole month of the same fleet for 4 h a day (the old costing) would be ~4 x 30.4 / 3.3 times dearer
    assert rec["cost_usd"] < rec["gpus"] * rec["price_usd_per_gpu_hour"] * 4 * 365 / 12 / 30


def test_the_plan_charges_start_up_plus_requests_over_throughput_per_run():
    rec = _rec(startup_s=600, runs_per_month=1)
    b, n, price = rec["batch_job"], rec["gpus"], 2.0
    run_h = 200_000 / rec["capacity_requests_per_s"] / 3600 + 600 / 3600
    assert b["run_h"] == pytest.approx(run_h)
    assert rec["cost_usd"] == pytest.approx(n * price * run_h)
    assert b["always_on_usd_per_month"] == pytest.approx(n * price * 730)
    assert b["usd_per_1m_output_tokens"] == pytest.approx(n * price * run_h * 1e6 / (200_000 * 400))
    # serverless at the example's $4/GPU-hour: the same worker-hours (cold start = the start-up) at $4
    assert b["serverless_usd_per_run"] == pytest.approx(n * 4.0 * run_h)
    # four runs a month cost four times one; ten more minutes of start-up cost n x $2 x 1/6 h more per run
    assert _rec(startup_s=600, runs_per_month=4)["cost_usd"] == pytest.approx(4 * rec["cost_usd"])
    assert _rec(startup_s=1200, runs_per_month=1)["cost_usd"] == pytest.approx(rec["cost_usd"] + n * price / 6)


def test_default_start_up_reads_a_replicas_weights_from_network_storage():
    """qwen2.5-14b in bf16 at tp=t: t shards making up 2 bytes x 14.8 B parameters (~29.5 GB) per replica, read at
    EBS gp3's 1,000 MiB/s = 1.048576 GB/s: ~28 s."""
    rec = _rec(runs_per_month=1)
    params = plan(parse_scenario(_scenario())).scenario["model_params_total"]
    assert rec["batch_job"]["startup_s"] == pytest.approx(2 * params / 1e9 / 1.048576, rel=0.02)
