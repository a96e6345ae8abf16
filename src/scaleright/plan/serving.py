"""Inference fleets sized with the serving simulator, and the levers that change their cost (issue #10, item 3).

Sizing, per GPU type × tensor-parallel layout:
1. the capacity of one replica: the highest Poisson (or gamma, with ``burstiness``) request rate at which its p99
   TTFT and p99 TPOT stay within the scenario's SLOs (``serve.capacity``: 400 requests per trial, bisected to
   5 %); a TPOT SLO the scenario does not set is taken as 1 s, said in the output; without a TTFT SLO nothing is
   simulated (a finite trial cannot tell a queue that grows without bound from a long one without a limit);
2. replicas: R = ⌈peak rate · (1 + headroom) / capacity⌉, then fewer while a simulation of R − 1 replicas behind a
   least-outstanding router at peak · (1 + headroom) still meets both p99 SLOs (a fleet multiplexes its load; at
   most three steps down, and never below ⌈peak · (1 + headroom) / saturated rate⌉: past the rate a replica
   completes under a permanent backlog, ``serve.simulate.saturated_rate``, its queue grows without bound, which
   a short trial under a generous TTFT limit would not see). A trace is replayed on the fleet instead, at
   (1 + headroom) times its arrival rate.
   Fleets of more than ``MAX_VERIFIED_REPLICAS`` are not simulated whole: R single-replica capacities, said so.
The peak is the rate for ``constant`` arrivals and rate · (1 + amplitude) for ``diurnal`` ones.

Only the cheapest steady-state candidates are simulated (``search.evaluate_inference`` ranks them; at most
``MAX_SIMULATED`` per plan, cheapest first, until the cheapest option is a simulated one), and capacities are
cached per process: a plan stays within seconds.

Levers (each a simulation on the recommended GPU and layout, same SLOs and headroom): batching (one sequence at a
time, ``max_num_seqs = 1``), caching (the scenario's prefix / result cache hit rates against none), quantisation
(16-bit weights and KV cache against the scenario's precision, or fp8 against a 16-bit scenario where the GPU runs
fp8), autoscaling (diurnal arrivals: replicas following the hourly rate, each carrying what a replica of the
simulated peak fleet carried, against the peak count all day; cold starts and scale-down delays are left to
``serve simulate --fleet``), pooling (``inference.services``: one shared pool against one pool per service, each
the fewest replicas whose simulation meets every service's p99 SLOs), routing (``inference.tiers``: a cascade of
smaller models, each tier's pool sized by simulation, the whole cascade then simulated end to end; it saves only
if every request's p99s, measured from its first arrival, meet the SLOs).

Costs by schedule (``economics.batch``): an occasional job (``inference.batch_job``) is paid per run, start-up plus
requests / the fleet's sustained throughput (``batch_run``, ``batch_costs``), against the same fleet always on and
serverless; a service is weighed against a serverless endpoint over its load curve (``serverless_service``). The
serverless price is the scenario's ``pricing.serverless_usd_per_gpu_hour``, else the GPU's cheapest ``serverless``
catalog offer (``serverless_price``); a GPU with neither says so.
"""

from __future__ import annotations

import math
from typing import Any

from scaleright.errors import InputError

__all__ = ["MAX_SIMULATED", "TRIAL_REQUESTS", "batch_run", "batch_costs", "batch_explanation", "hourly_rates",
           "levers", "serverless_price", "serverless_service", "serverless_explanation", "simulate_option"]

MAX_SIMULATED = 8  # (gpu, tp) candidates simulated per plan
MAX_VERIFIED_REPLICAS = 32  # fleets above this are sized from the single-replica capacity, not simulated whole
TRIAL_REQUESTS = 400  # requests per capacity trial
DEFAULT_TPOT_P99_MS = 1_000.0  # when the scenario sets no TPOT SLO
_CACHE: dict[tuple, tuple[float, Any]] = {}
_SAT: dict[tuple, float] = {}


def _replica_weights_gb(memory_breakdown_gb: dict, tp: int) -> float:
    """The weights one replica loads at start-up: the per-GPU weights of its ``tp`` shards together."""
    return memory_breakdown_gb.get("weights", 0.0) * tp


