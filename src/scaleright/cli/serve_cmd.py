"""``scaleright serve simulate|capacity``: a request stream on continuous-batching replicas, simulated.

A thin layer over ``scaleright.serve.simulate`` / ``capacity``: flags are checked here (one line naming the flag,
exit 2), every number printed is in the ``--json`` object.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from scaleright.api import FLAGS, MIN_RATE_PER_S, check_pool_args, check_positive, check_simulate_args
from scaleright.cli.common import CatalogOpt, JsonOpt, catalog_from, check_choice, console, emit_json, esc, table
from scaleright.errors import InputError

serve_app = typer.Typer(help="Simulate serving under real traffic: latency percentiles, throughput, capacity.",
                        no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(serve_app, name="serve")


_LAYOUT = dict(
    model=typer.Option(..., "--model", help="Catalog model (e.g. llama-3.1-8b) or a path to a HF config.json."),
    gpu=typer.Option("h100-sxm", "--gpu", help="Catalog GPU id or alias."),
    gpus=typer.Option(1, "--gpus", help="GPUs in total; replicas = gpus / (tp · pp)."),
    tp=typer.Option(1, "--tp", help="Tensor-parallel size of a replica."),
    pp=typer.Option(1, "--pp", help="Pipeline stages of a replica."),
    ep=typer.Option(1, "--ep", help="Expert-parallel size (MoE; divides tp)."),
)


def _common(model, gpu, gpus, tp, pp, ep, input_len, output_len, engine, precision, kv_precision, max_num_seqs,
            max_num_batched_tokens, prefix_cache_hit_rate, router, catalog, calibration,
            gpu_memory_utilization):  # fmt: skip
    from scaleright.estimate.calibration import load_calibration
    from scaleright.workload import load_model

    # max_num_seqs None: the engine's cap, which check_pool_args checks and the simulator takes (one home each)
    check_pool_args(dict(gpus=gpus, tp=tp, pp=pp, ep=ep, input_len=input_len, output_len=output_len,
                         max_num_seqs=max_num_seqs, max_num_batched_tokens=max_num_batched_tokens,
                         prefix_cache_hit_rate=prefix_cache_hit_rate, gpu_memory_utilization=gpu_memory_utilization,
                         engine=engine, precision=precision, kv_precision=kv_precision, router=router),
                    FLAGS)  # the API's simulate() checks the same  # fmt: skip
    cat = catalog_from(catalog)
    spec = load_model(model, catalog=cat)
    return spec, dict(gpu=cat.gpu(gpu), gpus=gpus, tp=tp, pp=pp, ep=ep, input_len=input_len, output_len=output_len,
                      engine=engine, precision=precision, kv_precision=kv_precision, max_num_seqs=max_num_seqs,
                      max_num_batched_tokens=max_num_batched_tokens, prefix_cache_hit_rate=prefix_cache_hit_rate,
                      router=router, cal=load_calibration(calibration),
                      gpu_memory_utilization=gpu_memory_utilization)  # fmt: skip


_ENGINE = typer.Option("vllm", "--engine", help="Engine profile: vllm, sglang, trtllm, llama.cpp, or a name "
                       "stored by `calibrate --serving --name NAME`.")
_PREC = typer.Option("bf16", "--precision", help="Weight / GEMM precision.")
_KVP = typer.Option(None, "--kv-precision", help="KV-cache precision (default: the engine's choice).")
_SEQS = typer.Option(None, "--max-num-seqs", help="Most sequences running at once per replica (default: the "
                     "engine's cap: TensorRT-LLM 2048, the other built-in engines 256).")
_TOKS = typer.Option(8192, "--max-num-batched-tokens", help="Token budget of one iteration (chunked prefill).")
_HIT = typer.Option(0.0, "--prefix-cache-hit-rate", help="Share of each prompt found in the prefix cache, [0, 1).")
_RESULT = typer.Option(0.0, "--result-cache-hit-rate", help="Share of requests answered from a result cache, [0, 1).")
_PREEMPT = typer.Option("recompute", "--preemption", help="When the KV cache runs out: recompute or swap.")
_GMU = typer.Option(0.9, "--gpu-memory-utilization", help="Share of GPU memory the engine may use (vLLM 0.9).")
_ROUTER = typer.Option("round-robin", "--router", help="round-robin or least-outstanding.")
_SEED = typer.Option(0, "--seed", help="Seed of arrivals and lengths.")
_CAL = typer.Option(None, "--calibration", help="Calibration profile name or JSON path.")
_PRICE = typer.Option(None, "--price-usd-per-gpu-hour", help="GPU price for cost per 1M tokens "
                      "(default: the catalog's on-demand price).")
_DIST = typer.Option("fixed", "--length-dist", help="Input and output length distribution: fixed or lognormal.")
_SPEC_ACC = typer.Option(None, "--speculative-acceptance", help="Speculative decoding: probability a proposed token "
                         "is accepted, [0, 1] (default: no speculative decoding).")
_SPEC_K = typer.Option(4, "--speculative-tokens", help="Speculative decoding: tokens proposed per step (1-16).")
_SPEC_C = typer.Option(0.05, "--speculative-draft-cost", help="Speculative decoding: one draft step's time over "
                       "the target's decode step, [0, 1].")


def _speculative(acceptance: float | None, k: int, cost: float) -> tuple[float, int, float] | None:
    if acceptance is None:
        return None
    if not (math.isfinite(acceptance) and 0 <= acceptance <= 1):
        raise InputError(f"--speculative-acceptance={acceptance} must lie in [0, 1]")
    if not 1 <= k <= 16:
        raise InputError(f"--speculative-tokens={k} must be an integer in 1..16")
    if not (math.isfinite(cost) and 0 <= cost <= 1):
        raise InputError(f"--speculative-draft-cost={cost} must lie in [0, 1] (draft step / target step)")
    return (acceptance, k, cost)


def _price(given: float | None, gpu, catalog: Path | None) -> tuple[float | None, str | None]:
    """The GPU price for cost per 1M tokens: the flag, else the catalog's on-demand price (None when it has none)."""
    from scaleright.api import simulation_price

    return simulation_price(given, gpu, catalog_from(catalog), field="--price-usd-per-gpu-hour")


