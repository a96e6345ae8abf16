"""Spot training honestly: Daly's (2006) expected completion time against a Monte Carlo simulation of preemptions,
his optimum interval against a numerical minimum, and the planner weighing spot against on-demand on that basis.

The simulation is independent of the closed form: it draws exponential times to preemption, loses the work since
the last checkpoint, restarts (a restart can itself be preempted) and repeats until every segment is done.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.errors import InputError
from scaleright.plan import economics as econ
from scaleright.plan.planner import plan
from scaleright.plan.scenario import parse_scenario


def _simulate(*, work_h: float, tau_h: float, write_h: float, restart_h: float, mtbf_h: float, n: int,
              seed: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Wall-clock hours and preemption counts of ``n`` runs: ``work_h / tau_h`` segments of ``tau_h`` work plus a
    ``write_h`` checkpoint, each retried after a preemption and a ``restart_h`` restart until it completes."""
    rng = np.random.default_rng(seed)
    seg = tau_h + write_h
    total, count = np.zeros(n), np.zeros(n)
    for _ in range(round(work_h / tau_h)):
        pending = np.ones(n, dtype=bool)
        while pending.any():
            x = rng.exponential(mtbf_h, n)
            done, hit = pending & (x >= seg), pending & (x < seg)
            total[done] += seg
            total[hit] += x[hit]
            count[hit] += 1
            need = hit.copy()
            while need.any():  # restart, itself exposed to preemption
                y = rng.exponential(mtbf_h, n)
                ok, lost = need & (y >= restart_h), need & (y < restart_h)
                total[ok] += restart_h
                total[lost] += y[lost]
                count[lost] += 1
                need = lost
            pending = hit
    return total, count


@pytest.mark.parametrize(("work_h", "tau_h", "write_h", "restart_h", "mtbf_h"), [
    (20.0, 2.0, 0.1, 0.3, 4.0),   # a preemption every 4 h: several per run
    (12.0, 1.0, 0.05, 0.5, 1.5),  # harsher: more than one per segment and restarts that get preempted
    (10.0, 10.0, 0.2, 0.1, 50.0),  # one segment, rare preemptions
])  # fmt: skip
def test_daly_expected_time_and_preemptions_match_a_monte_carlo_simulation(work_h, tau_h, write_h, restart_h,
                                                                         mtbf_h):  # fmt: skip
    total, count = _simulate(work_h=work_h, tau_h=tau_h, write_h=write_h, restart_h=restart_h, mtbf_h=mtbf_h,
                             n=20_000, seed=7)  # fmt: skip
    tw = econ.spot_expected_time_h(solve_time_h=work_h, mtbf_h=mtbf_h, checkpoint_write_h=write_h,
                                   restart_h=restart_h, interval_h=tau_h)  # fmt: skip
    se = total.std() / math.sqrt(total.size)
    assert abs(tw - total.mean()) < 4 * se
    pre = econ.spot_expected_preemptions(expected_time_h=tw, mtbf_h=mtbf_h)
    assert abs(pre - count.mean()) < 4 * count.std() / math.sqrt(count.size) + 1e-9


@pytest.mark.parametrize(("write_h", "mtbf_h"), [(0.01, 10.0), (0.1, 10.0), (0.5, 5.0), (1.0, 3.0)])
def test_dalys_interval_is_within_a_hair_of_the_numerical_optimum(write_h, mtbf_h):
    taus = np.linspace(0.01, 3 * mtbf_h, 200_001)
    tw = econ.spot_expected_time_h(solve_time_h=1e4, mtbf_h=mtbf_h, checkpoint_write_h=write_h, restart_h=0.1,
                                   interval_h=taus)  # fmt: skip
    tau = econ.optimal_checkpoint_interval_h(checkpoint_write_h=write_h, mtbf_h=mtbf_h)
    at = econ.spot_expected_time_h(solve_time_h=1e4, mtbf_h=mtbf_h, checkpoint_write_h=write_h, restart_h=0.1)
    assert at == pytest.approx(float(np.min(tw)), rel=2e-3)  # Daly: the estimate is near-optimal for delta < 2M
    assert tau == pytest.approx(float(taus[np.argmin(tw)]), rel=0.2)