def batch_run(inf, pricing, cand, *, spot: bool = False, gpus_per_node: int = 8) -> dict:
    """An occasional job (``inference.batch_job``) on a steady-state candidate ``cand`` (``economics.batch``): the
    fleet works through the run at its capacity (every replica at its largest SLO-meeting batch) after a paid
    start-up, the scenario's ``startup_s`` or else a replica's weights read from network storage at
    ``pricing.checkpoint_write_gb_per_s`` (provisioning not counted). ``use_hours_per_day`` is the month's paid
    hours per day, the use an owned fleet would see.

    On spot (``spot``) each replica is preempted independently at ``pricing.spot_preemptions_per_hour`` per instance
    (``ceil(tp / gpus_per_node)`` instances a replica); finished requests are kept (results written as they
    complete), so a preemption loses the requests in flight (at most one request's end-to-end latency of work, the
    checkpoint interval with a free checkpoint) and costs a restart (start-up again plus
    ``pricing.spot_reprovision_s``): Daly's expected time (``economics.spot``) of the replica's share of the work."""
    from scaleright.plan import economics as econ
    from scaleright.plan.economics._units import DAYS_PER_MONTH, HOURS_PER_DAY, SECONDS_PER_HOUR

    bj = inf.batch_job
    weights_gb = _replica_weights_gb(cand.memory_breakdown_gb, cand.tp)
    if bj.startup_s is not None:
        startup_s, why = float(bj.startup_s), "inference.batch_job.startup_s"
    else:
        startup_s = weights_gb / pricing.checkpoint_write_gb_per_s
        why = (f"{weights_gb:.3g} GB of weights per replica read at {pricing.checkpoint_write_gb_per_s:.3g} GB/s "
               "(pricing.checkpoint_write_gb_per_s); provisioning not counted")  # fmt: skip
    work_h = bj.requests_per_run / cand.capacity_requests_per_s / SECONDS_PER_HOUR
    preempt: dict | None = None
    if spot and pricing.spot_preemptions_per_hour > 0:
        rate = pricing.spot_preemptions_per_hour * math.ceil(cand.tp / gpus_per_node)
        restart_h = (startup_s + pricing.spot_reprovision_s) / SECONDS_PER_HOUR
        in_flight_h = min(cand.e2e_latency_s / SECONDS_PER_HOUR, work_h)
        expected = float(econ.spot_expected_time_h(solve_time_h=work_h, mtbf_h=1.0 / rate, checkpoint_write_h=0.0,
                                                    restart_h=restart_h, interval_h=in_flight_h))  # fmt: skip
        preempt = {"preemption_free_work_h": work_h, "expected_work_h": expected, "preemptions_per_hour": rate,
                   "expected_preemptions_per_replica": expected * rate, "restart_s": restart_h * SECONDS_PER_HOUR,
                   "lost_per_preemption_s": in_flight_h * SECONDS_PER_HOUR}  # fmt: skip
        work_h = expected
    run_h = work_h + startup_s / SECONDS_PER_HOUR
    return {"requests_per_run": bj.requests_per_run, "runs_per_month": bj.runs_per_month,
            "run_within_h": bj.run_within_h, "work_h": work_h, "startup_s": startup_s, "startup_source": why,
            "run_h": run_h, "busy_share": (preempt or {}).get("preemption_free_work_h", work_h) / run_h,
            "use_hours_per_day": min(HOURS_PER_DAY, run_h * bj.runs_per_month / DAYS_PER_MONTH),
            "spot": preempt}  # fmt: skip


def serverless_price(pricing, gpu_id: str, cat) -> dict:
    """The serverless price per GPU-hour a comparison uses for ``gpu_id``: ``pricing.serverless_usd_per_gpu_hour``
    when the scenario gives one (it overrides the catalog), else the cheapest ``serverless`` offer of the catalog
    ``cat`` for that GPU (``catalog.find_price``: fresh before stale, under ``pricing.max_price_age_days`` and
    ``prices_as_of``). Keys: ``usd_per_gpu_hour`` (None: not priced), ``provider``, ``date``, ``age_days``,
    ``stale``, ``source``, ``notes`` (the row's notes, e.g. CPU and RAM billed extra; or why there is no price and
    how to add one)."""
    from scaleright.catalog import find_price

    if pricing.serverless_usd_per_gpu_hour is not None:
        return {"usd_per_gpu_hour": float(pricing.serverless_usd_per_gpu_hour), "provider": "scenario override",
                "date": None, "age_days": None, "stale": False, "source": "pricing.serverless_usd_per_gpu_hour",
                "notes": ""}  # fmt: skip
    try:
        row = find_price(gpu_id, "serverless", catalog=cat, max_age_days=pricing.max_price_age_days,
                         today=pricing.prices_as_of)  # fmt: skip
    except InputError as exc:
        return {"usd_per_gpu_hour": None, "provider": None, "date": None, "age_days": None, "stale": None,
                "source": None, "notes": str(exc)}  # fmt: skip
    return {"usd_per_gpu_hour": float(row.usd or 0.0), "provider": row.provider, "date": row.date,
            "age_days": row.age_days, "stale": bool(row.stale), "source": row.source, "notes": row.notes}


def _offer_text(o: dict) -> str:
    """``$3.95/GPU-hour (Modal (serverless; CPU/RAM extra), 2026-09-09)``: the price and where it comes from."""
    if o["provider"] == "scenario override":
        return f"${o['usd_per_gpu_hour']:g}/GPU-hour (pricing.serverless_usd_per_gpu_hour)"
    stale = (f", STALE: {o['age_days']} days old" if o["stale"] and o["age_days"] is not None
             else ", STALE: undated" if o["stale"] else "")  # fmt: skip
    return f"${o['usd_per_gpu_hour']:g}/GPU-hour ({o['provider']}, {o['date'] or 'undated'}{stale})"


