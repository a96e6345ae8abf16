"""Batch jobs vs services (issue 11 item 6): an occasional job costed per run and per month, against the same
fleet always on (its idle cost) and serverless with a billed cold start; hand-computed closed forms, the
scenario's boundary, and the planner on examples/batch-job-occasional.yaml."""

from __future__ import annotations

import math
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


# --- a service on a serverless endpoint ------------------------------------------------------------------------


def test_serverless_keeps_ceil_workers_warm_and_cold_starts_each_rise():
    # 2, 4, 2 workers' worth of load in three 1 h slots: 8 warm worker-hours; the rise 2 -> 4 is 2 cold starts
    # (the day repeats: 2 -> 2 at the wrap is none), each 90 s on 2 GPUs
    d = econ.serverless_service_gpu_hours(rate_per_s=[2.0, 4.0, 2.0], slot_h=1.0, capacity_per_worker_per_s=1.0,
                                          gpus_per_worker=2, cold_start_s=90, idle_timeout_s=60, service_s=5)
    assert d["warm_gpu_h"] == pytest.approx(8 * 2)
    assert d["cold_starts"] == pytest.approx(2)
    assert d["cold_start_gpu_h"] == pytest.approx(2 * 90 / 3600 * 2)
    assert d["gpu_h"] == pytest.approx(16 + 0.1)


def test_sporadic_load_scales_to_zero_between_poisson_arrivals():
    """0.01 req/s for one hour, a worker warm 60 s after each 10 s request: billed share 1 - e^-0.6 + 0.01 x 10
    = 0.551; a request finds it cold with probability e^-0.6: 36 arrivals x 0.549 = 19.8 cold starts."""
    d = econ.serverless_service_gpu_hours(rate_per_s=0.01, slot_h=1.0, capacity_per_worker_per_s=1.0,
                                          gpus_per_worker=1, cold_start_s=30, idle_timeout_s=60, service_s=10)
    assert d["warm_gpu_h"] == pytest.approx(1 - math.exp(-0.6) + 0.1)
    assert d["cold_starts"] == pytest.approx(0.01 * 3600 * math.exp(-0.6))
    assert d["cold_starts"] == pytest.approx(19.76, abs=0.01)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(rate=st.floats(1e-4, 50), tau=st.floats(0, 3600), svc=st.floats(0, 30), cap=st.floats(0.05, 20))
def test_serverless_bills_at_least_the_work_and_a_longer_timeout_fewer_cold_starts(rate, tau, svc, cap):
    kw = dict(rate_per_s=rate, slot_h=1.0, capacity_per_worker_per_s=cap, gpus_per_worker=1, cold_start_s=20,
              service_s=svc)  # fmt: skip
    d = econ.serverless_service_gpu_hours(idle_timeout_s=tau, **kw)
    longer = econ.serverless_service_gpu_hours(idle_timeout_s=2 * tau + 1, **kw)
    assert d["warm_gpu_h"] >= min(1.0, rate * svc, rate / cap) - 1e-9  # the work itself, one slot of one hour
    assert longer["cold_starts"] <= d["cold_starts"] + 1e-9
    assert d["warm_gpu_h"] <= max(1.0, math.ceil(rate / cap)) + 1e-9


def test_a_sporadic_service_weighs_serverless_against_always_on_in_the_plan():
    data = {"model": "llama-3.1-8b", "task": "inference",
            "inference": {"requests_per_s": 0.01, "input_len": 1000, "output_len": 300, "tpot_slo_s": 0.05},
            "constraints": {"gpu_types": ["l40s"]},
            "pricing": {"price_usd_per_gpu_hour": {"l40s": 1.0}, "serverless_usd_per_gpu_hour": 2.5}}  # fmt: skip
    res = plan(parse_scenario(data))
    s = res.recommendation["serverless"]
    assert s["always_on_usd_per_month"] == pytest.approx(1 * 1.0 * 730)  # one L40S all month at $1
    assert s["serverless_usd_per_month"] == pytest.approx(2.5 * s["serverless_gpu_hours_per_month"])
    # a sporadic load bills well under the 730 h always on, but not less than its cold starts
    assert s["cold_start_gpu_hours_per_month"] < s["serverless_gpu_hours_per_month"] < 730
    assert any(e["topic"] == "serverless" for e in res.explanations)


def test_a_batch_run_on_spot_pays_for_restarts_and_the_requests_in_flight():
    """Daly (2006) with a free checkpoint after every request: a replica preempted every M = 2 h (0.5 an
    instance-hour) restarts in R = 600 s and loses the requests in flight (tau = one request's end-to-end time):
    T_w = M e^(R/M) (e^(tau/M) - 1) T_s / tau."""
    d = _scenario(startup_s=600, runs_per_month=1)
    d["pricing"] = {"mode": "spot", "price_usd_per_gpu_hour": {"h100-sxm": 2.0}, "spot_preemptions_per_hour": 0.5}
    d["constraints"] = {"gpu_types": ["h100-sxm"], "max_gpus": 16}
    rec = plan(parse_scenario(d)).recommendation
    b = rec["batch_job"]
    ts = 200_000 / rec["capacity_requests_per_s"] / 3600
    tau, m, r = rec["e2e_latency_s"] / 3600, 2.0, 600 / 3600
    tw = m * math.exp(r / m) * math.expm1(tau / m) * ts / tau
    assert b["spot"]["expected_work_h"] == pytest.approx(tw)
    assert b["run_h"] == pytest.approx(tw + r)
    assert rec["cost_usd"] == pytest.approx(rec["gpus"] * 2.0 * (tw + r))
    assert tw > ts * 1.05  # about 9 % more work: exp(1/12) - 1 from restarts, plus the lost requests