def _engine_status(engine: str) -> str:
    """The profile's status; an uncalibrated one is said on stderr too (its numbers are a scenario)."""
    from scaleright.estimate.engines import get_engine

    status = get_engine(engine).status
    if status != "fitted":
        typer.echo(f"note: engine profile {engine!r} is {status} (no measured rows behind it)", err=True)
    return status


def _print(res, title: str) -> None:
    rows = [[name, d["mean"], d["p50"], d["p90"], d["p99"]]
            for name, d in (("TTFT (ms)", res.ttft_ms), ("TPOT (ms)", res.tpot_ms), ("ITL (ms)", res.itl_ms),
                            ("end-to-end (ms)", res.e2e_ms))]  # fmt: skip
    table(title, ["latency", "mean", "p50", "p90", "p99"], rows)
    table("Throughput and utilisation", ["metric", "value"], [
        ["requests/s", res.requests_per_s], ["output tokens/s", res.output_tokens_per_s],
        ["GPU busy share", res.gpu_utilisation], ["KV-cache utilisation", res.kv_utilisation],
        ["mean queue length", res.mean_queue_length], ["preemptions", res.preemptions],
        ["requests completed", res.requests], ["rejected (longer than the KV cache)", res.rejected],
        ["USD per 1M output tokens", res.usd_per_1m_output_tokens],
    ])  # fmt: skip


_MODEL_OR_FLEET = typer.Option(None, "--model", help="Catalog model (e.g. llama-3.1-8b) or a path to a HF "
                               "config.json (or give --fleet).")