def batch_costs(run: dict, *, gpus: int, usd_per_gpu_hour: float, output_tokens_per_run: float,
                serverless: dict) -> dict:  # fmt: skip
    """``run`` (``batch_run``) priced: per run, per month, the same fleet always on and its idle cost, and a
    serverless endpoint (one cold start per worker per run) at ``serverless`` (``serverless_price``) when it has a
    price; ``serverless_offer`` carries that offer."""
    from scaleright.plan import economics as econ
    from scaleright.plan.economics._units import TOKENS_PER_MILLION

    c = econ.batch_costs_usd(gpus=gpus, usd_per_gpu_hour=usd_per_gpu_hour, work_h=run["work_h"],
                             startup_s=run["startup_s"], runs_per_month=run["runs_per_month"])  # fmt: skip
    out = run | {k: float(v) for k, v in c.items()}
    out["usd_per_1m_output_tokens"] = out["usd_per_run"] * TOKENS_PER_MILLION / output_tokens_per_run
    price = serverless["usd_per_gpu_hour"]
    if price is None:
        out |= {"serverless_usd_per_run": None, "serverless_usd_per_month": None,
                "serverless_note": f"not priced: {serverless['notes']}"}  # fmt: skip
    else:
        per_run = float(econ.serverless_cost_usd(gpus=gpus, serverless_usd_per_gpu_hour=price,
                                                 work_h=run["work_h"], cold_starts=1, cold_start_s=run["startup_s"]))
        out |= {"serverless_usd_per_run": per_run, "serverless_usd_per_month": per_run * run["runs_per_month"],
                "serverless_note": "one cold start per worker per run, billed; same workers and throughput"}
    return out | {"serverless_offer": serverless}


def batch_explanation(rec: dict) -> dict:
    """The "Batch job vs service" explanation of a recommendation carrying ``batch_job`` (``batch_costs``)."""
    from scaleright.fmt import usd as format_usd

    b = rec["batch_job"]
    runs = b["runs_per_month"]
    text = (f"One run of {b['requests_per_run']:,.0f} requests takes {b['run_h']:.3g} h on {rec['gpus']} x "
            f"{rec['gpu']} ({b['work_h']:.3g} h of work at {rec['capacity_requests_per_s']:.3g} req/s + "
            f"{b['startup_s']:.0f} s start-up: {b['startup_source']}) and costs {format_usd(b['usd_per_run'])}; "
            f"{runs:g} run(s) a month cost {format_usd(b['usd_per_month'])}. Kept up all month as a service the "
            f"same fleet costs {format_usd(b['always_on_usd_per_month'])}, {format_usd(b['idle_usd_per_month'])} of "
            f"it idle ({b['always_on_over_batch']:.3g}x the runs).")  # fmt: skip
    sp = b.get("spot")
    if sp:
        text += (f" On spot each replica expects {sp['expected_preemptions_per_replica']:.2g} preemption(s) a run "
                 f"({sp['preemptions_per_hour']:.2g} an hour), each a {sp['restart_s']:.0f} s restart and up to "
                 f"{sp['lost_per_preemption_s']:.0f} s of requests in flight lost: {sp['expected_work_h']:.3g} h of "
                 f"work expected against {sp['preemption_free_work_h']:.3g} h (Daly 2006).")  # fmt: skip
    if b["serverless_usd_per_run"] is not None:
        text += (f" A serverless endpoint (cold start billed) at {_offer_text(b['serverless_offer'])} would cost "
                 f"{format_usd(b['serverless_usd_per_run'])} a run, {format_usd(b['serverless_usd_per_month'])} a "
                 "month.")  # fmt: skip
    else:
        text += f" Serverless {b['serverless_note']}."
    return {"topic": "batch_job", "title": "Batch job vs service", "text": text, "data": b}


def serverless_service(scn, rec: dict, rate: float, cat) -> dict | None:
    """The recommended always-on service against a serverless endpoint of the same workers (``economics.batch.
    serverless_service_gpu_hours``): the load by hour (diurnal) or flat over ``pricing.hours_per_day``, one worker
    per replica of the recommended layout at its capacity, a cold start loading a replica's weights from network
    storage (as ``batch_run``), priced at ``serverless_price`` for the recommended GPU (the USD figures None when
    it has no price); None for a batch job (``batch_costs`` weighs serverless per run)."""
    from scaleright.plan import economics as econ
    from scaleright.plan.economics._units import DAYS_PER_MONTH

    p, inf = scn.pricing, scn.inference
    if inf.batch_job is not None:
        return None
    offer = serverless_price(p, rec["gpu"], cat)
    lay = rec["layout"]
    tp = lay["tp"]
    cap = rec["capacity_requests_per_s"] / lay["replicas"]
    cold_s = _replica_weights_gb(rec["memory_breakdown_gb"], tp) / p.checkpoint_write_gb_per_s
    if inf.arrival == "diurnal":
        rates = hourly_rates(inf, rate)
        slot = p.hours_per_day / 24
    else:
        rates, slot = [rate], p.hours_per_day
    day = econ.serverless_service_gpu_hours(rate_per_s=rates, slot_h=slot, capacity_per_worker_per_s=cap,
                                            gpus_per_worker=tp, cold_start_s=cold_s,
                                            idle_timeout_s=p.serverless_idle_timeout_s,
                                            service_s=rec["e2e_latency_s"], headroom=inf.headroom)  # fmt: skip
    month = {k: v * DAYS_PER_MONTH for k, v in day.items()}
    price = offer["usd_per_gpu_hour"]
    return {"serverless_usd_per_month": None if price is None else month["gpu_h"] * price,
            "always_on_usd_per_month": rec["cost_usd"],
            "serverless_gpu_hours_per_month": month["gpu_h"], "cold_starts_per_month": month["cold_starts"],
            "cold_start_gpu_hours_per_month": month["cold_start_gpu_h"], "cold_start_s": cold_s,
            "idle_timeout_s": p.serverless_idle_timeout_s, "serverless_usd_per_gpu_hour": price,
            "always_on_gpu_hours_per_month": rec["gpus"] * rec["service_hours_per_month"],
            "serverless_offer": offer}  # fmt: skip