def test_youngs_first_order_interval_is_the_limit_of_small_checkpoints():
    # Young (1974): tau = sqrt(2 delta M) when delta << M
    tau = econ.optimal_checkpoint_interval_h(checkpoint_write_h=1e-4, mtbf_h=100.0)
    assert tau == pytest.approx(math.sqrt(2 * 1e-4 * 100.0), rel=2e-3)
    # delta >= 2M: Daly's rule is tau = M
    assert econ.optimal_checkpoint_interval_h(checkpoint_write_h=3.0, mtbf_h=1.0) == 1.0


def test_without_preemptions_a_job_takes_its_work_plus_its_checkpoints():
    assert econ.spot_expected_time_h(solve_time_h=10.0, mtbf_h=math.inf, checkpoint_write_h=0.2,
                                     restart_h=1.0) == pytest.approx(10.2)  # one segment, one final write
    assert econ.spot_expected_time_h(solve_time_h=10.0, mtbf_h=math.inf, checkpoint_write_h=0.2, restart_h=1.0,
                                     interval_h=2.0) == pytest.approx(10.0 * (1 + 0.2 / 2.0))  # fmt: skip
    assert econ.spot_expected_preemptions(expected_time_h=10.2, mtbf_h=math.inf) == 0.0
    with pytest.raises(InputError, match="solve_time_h"):
        econ.spot_expected_time_h(solve_time_h=0.0, mtbf_h=1.0, checkpoint_write_h=0.1, restart_h=0.1)
    with pytest.raises(InputError, match="mtbf_h"):
        econ.optimal_checkpoint_interval_h(checkpoint_write_h=0.1, mtbf_h=-1.0)


# ---- in the planner ---------------------------------------------------------------------------------------------


def _scn(mode: str, **pricing) -> dict:
    return {"model": "llama-3.1-8b", "task": "lora", "training": {"tokens": 3e8, "seq_len": 1024, "global_batch": 8},
            "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 1},
            "pricing": {"mode": mode, **pricing}}  # fmt: skip


def test_spot_options_cost_their_expected_time_and_the_deadline_checks_it():
    calm = plan(parse_scenario(_scn("spot", spot_preemptions_per_hour=0.0))).recommendation
    rough = plan(parse_scenario(_scn("spot", spot_preemptions_per_hour=2.0, spot_reprovision_s=900)))
    rec = rough.recommendation
    assert calm is not None and rec is not None
    s = rec["spot"]
    assert rec["time_h"] == s["expected_time_h"] > s["preemption_free_time_h"] * 1.5
    assert rec["cost_usd"] == pytest.approx(rec["gpus"] * rec["price_usd_per_gpu_hour"] * rec["time_h"], rel=1e-9)
    # a deadline between the preemption-free and the expected time: spot cannot promise it
    deadline = (s["preemption_free_time_h"] + s["expected_time_h"]) / 2
    tight = _scn("spot", spot_preemptions_per_hour=2.0, spot_reprovision_s=900)
    tight["constraints"]["deadline_h"] = deadline
    res = plan(parse_scenario(tight))
    assert res.recommendation is None and res.infeasible["binding"] == "deadline"


def _cheapest(opts: list[dict], kind: str) -> float:
    return min(o["cost_usd"] for o in opts if o["pricing_kind"] == kind)


def test_cheapest_mode_prefers_spot_when_preemptions_are_rare_and_on_demand_when_they_are_not():
    calm = plan(parse_scenario(_scn("cheapest", spot_preemptions_per_hour=0.0)))
    assert _cheapest(calm.all_options, "spot") < _cheapest(calm.all_options, "on-demand")  # $1.15 against $2.50
    rough = plan(parse_scenario(_scn("cheapest", spot_preemptions_per_hour=6.0, spot_reprovision_s=1800)))
    assert _cheapest(rough.all_options, "spot") > _cheapest(rough.all_options, "on-demand")
    assert rough.recommendation is not None and rough.recommendation["pricing_kind"] != "spot"
    assert rough.recommendation["cost_usd"] == min(o["cost_usd"] for o in rough.all_options)


def test_spot_inputs_are_validated_by_name():
    from scaleright.errors import CatalogFileError

    bad = _scn("spot", spot_preemptions_per_hour=-1)
    with pytest.raises(CatalogFileError, match=r"pricing\.spot_preemptions_per_hour: .*greater than or equal to 0"):
        parse_scenario(bad)
    with pytest.raises(CatalogFileError, match=r"pricing\.spot_preemption_rate: unknown key"):
        parse_scenario(_scn("spot", spot_preemption_rate=0.1))
    with pytest.raises(CatalogFileError, match=r"pricing\.mode: must be one of .*'cheapest'"):
        parse_scenario(_scn("hybrid-ish"))