@serve_app.command("simulate")
def simulate_cmd(
    model: str | None = _MODEL_OR_FLEET, gpu: str = _LAYOUT["gpu"], gpus: int = _LAYOUT["gpus"],
    tp: int = _LAYOUT["tp"],
    pp: int = _LAYOUT["pp"], ep: int = _LAYOUT["ep"],
    input_len: int = typer.Option(512, "--input-len", help="Prompt tokens per request (mean with --length-dist)."),
    output_len: int = typer.Option(128, "--output-len", help="Output tokens per request (mean with --length-dist)."),
    rate: float | None = typer.Option(None, "--rate", help="Open-loop requests per second (all replicas), at least "
                                       "1e-6 (float64 arrival times)."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Closed-loop clients (in-flight requests)."),
    trace: Path | None = typer.Option(None, "--trace", help="Trace CSV: arrival_time_s,input_tokens,output_tokens."),
    arrival: str = typer.Option("poisson", "--arrival", help="poisson, gamma or diurnal (with --rate)."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape (vllm bench serve); 1 = Poisson."),
    requests: int | None = typer.Option(None, "--requests", help="Requests to simulate (default 1000)."),
    duration_s: float | None = typer.Option(None, "--duration-s", help="Simulated seconds of arrivals (--rate)."),
    length_dist: str = _DIST,
    input_lengths: Path | None = typer.Option(None, "--input-lengths", help="File of prompt lengths to resample "
                                              "(one integer a line): empirical input lengths."),
    output_lengths: Path | None = typer.Option(None, "--output-lengths", help="File of output lengths to resample."),
    diurnal_period_s: float = typer.Option(86_400.0, "--diurnal-period-s", help="Period of --arrival diurnal."),
    diurnal_amplitude: float = typer.Option(0.5, "--diurnal-amplitude", help="Swing of --arrival diurnal, [0, 1]."),
    engine: str = _ENGINE, precision: str = _PREC, kv_precision: str | None = _KVP, max_num_seqs: int | None = _SEQS,
    max_num_batched_tokens: int = _TOKS, prefix_cache_hit_rate: float = _HIT,
    gpu_memory_utilization: float = _GMU, result_cache_hit_rate: float = _RESULT, preemption: str = _PREEMPT,
    router: str = _ROUTER, seed: int = _SEED,
    slo_ttft_ms: float | None = typer.Option(None, "--slo-ttft-ms", help="TTFT limit for goodput."),
    slo_tpot_ms: float | None = typer.Option(None, "--slo-tpot-ms", help="TPOT limit for goodput."),
    price_usd_per_gpu_hour: float | None = _PRICE,
    trace_out: Path | None = typer.Option(None, "--trace-out", help="Write a Chrome trace (JSON) of the run here."),
    report: Path | None = typer.Option(None, "--report", help="Write an HTML report here: latency CDF, utilisation "
                                       "and queue over time, and (with --rate) cost against load from runs at "
                                       "0.25-2x the rate; with --fleet, replicas over time per pool and each "
                                       "service's latency CDF."),
    speculative_acceptance: float | None = _SPEC_ACC, speculative_tokens: int = _SPEC_K,
    speculative_draft_cost: float = _SPEC_C,
    fleet: Path | None = typer.Option(None, "--fleet", help="YAML of pools and services (tiered routing, pooling "
                                      "with priorities, autoscaling, disaggregated prefill/decode, speculative "
                                      "decoding; see docs/serving.md) instead of --model and the layout flags."),
    calibration: str | None = _CAL, catalog: Path | None = CatalogOpt, as_json: bool = JsonOpt,
) -> None:  # fmt: skip
    """Latency percentiles (TTFT, TPOT, ITL, end-to-end), throughput and utilisation under a request stream."""
    from scaleright.results.simulate import SimulateResult
    from scaleright.serve.simulate import simulate

    if fleet is not None:
        pairs = (("--model", model, None), ("--rate", rate, None), ("--concurrency", concurrency, None),
                 ("--trace", trace, None), ("--requests", requests, None), ("--duration-s", duration_s, None),
                 ("--gpus", gpus, 1), ("--tp", tp, 1), ("--pp", pp, 1), ("--ep", ep, 1),
                 ("--trace-out", trace_out, None), ("--speculative-acceptance", speculative_acceptance, None))
        given = [f for f, v, d in pairs if v != d]
        if given:
            raise InputError(f"--fleet FILE holds the pools and services; {', '.join(given)} "
                             f"{'does' if len(given) == 1 else 'do'} not apply (set it in the file)")  # fmt: skip
        if report is not None:
            from scaleright.textfile import check_output_path, refuse_input_as_output

            check_output_path("--report", report)
            refuse_input_as_output("--report", report, [fleet])
        _fleet(fleet, seed, calibration, catalog, as_json, report)
        return
    if model is None:
        raise InputError("give --model (one pool) or --fleet FILE (pools and services)")

    given = [f for f, v in (("--rate", rate), ("--concurrency", concurrency), ("--trace", trace)) if v is not None]
    if len(given) != 1:
        raise InputError(f"give exactly one of --rate, --concurrency or --trace (got {', '.join(given) or 'none'})")
    check_choice("--length-dist", length_dist, ("fixed", "lognormal"))
    check_simulate_args(dict(arrival=arrival, rate=rate, burstiness=burstiness, duration_s=duration_s,
                             slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
                             price_usd_per_gpu_hour=price_usd_per_gpu_hour, diurnal_period_s=diurnal_period_s,
                             concurrency=concurrency, requests=requests, preemption=preemption,
                             result_cache_hit_rate=result_cache_hit_rate, diurnal_amplitude=diurnal_amplitude),
                        FLAGS)  # the API's simulate() checks the same  # fmt: skip
    if requests is not None and duration_s is not None:
        raise InputError("--requests and --duration-s are alternatives; give one")
    if duration_s is not None and rate is None:
        raise InputError("--duration-s needs --rate (closed loop and traces run --requests)")
    from scaleright.textfile import check_output_path, refuse_input_as_output

    inputs = [trace, input_lengths, output_lengths]  # an output never replaces what the run reads
    for flag, out in (("--trace-out", trace_out), ("--report", report)):
        if out is not None:
            check_output_path(flag, out)
            refuse_input_as_output(flag, out, inputs)
    spec, kw = _common(model, gpu, gpus, tp, pp, ep, input_len, output_len, engine, precision, kv_precision,
                       max_num_seqs, max_num_batched_tokens, prefix_cache_hit_rate, router, catalog, calibration,
                       gpu_memory_utilization)  # fmt: skip
    from scaleright.serve.lengths import read_lengths

    if trace is not None and (input_lengths is not None or output_lengths is not None):
        raise InputError("--input-lengths / --output-lengths apply to --rate and --concurrency; a --trace has its own")
    samples_in = read_lengths(input_lengths, flag="--input-lengths") if input_lengths is not None else None
    samples_out = read_lengths(output_lengths, flag="--output-lengths") if output_lengths is not None else None
    price, price_source = _price(price_usd_per_gpu_hour, kw["gpu"], catalog)
    run_kw = dict(arrival=arrival, burstiness=burstiness, input_dist="empirical" if samples_in is not None else
                  length_dist, output_dist="empirical" if samples_out is not None else length_dist,
                  input_samples=samples_in, output_samples=samples_out, diurnal_period_s=diurnal_period_s,
                  diurnal_amplitude=diurnal_amplitude, result_cache_hit_rate=result_cache_hit_rate,
                  preemption=preemption, seed=seed, slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms,
                  price_usd_per_gpu_hour=price,
                  speculative=_speculative(speculative_acceptance, speculative_tokens, speculative_draft_cost),
                  **kw)  # fmt: skip
    res = simulate(spec, rate=rate, concurrency=concurrency, trace=trace, requests=requests, duration_s=duration_s,
                   chrome_trace=trace_out is not None, **run_kw)  # fmt: skip
    if trace_out is not None:
        from scaleright.serve.trace import write_chrome_trace

        assert res.chrome_trace is not None  # chrome_trace=True above
        write_chrome_trace(trace_out, res.chrome_trace)
    if report is not None:
        _report(report, res, spec, rate, requests, duration_s, run_kw,
                f"{spec.name} on {gpus} x {kw['gpu'].id} (tp={tp} pp={pp}), {engine}")  # fmt: skip
    typed = SimulateResult.of(res, model=spec.name, gpu=kw["gpu"].id, price_usd_per_gpu_hour=price,
                              price_source=price_source, engine_status=_engine_status(engine))  # validated
    if as_json:
        emit_json(typed.to_dict())
        return
    load = f"{rate} req/s {arrival}" if rate else (f"{concurrency} clients" if concurrency else f"trace {trace}")
    _print(res, f"{spec.name} on {gpus} x {kw['gpu'].id} (tp={tp} pp={pp}, {res.replicas} replicas, {engine}), {load}")


SWEEP = (0.25, 0.5, 1.0, 1.5, 2.0)  # --report's cost-against-load runs, as multiples of --rate
SWEEP_REQUESTS = 1000  # most requests per sweep run


def _report(path: Path, res, spec, rate: float | None, requests: int | None, duration_s: float | None, run_kw: dict,
            title: str) -> None:  # fmt: skip
    """``--report``: the run's charts, and with ``--rate`` cost against load from the same fleet at ``SWEEP``
    multiples of the rate (every point, the rate itself too, a run of ``SWEEP_REQUESTS`` requests at most, same
    seed)."""
    from scaleright.serve.report import render_html, write_report
    from scaleright.serve.simulate import simulate

    sweep, note = None, ""
    if rate is None:
        note = "Cost against load: drawn for --rate runs (a closed loop or a trace sets its own load)."
    elif run_kw.get("price_usd_per_gpu_hour") is None:
        note = "Cost against load: no GPU price (give --price-usd-per-gpu-hour; the catalog has none for this GPU)."
    else:
        n = min(requests or 1000, SWEEP_REQUESTS) if duration_s is None else SWEEP_REQUESTS
        sweep = []
        for f in (f for f in SWEEP if rate * f >= MIN_RATE_PER_S):  # the rate itself always (checked)
            r = simulate(spec, rate=rate * f, requests=n, **run_kw)
            sweep.append({"requests_per_s": rate * f, "usd_per_1m_output_tokens": r.usd_per_1m_output_tokens,
                          "ttft_p99_ms": r.ttft_ms["p99"], "gpu_utilisation": r.gpu_utilisation,
                          "this_run": f == 1.0})  # fmt: skip
    write_report(path, render_html(res, title=title, sweep=sweep, sweep_note=note))


def _fleet(path: Path, seed: int, calibration: str | None, catalog: Path | None, as_json: bool,
           report: Path | None = None) -> None:  # fmt: skip
    """``serve simulate --fleet FILE``: every pool and service of the file (``--seed`` overrides its seed when
    given as non-zero)."""
    from scaleright.estimate.calibration import load_calibration
    from scaleright.results.fleet import FleetResult
    from scaleright.serve.fleet import run_fleet
    from scaleright.serve.fleet_config import build_fleet, load_fleet

    f = load_fleet(path)
    if seed:
        f = f.model_copy(update={"seed": seed})
    res = run_fleet(*build_fleet(f, catalog=catalog_from(catalog), cal=load_calibration(calibration),
                                 source=str(path)))  # fmt: skip
    if report is not None:
        from scaleright.serve.report import render_fleet_html, write_report

        write_report(report, render_fleet_html(res, title=f"fleet {path.name}"))
    typed = FleetResult.of(res, fleet=str(path), seed=f.seed)  # validated
    if as_json:
        emit_json(typed.to_dict())
        return
    rows = [[name, s["requests"], s["ttft_ms"]["p50"], s["ttft_ms"]["p99"], s["tpot_ms"]["p99"], s["e2e_ms"]["p99"],
             s["goodput_requests_per_s"], " / ".join(str(x) for x in s["served_by_tier"])]
            for name, s in res.services.items()]  # fmt: skip
    table(f"Services ({path})", ["service", "requests", "TTFT p50 ms", "TTFT p99 ms", "TPOT p99 ms", "e2e p99 ms",
                                  "goodput req/s", "served by tier"], rows)  # fmt: skip
    prow = [[name, p["gpus_per_replica"], p["peak_replicas"], p["mean_replicas"], p["gpu_utilisation"],
             p.get("usd_per_second_billing"), p.get("usd_always_on"), p.get("idle_usd")]
            for name, p in res.pools.items()]  # fmt: skip
    table(f"Pools over {res.duration_s:.0f} s", ["pool", "GPUs/replica", "peak replicas", "mean replicas",
                                                 "GPU busy share", "USD per-second billing", "USD always-on",
                                                 "USD idle"], prow)  # fmt: skip


@serve_app.command("capacity")
def capacity_cmd(
    model: str = _LAYOUT["model"], gpu: str = _LAYOUT["gpu"], gpus: int = _LAYOUT["gpus"], tp: int = _LAYOUT["tp"],
    pp: int = _LAYOUT["pp"], ep: int = _LAYOUT["ep"],
    input_len: int = typer.Option(512, "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(128, "--output-len", help="Output tokens per request."),
    slo_ttft_p99_ms: float = typer.Option(..., "--slo-ttft-p99-ms", help="Limit on p99 time to first token."),
    slo_tpot_p99_ms: float = typer.Option(..., "--slo-tpot-p99-ms", help="Limit on p99 time per output token."),
    arrival: str = typer.Option("poisson", "--arrival", help="poisson, gamma or diurnal."),
    burstiness: float = typer.Option(1.0, "--burstiness", help="Gamma shape; 1 = Poisson."),
    requests: int = typer.Option(1000, "--requests", help="Requests per trial rate."),
    length_dist: str = _DIST,
    engine: str = _ENGINE, precision: str = _PREC, kv_precision: str | None = _KVP, max_num_seqs: int | None = _SEQS,
    max_num_batched_tokens: int = _TOKS, prefix_cache_hit_rate: float = _HIT,
    gpu_memory_utilization: float = _GMU, router: str = _ROUTER,
    seed: int = _SEED, price_usd_per_gpu_hour: float | None = _PRICE,
    speculative_acceptance: float | None = _SPEC_ACC, speculative_tokens: int = _SPEC_K,
    speculative_draft_cost: float = _SPEC_C,
    calibration: str | None = _CAL, catalog: Path | None = CatalogOpt, as_json: bool = JsonOpt,
) -> None:  # fmt: skip
    """The highest request rate the layout sustains with p99 TTFT and p99 TPOT under their limits."""
    from scaleright.results.capacity import CapacityResult
    from scaleright.serve.arrivals import ARRIVALS
    from scaleright.serve.simulate import find_capacity

    check_choice("--arrival", arrival, ARRIVALS)
    check_choice("--length-dist", length_dist, ("fixed", "lognormal"))
    check_positive("--slo-ttft-p99-ms", slo_ttft_p99_ms)
    check_positive("--slo-tpot-p99-ms", slo_tpot_p99_ms)
    check_simulate_args(dict(burstiness=burstiness, price_usd_per_gpu_hour=price_usd_per_gpu_hour,
                             requests=requests), FLAGS)
    spec, kw = _common(model, gpu, gpus, tp, pp, ep, input_len, output_len, engine, precision, kv_precision,
                       max_num_seqs, max_num_batched_tokens, prefix_cache_hit_rate, router, catalog, calibration,
                       gpu_memory_utilization)  # fmt: skip
    price, price_source = _price(price_usd_per_gpu_hour, kw["gpu"], catalog)
    c = find_capacity(spec, slo_ttft_p99_ms=slo_ttft_p99_ms, slo_tpot_p99_ms=slo_tpot_p99_ms, requests=requests,
                      arrival=arrival, burstiness=burstiness, input_dist=length_dist, output_dist=length_dist,
                      seed=seed, price_usd_per_gpu_hour=price,
                      speculative=_speculative(speculative_acceptance, speculative_tokens, speculative_draft_cost),
                      **kw)  # fmt: skip
    typed = CapacityResult.of(c, model=spec.name, gpu=kw["gpu"].id, price_usd_per_gpu_hour=price,
                              price_source=price_source, engine_status=_engine_status(engine))  # validated
    if as_json:
        emit_json(typed.to_dict())
        return
    best, res = c.max_rate_per_s, c.result
    console.print(f"[bold]{spec.name} on {gpus} x {kw['gpu'].id}: highest rate with p99 TTFT <= {slo_ttft_p99_ms} ms "
                  f"and p99 TPOT <= {slo_tpot_p99_ms} ms: {best:.3g} requests/s[/bold]")  # fmt: skip
    console.print(esc(binding_line(c)))
    if res is not None:
        _print(res, f"at {best:.3g} requests/s")


def binding_line(c) -> str:
    """What set the capacity ``c`` (``serve.simulate.Capacity``), in one sentence with the numbers behind it."""
    sat = f"the layout's throughput ceiling (saturated rate) is {c.saturated_rate_per_s:.3g} requests/s"
    if c.binding == "throughput":
        return f"bound by throughput: {sat}; looser limits would not raise the rate"
    if c.binding == "kv_cache":
        return "bound by the KV cache: a request is longer than a replica's whole KV cache"
    refused = min((t for t in c.trials if not t.meets_slo and t.rate_per_s > c.max_rate_per_s),
                  key=lambda t: t.rate_per_s)  # fmt: skip
    if c.binding == "ttft_p99":
        what, seen, limit = "p99 TTFT", refused.ttft_p99_ms, c.slo_ttft_p99_ms
    else:
        what, seen, limit = "p99 TPOT", refused.tpot_p99_ms, c.slo_tpot_p99_ms
    return (f"bound by the {what} limit: at {refused.rate_per_s:.3g} requests/s {what} is {seen:.4g} ms "
            f"> {limit:g} ms; {sat}")