def serverless_explanation(s: dict) -> dict:
    """The "Serverless vs always-on" explanation of ``serverless_service``'s numbers (one line when the GPU has no
    serverless price)."""
    from scaleright.fmt import usd as format_usd

    if s["serverless_usd_per_month"] is None:
        text = (f"Serverless not priced: {s['serverless_offer']['notes']}. It would bill "
                f"{s['serverless_gpu_hours_per_month']:,.0f} GPU-hours a month against "
                f"{s['always_on_gpu_hours_per_month']:,.0f} always on.")  # fmt: skip
        return {"topic": "serverless", "title": "Serverless vs always-on", "text": text, "data": s}
    cheaper = "serverless" if s["serverless_usd_per_month"] < s["always_on_usd_per_month"] else "always-on"
    text = (f"Serverless at {_offer_text(s['serverless_offer'])} bills "
            f"{s['serverless_gpu_hours_per_month']:,.0f} GPU-hours a month ({s['cold_starts_per_month']:,.0f} cold "
            f"starts of {s['cold_start_s']:.0f} s, idle timeout {s['idle_timeout_s']:g} s): "
            f"{format_usd(s['serverless_usd_per_month'])} against {format_usd(s['always_on_usd_per_month'])} "
            f"always on ({s['always_on_gpu_hours_per_month']:,.0f} GPU-hours): {cheaper} is cheaper. A request "
            "that meets a cold worker waits the cold start too.")  # fmt: skip
    return {"topic": "serverless", "title": "Serverless vs always-on", "text": text, "data": s}


def _slos(inf) -> tuple[float, float]:
    if not inf.ttft_slo_s:
        raise InputError("sizing by simulation needs inference.ttft_slo_s")
    return inf.ttft_slo_s * 1e3, (inf.tpot_slo_s * 1e3 if inf.tpot_slo_s else DEFAULT_TPOT_P99_MS)


def _kw(inf, gpu, system, tp: int, cal, max_num_seqs: int, **over) -> dict:
    kw = dict(gpu=gpu, system=system, tp=tp, gpus=tp, input_len=inf.input_len, output_len=inf.output_len,
              precision=inf.precision, kv_precision=inf.kv_precision, engine=inf.engine, cal=cal,
              max_num_seqs=max_num_seqs, max_num_batched_tokens=max(8192, max_num_seqs),
              prefix_cache_hit_rate=inf.prefix_cache_hit_rate,
              result_cache_hit_rate=inf.result_cache_hit_rate)  # fmt: skip
    if inf.burstiness != 1.0:
        kw |= dict(arrival="gamma", burstiness=inf.burstiness)
    return kw | over


def _key(v: object) -> object:
    return v if isinstance(v, (int, float, str, type(None))) else repr(v)


def replica_capacity(spec, inf, gpu, system, tp: int, cal, max_num_seqs: int, **over) -> tuple[float, Any]:
    """(requests/s one replica carries within both p99 SLOs, the simulation at that rate); cached per process."""
    from scaleright.serve.simulate import capacity

    ttft, tpot = _slos(inf)
    kw = _kw(inf, gpu, system, tp, cal, max_num_seqs, **over)
    key = (repr(spec), ttft, tpot, tuple(sorted((k, _key(v)) for k, v in kw.items())))
    hit = _CACHE.get(key)
    if hit is None:
        sat = saturated(spec, inf, gpu, system, tp, cal, max_num_seqs, **over)
        best, res, _ = capacity(spec, slo_ttft_p99_ms=ttft, slo_tpot_p99_ms=tpot, requests=TRIAL_REQUESTS,
                                rel_tol=0.05, saturated=sat, **kw)  # fmt: skip
        hit = _CACHE[key] = (best, res)
    return hit


def saturated(spec, inf, gpu, system, tp: int, cal, max_num_seqs: int, **over) -> float:
    """Requests/s one replica completes under a permanent backlog (``serve.simulate.saturated_rate``; 0 when a
    request is longer than its KV cache): no fleet of R replicas carries more than R times it. Cached per
    process."""
    from scaleright.serve.simulate import build_model, saturated_rate

    kw = _kw(inf, gpu, system, tp, cal, max_num_seqs, **over)
    key = ("saturated", repr(spec), tuple(sorted((k, _key(v)) for k, v in kw.items())))
    hit = _SAT.get(key)
    if hit is None:
        names = ("gpu", "system", "tp", "precision", "kv_precision", "engine", "cal", "max_num_seqs",
                 "max_num_batched_tokens")
        model = build_model(spec, **{k: kw[k] for k in names})
        rate, res = saturated_rate(spec, model=model, clients=max_num_seqs, **kw)
        hit = _SAT[key] = 0.0 if res.rejected else rate
    return hit