@pytest.mark.parametrize("framework, bytes_per_param", [
    # FSDP2 (the default): the fp32 sharded parameters are the master weights, plus Adam's fp32 momentum and
    # variance: 4 + 8 (torchtitan's distributed checkpoint saves the model and optimizer state dicts)
    (None, 12),
    # DeepSpeed's mixed-precision Adam: 2 bytes of bf16 weights + 12 of fp32 master weights, momentum and variance
    # (Rajbhandari et al., ZeRO, SC 2020: K = 12)
    ("deepspeed", 14),
])
def test_a_checkpoint_holds_one_copy_of_the_weights_and_the_adam_state(framework, bytes_per_param):
    # gradients are not saved
    from scaleright.workload import count_params, load_model

    scn = {"model": "llama-3.1-8b", "task": "full-finetune",
           "training": {"tokens": 1e8, "seq_len": 2048, "global_batch": 32},
           "constraints": {"gpu_types": ["h100-sxm"], "max_gpus": 16}, "pricing": {"mode": "spot"}}  # fmt: skip
    if framework is not None:
        scn["training"]["framework"] = framework
    res = plan(parse_scenario(scn))
    params = count_params(load_model("llama-3.1-8b")).total
    assert res.all_options
    for o in res.all_options:
        assert not o["layout"]["offload_optimizer"]  # (an offloaded optimizer's state is in host memory)
        assert o["spot"]["checkpoint_gb"] == pytest.approx(params * bytes_per_param / 1e9, rel=0.01), o["layout"]
        nodes = -(-o["gpus"] // 8)
        assert o["spot"]["checkpoint_gb_per_node"] == pytest.approx(o["spot"]["checkpoint_gb"] / nodes)


def test_the_spot_example_weighs_every_kind_at_its_expected_time():
    from pathlib import Path

    from scaleright.plan.scenario import load_scenario

    res = plan(load_scenario(Path(__file__).resolve().parent.parent / "examples" / "spot-training-preemptions.yaml"))
    rec = res.recommendation
    assert rec is not None and rec["time_h"] <= 48
    kinds = {o["pricing_kind"] for o in res.all_options}
    assert {"spot", "on-demand", "own"} <= kinds
    for o in res.all_options:
        if o["pricing_kind"] == "spot":
            assert o["time_h"] == o["spot"]["expected_time_h"] > o["spot"]["preemption_free_time_h"]
    assert rec["cost_usd"] == min(o["cost_usd"] for o in res.all_options if o["time_h"] <= 48)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.floats(0.1, 1e4), st.floats(1e-4, 2.0), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(1.01, 4.0))
def test_preemptions_checkpoints_and_restarts_never_make_a_job_faster(work_h, rate, write_h, restart_h, more):
    def tw(rate_: float, write: float, restart: float) -> float:
        return float(econ.spot_expected_time_h(solve_time_h=work_h, mtbf_h=1 / rate_, checkpoint_write_h=write,
                                               restart_h=restart))  # fmt: skip

    base = tw(rate, write_h, restart_h)
    assert base >= work_h * (1 - 1e-12)
    assert tw(rate * more, write_h, restart_h) >= base * (1 - 1e-9)  # more preemptions
    assert tw(rate, write_h * more + 1e-3, restart_h) >= base * (1 - 1e-9)  # slower checkpoints
    assert tw(rate, write_h, restart_h * more + 1e-3) >= base * (1 - 1e-9)  # slower restarts


def test_a_lora_checkpoint_writes_only_the_adapters_state_but_a_restart_reads_the_base_back():
    res = plan(parse_scenario(_scn("spot", spot_preemptions_per_hour=0.5)))
    s = res.recommendation["spot"]
    from scaleright.workload import count_params, load_model

    base_gb = count_params(load_model("llama-3.1-8b")).total * 2 / 1e9  # bf16 base weights
    assert s["checkpoint_gb"] < 0.05 * base_gb  # adapters: well under 5 % of the base
    bw = 1000 * 2**20 / 1e9  # the default throughput, EBS gp3's 1,000 MiB/s
    assert s["checkpoint_write_s"] == pytest.approx(s["checkpoint_gb"] / bw, rel=1e-9)
    assert s["restart_s"] >= base_gb / bw  # the base is read back after a preemption