def _fleet_ok(spec, inf, gpu, system, tp, cal, max_num_seqs, replicas: int, rate: float, trace, **over):
    from scaleright.serve.simulate import simulate

    ttft, tpot = _slos(inf)
    kw = _kw(inf, gpu, system, tp, cal, max_num_seqs, **over) | dict(gpus=replicas * tp, router="least-outstanding")
    if trace is not None:
        res = simulate(spec, trace=trace, **kw)
    else:
        res = simulate(spec, rate=rate, requests=TRIAL_REQUESTS * replicas, **kw)
    tp99 = res.tpot_ms["p99"]
    good = res.rejected == 0 and res.ttft_ms["p99"] <= ttft and (math.isnan(tp99) or tp99 <= tpot)
    return good, res


def _scaled_trace(path: str, factor: float):
    """The trace with arrival times divided by ``factor`` (its rate times ``factor``), as a temporary CSV."""
    import tempfile

    from scaleright.serve.arrivals import read_trace

    t, i, o = read_trace(path, flag="inference.trace")
    f = tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False)  # noqa: SIM115 (returned path, read later)
    with f:
        f.write("arrival_time_s,input_tokens,output_tokens\n")
        for a, x, y in zip(t / factor, i, o, strict=True):
            f.write(f"{float(a)!r},{int(x)},{int(y)}\n")
    return f.name


def trace_rate(path: str) -> float:
    """Mean arrival rate of a trace CSV (requests over its span)."""
    from scaleright.serve.arrivals import read_trace

    t, _, _ = read_trace(path, flag="inference.trace")
    span = float(t[-1] - t[0])
    if not span > 0:
        raise InputError(f"inference.trace={path}: its arrivals span no time; need at least two distinct times")
    return len(t) / span


def peak_rate(inf, rate: float) -> float:
    return rate * (1 + inf.diurnal_amplitude) if inf.arrival == "diurnal" else rate


def hourly_rates(inf, rate: float) -> list[float]:
    """A diurnal load's 24 hourly rates, each at its hour's midpoint: rate · (1 + amplitude · sin(2π (h + ½) / 24))
    (the arrival model of ``serve.arrivals``)."""
    return [rate * (1 + inf.diurnal_amplitude * math.sin(2 * math.pi * (h + 0.5) / 24)) for h in range(24)]


def simulate_option(spec, inf, gpu, system, tp: int, cal, *, rate: float, max_batch: int, max_gpus: int,
                    **over) -> dict:  # fmt: skip
    """Replicas, simulated p99s and capacity of the fleet on ``gpu`` at ``tp`` (module docstring, steps 1-2)."""
    seqs = max(1, min(256, max_batch))
    over.setdefault("max_num_seqs", seqs)
    seqs = over.pop("max_num_seqs")
    cap1, at_cap = replica_capacity(spec, inf, gpu, system, tp, cal, seqs, **over)
    sat1 = saturated(spec, inf, gpu, system, tp, cal, seqs, **over)
    if cap1 <= 0:
        return {"fits": False, "reason": "even 1/1024 request/s misses the p99 SLOs on one replica"}
    target = peak_rate(inf, rate) * (1 + inf.headroom)
    n = max(1, math.ceil(target / cap1 - 1e-9))
    if n * tp > max_gpus:
        return {"fits": False, "reason": f"needs {n * tp} GPUs > max_gpus {max_gpus}", "replica_capacity": cap1}
    if n > MAX_VERIFIED_REPLICAS:  # too many to simulate within a plan: n single-replica capacities
        return {"fits": True, "replicas": n, "gpus": n * tp, "replica_capacity": cap1, "batch": seqs,
                "ttft_p99_s": at_cap.ttft_ms["p99"] / 1e3, "tpot_p99_s": at_cap.tpot_ms["p99"] / 1e3,
                "e2e_p99_s": at_cap.e2e_ms["p99"] / 1e3, "gpu_busy_share": at_cap.gpu_utilisation,
                "sized_at_requests_per_s": target, "fleet_simulated": False,
                **_charts(at_cap, inf, rate, cap1, tp, simulated="one replica at its capacity")}  # fmt: skip
    trace = _scaled_trace(inf.trace, 1 + inf.headroom) if inf.arrival == "trace" else None
    try:
        good, res = _fleet_ok(spec, inf, gpu, system, tp, cal, seqs, n, target, trace, **over)
        steps = 0
        while not good and n * tp < max_gpus and steps < 6:  # a trace's bursts can need more than its mean
            n += 1
            steps += 1
            good, res = _fleet_ok(spec, inf, gpu, system, tp, cal, seqs, n, target, trace, **over)
        if not good:
            return {"fits": False, "reason": f"{n} replicas still miss the p99 SLOs", "replica_capacity": cap1}
        # never below the replicas whose saturated rates carry the target: a short trial at a generous TTFT limit
        # can pass an overloaded fleet whose queue has not yet grown past it
        floor = math.ceil(target / sat1 - 1e-9) if trace is None and sat1 > 0 else 1
        for _ in range(3):
            if n <= max(1, floor):
                break
            ok, r2 = _fleet_ok(spec, inf, gpu, system, tp, cal, seqs, n - 1, target, trace, **over)
            if not ok:
                break
            n, res = n - 1, r2
    finally:
        if trace is not None:
            import os

            os.unlink(trace)
    return {"fits": True, "replicas": n, "gpus": n * tp, "replica_capacity": cap1, "batch": seqs,
            "ttft_p99_s": res.ttft_ms["p99"] / 1e3, "tpot_p99_s": res.tpot_ms["p99"] / 1e3,
            "e2e_p99_s": res.e2e_ms["p99"] / 1e3, "gpu_busy_share": res.gpu_utilisation,
            "sized_at_requests_per_s": target if trace is None else trace_rate(inf.trace) * (1 + inf.headroom),
            "fleet_simulated": True, **_charts(res, inf, rate, cap1, tp, simulated=f"the fleet of {n} replicas")}


CHART_INTERVALS = 60  # time-series intervals kept per simulated option (its JSON stays a few kB)
LOAD_SPAN = 2.0  # the cost-against-load steps cover loads up to this multiple of the scenario's rate
MAX_LOAD_STEPS = 64


def _charts(res, inf, rate: float, cap1: float, tp: int, *, simulated: str) -> dict:
    """The report's serving charts of an option: the simulation's timeline and latency CDF (``serve.report``), and
    the GPUs against load: k replicas carry every load up to the one whose peak · (1 + headroom) is k replica
    capacities — the single-replica sizing of step 2 before the fleet step-down (the simulated fleet at the
    scenario's load can sit below it); one point per step, ``MAX_LOAD_STEPS`` at most (evenly thinned)."""
    from scaleright.serve.report import chart_data

    per_replica = cap1 / ((1 + inf.headroom) * peak_rate(inf, 1.0))  # offered requests/s one replica carries
    top = max(2, math.ceil(LOAD_SPAN * rate / per_replica - 1e-9))
    ks = sorted({max(1, round(1 + i * (top - 1) / (MAX_LOAD_STEPS - 1))) for i in range(MAX_LOAD_STEPS)})
    loads = [{"requests_per_s": k * per_replica, "replicas": k, "gpus": k * tp} for k in ks]
    return {"serving_charts": chart_data(res, most=CHART_INTERVALS) | {"simulated": simulated},
            "gpus_against_load": loads}


def pooling(spec, inf, gpu, system, tp: int, cal, *, rate: float, max_batch: int) -> tuple[int, int]:
    """(replicas of one pool shared by ``inf.services``, replicas of one pool per service), each the fewest whose
    simulation meets every service's p99 SLOs at its share of peak · (1 + headroom) (``MAX_VERIFIED_REPLICAS`` at
    most per pool)."""
    import numpy as np

    from scaleright.serve.arrivals import gamma
    from scaleright.serve.fleet import PoolSpec, ServiceSpec, run_fleet
    from scaleright.serve.kernel import Environment
    from scaleright.serve.replica import SchedulerConfig
    from scaleright.serve.simulate import build_model, kv_blocks_per_replica

    ttft, tpot = _slos(inf)
    seqs = max(1, min(256, max_batch))
    model = build_model(spec, gpu=gpu, system=system, tp=tp, precision=inf.precision, kv_precision=inf.kv_precision,
                        engine=inf.engine, cal=cal, max_num_seqs=seqs, max_num_batched_tokens=max(8192, seqs))
    blocks = kv_blocks_per_replica(spec, model, gpu=gpu, tp=tp, pp=1, ep=1, precision=inf.precision,
                                   max_num_seqs=seqs, max_num_batched_tokens=max(8192, seqs))  # fmt: skip
    cfg = SchedulerConfig(seqs, max(8192, seqs), inf.prefix_cache_hit_rate)
    target = peak_rate(inf, rate) * (1 + inf.headroom)
    rng = np.random.default_rng(0)
    total = TRIAL_REQUESTS * 4  # requests over all services, split by share
    streams = []
    for x in inf.services or ():
        n = max(50, round(total * x.share))
        arr = gamma(rng, rate=target * x.share, burstiness=x.burstiness or inf.burstiness, n=n)
        streams.append(ServiceSpec(x.name, arr, np.full(n, x.input_len or inf.input_len),
                                   np.full(n, x.output_len or inf.output_len), tiers=["pool"], priority=x.priority,
                                   slo_ttft_ms=ttft, slo_tpot_ms=tpot))  # fmt: skip

    def meets(svcs, n: int) -> bool:
        res = run_fleet(Environment(0), [PoolSpec("pool", model, cfg, blocks, tp, replicas=n)], svcs)
        return all(v["rejected"] == 0 and v["ttft_ms"]["p99"] <= ttft
                   and not v["tpot_ms"]["p99"] > tpot for v in res.services.values())  # fmt: skip

    def fewest(svcs) -> int:
        for n in range(1, MAX_VERIFIED_REPLICAS + 1):
            if meets(svcs, n):
                return n
        raise InputError(f"more than {MAX_VERIFIED_REPLICAS} replicas per pool: too large to simulate in a plan "
                         "(use serve simulate --fleet)")  # fmt: skip

    return fewest(streams), sum(fewest([s]) for s in streams)


def levers(spec, inf, gpu, system, tp: int, cal, *, rate: float, rec: dict, max_gpus: int) -> list[dict]:
    """Each lever's GPUs and monthly cost against the recommended fleet (module docstring)."""
    price, hours = rec["price_usd_per_gpu_hour"], rec["service_hours_per_month"]
    base = rec["gpus"]
    out: list[dict] = []

    def row(lever: str, without: str, opt: dict | None, reason: str | None = None, *, saves_when_on: bool = True):
        if opt is None or not opt.get("fits"):
            out.append({"lever": lever, "compared_with": without, "gpus_without": None, "gpus_with": base,
                        "usd_per_month_saved": None, "reason": reason or (opt or {}).get("reason")})  # fmt: skip
            return
        g = opt["gpus"]
        saved = (g - base) * price * hours if saves_when_on else (base - g) * price * hours
        out.append({"lever": lever, "compared_with": without, "gpus_without": g if saves_when_on else base,
                    "gpus_with": base if saves_when_on else g, "usd_per_month_saved": saved, "reason": None})

    kw = dict(rate=rate, max_batch=rec["max_batch"], max_gpus=1 << 20)
    try:
        row("batching", "one sequence at a time (max_num_seqs 1)",
            simulate_option(spec, inf, gpu, system, tp, cal, max_num_seqs=1, **kw))
    except InputError as exc:
        row("batching", "one sequence at a time", None, str(exc))
    if inf.prefix_cache_hit_rate or inf.result_cache_hit_rate:
        plain = inf.model_copy(update={"prefix_cache_hit_rate": 0.0, "result_cache_hit_rate": 0.0})
        row("caching", "no prefix or result cache", simulate_option(spec, plain, gpu, system, tp, cal, **kw))
    else:
        row("caching", "no prefix or result cache", None, "the scenario sets no cache hit rate "
            "(inference.prefix_cache_hit_rate, result_cache_hit_rate)")  # fmt: skip
    sixteen = "bf16" if gpu.dense_tflops.get("bf16") else "fp16"
    if inf.precision not in ("bf16", "fp16", "fp32"):
        q = inf.model_copy(update={"precision": sixteen, "kv_precision": sixteen})
        try:
            row("quantisation", f"{sixteen} weights and KV cache", simulate_option(spec, q, gpu, system, tp, cal, **kw))
        except InputError as exc:
            row("quantisation", f"{sixteen} weights and KV cache", None, str(exc))
    elif gpu.dense_tflops.get("fp8"):
        q = inf.model_copy(update={"precision": "fp8", "kv_precision": "fp8"})
        try:
            row("quantisation", "fp8 weights and KV cache (would save)",
                simulate_option(spec, q, gpu, system, tp, cal, **kw), saves_when_on=False)
        except InputError as exc:
            row("quantisation", "fp8 weights and KV cache", None, str(exc))
    else:
        row("quantisation", "8-bit weights", None, f"{gpu.id} has no fp8 rate; the scenario runs {inf.precision}")
    if inf.arrival == "diurnal":
        # each replica carries what the simulated fleet carried per replica at the peak (its multiplexing kept)
        cap = rec["sized_at_requests_per_s"] / rec["layout"]["replicas"]
        per_hour = [math.ceil(r * (1 + inf.headroom) / cap - 1e-9) for r in hourly_rates(inf, rate)]
        mean_gpus = sum(max(n, 1) for n in per_hour) / 24 * tp
        out.append({"lever": "autoscaling", "compared_with": "the peak replica count all day",
                    "gpus_without": base, "gpus_with": mean_gpus,
                    "usd_per_month_saved": (base - mean_gpus) * price * hours,
                    "reason": None, "replicas_by_hour": per_hour})  # fmt: skip
    else:
        out.append({"lever": "autoscaling", "compared_with": "a fixed fleet", "gpus_without": None, "gpus_with": base,
                    "usd_per_month_saved": None, "reason": "constant arrivals: nothing to follow (set inference."
                    "arrival: diurnal, or simulate a fleet with serve simulate --fleet)"})  # fmt: skip
    if inf.services:
        try:
            pooled, separate = pooling(spec, inf, gpu, system, tp, cal, rate=rate, max_batch=rec["max_batch"])
            out.append({"lever": "pooling", "compared_with": "one pool per service", "gpus_without": separate * tp,
                        "gpus_with": pooled * tp, "usd_per_month_saved": (separate - pooled) * tp * price * hours,
                        "reason": None})  # fmt: skip
        except InputError as exc:
            out.append({"lever": "pooling", "compared_with": "one pool per service", "gpus_without": None,
                        "gpus_with": base, "usd_per_month_saved": None, "reason": str(exc)})  # fmt: skip
    else:
        out.append({"lever": "pooling", "compared_with": "one pool per service", "gpus_without": None,
                    "gpus_with": base, "usd_per_month_saved": None, "reason": "one service in the scenario "
                    "(inference.services pools several)"})  # fmt: skip
    if inf.tiers:
        try:
            out.append(routing(spec, inf, gpu, system, tp, cal, rate=rate, rec=rec))
        except InputError as exc:
            out.append({"lever": "routing", "compared_with": "every request on the scenario's model",
                        "gpus_without": base, "gpus_with": None, "usd_per_month_saved": None, "reason": str(exc)})
    else:
        out.append({"lever": "routing", "compared_with": "every request on this model", "gpus_without": None,
                    "gpus_with": base, "usd_per_month_saved": None, "reason": "one model in the scenario "
                    "(inference.tiers adds smaller ones)"})  # fmt: skip
    return out


def routing(spec, inf, gpu, system, tp: int, cal, *, rate: float, rec: dict) -> dict:
    """The routing lever: a cascade of ``inf.tiers`` then the scenario's model on ``gpu``. Each tier's pool is the
    fewest replicas meeting the p99 SLOs for its own requests at its inflow (peak · (1 + headroom) times the shares
    escalated before it; small tiers at tp=1 where they fit, the last at the recommended tp); then the whole
    cascade is simulated once, and its saving counts only if every request's p99 TTFT and TPOT, measured from its
    first arrival (an escalated request waits for the smaller model's whole answer), meet the SLOs."""
    import numpy as np

    from scaleright.serve.arrivals import gamma
    from scaleright.serve.fleet import PoolSpec, ServiceSpec, run_fleet
    from scaleright.serve.kernel import Environment
    from scaleright.serve.replica import SchedulerConfig
    from scaleright.serve.simulate import build_model, kv_blocks_per_replica
    from scaleright.workload import load_model

    price, hours, base = rec["price_usd_per_gpu_hour"], rec["service_hours_per_month"], rec["gpus"]
    ttft, tpot = _slos(inf)
    target = peak_rate(inf, rate) * (1 + inf.headroom)
    chain = [(load_model(t.model), t.escalate) for t in inf.tiers or ()] + [(spec, 0.0)]
    pools, inflow, gpus_used, names = [], target, 0, []
    for i, (sp, esc) in enumerate(chain):
        last = i == len(chain) - 1
        t = tp if last else 1
        sub = inf.model_copy(update={"requests_per_s": inflow / (1 + inf.headroom), "arrival": "constant",
                                     "diurnal_amplitude": 0.0, "tiers": None, "services": None})  # fmt: skip
        opt = simulate_option(sp, sub, gpu, system, t, cal, rate=inflow / (1 + inf.headroom), max_batch=256,
                              max_gpus=1 << 20) if inflow > 0 else {"fits": True, "replicas": 1, "gpus": t}  # fmt: skip
        if not opt["fits"]:
            raise InputError(f"tier {sp.name} on {gpu.id}: {opt['reason']}")
        model = build_model(sp, gpu=gpu, system=system, tp=t, precision=inf.precision, kv_precision=inf.kv_precision,
                            engine=inf.engine, cal=cal)  # fmt: skip
        blocks = kv_blocks_per_replica(sp, model, gpu=gpu, tp=t, pp=1, ep=1, precision=inf.precision,
                                       max_num_seqs=256, max_num_batched_tokens=8192)  # fmt: skip
        name = f"tier{i}:{sp.name}"
        names.append(name)
        pools.append(PoolSpec(name, model, SchedulerConfig(256, 8192, inf.prefix_cache_hit_rate), blocks, t,
                              replicas=opt["replicas"]))  # fmt: skip
        gpus_used += opt["gpus"]
        inflow *= esc
    n = TRIAL_REQUESTS * 4
    arr = gamma(np.random.default_rng(0), rate=target, burstiness=inf.burstiness, n=n)
    svc = ServiceSpec("cascade", arr, np.full(n, inf.input_len), np.full(n, inf.output_len), tiers=names,
                      escalate=[e for _, e in chain[:-1]])  # fmt: skip
    res = run_fleet(Environment(0), pools, [svc]).services["cascade"]
    row = {"lever": "routing", "compared_with": "every request on the scenario's model", "gpus_without": base,
           "gpus_with": gpus_used, "tier_gpus": {p.name: p.start_replicas() * p.gpus_per_replica for p in pools},
           "cascade_ttft_p99_s": res["ttft_ms"]["p99"] / 1e3, "cascade_tpot_p99_s": res["tpot_ms"]["p99"] / 1e3,
           "served_by_tier": res["served_by_tier"]}  # fmt: skip
    meets = res["ttft_ms"]["p99"] <= ttft and not res["tpot_ms"]["p99"] > tpot
    if not meets:
        return row | {"usd_per_month_saved": None,
                      "reason": f"the cascade misses the SLOs: p99 TTFT {res['ttft_ms']['p99']:.0f} ms, p99 TPOT "
                                f"{res['tpot_ms']['p99']:.1f} ms (escalated requests wait for the smaller model's "
                                "whole answer)"}  # fmt: skip
    return row | {"usd_per_month_saved": (base - gpus_used) * price * hours, "reason": None}
