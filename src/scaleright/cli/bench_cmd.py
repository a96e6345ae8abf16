"""``scaleright bench train|comm|infer|serve|report`` and ``scaleright runs list|show|export``: a thin layer over
``scaleright.bench``. torch is imported only when a benchmark actually runs (never for ``--dry-run``, ``report`` or
``runs``). Every table printed is also available as ``--json``.

Every count is checked against ``scaleright.limits`` before anything is built or started. A failed world size
still prints the runs that finished (``--json``: one object with ``"error"``) before the one-line error and exit 2.
Ctrl-C stops torchrun and every worker, prints the runs stored so far and exits 130 (128 + SIGINT, the shell's
convention).
"""

from __future__ import annotations

import math
import shlex
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

__all__ = ["register"]

bench_app = typer.Typer(help="Measure training steps, collectives and inference; report scaling.",
                        no_args_is_help=True)
runs_app = typer.Typer(help="List, show and export stored benchmark runs.", no_args_is_help=True)


class Precision(str, Enum):
    fp32 = "fp32"
    bf16 = "bf16"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"


class Format(str, Enum):
    csv = "csv"
    json = "json"


CatalogOpt = Annotated[Path | None, typer.Option("--catalog", help="User catalog directory (gpus.yaml, "
                                                 "models.yaml) overriding the built-in one.")]
DbOpt = Annotated[Path | None, typer.Option("--db", help="Run database (default: user data dir/runs.sqlite).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
DryOpt = Annotated[bool, typer.Option("--dry-run", help="Print the torchrun command and per-rank config; run nothing.")]
DeviceOpt = Annotated[Device, typer.Option("--device", help="auto = cuda when available, else cpu.")]
PresetOpt = Annotated[str, typer.Option("--model", help="Model preset: tiny or small (GPT-2 small).")]
LayersOpt = Annotated[int | None, typer.Option("--layers", help="Override the preset's layer count.")]
HiddenOpt = Annotated[int | None, typer.Option("--hidden", help="Override the preset's hidden size.")]
HeadsOpt = Annotated[int | None, typer.Option("--heads", help="Override the preset's head count.")]
VocabOpt = Annotated[int | None, typer.Option("--vocab", help="Override the preset's vocabulary size.")]
SeqOpt = Annotated[int | None, typer.Option("--seq-len", help="Override the preset's sequence length.")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout-s", help="Kill a world size's job once a rank made no progress for this many seconds.")]
NnodesOpt = Annotated[int, typer.Option("--nnodes", help="Nodes (run the same command on each).")]
NodeRankOpt = Annotated[int, typer.Option("--node-rank", help="This node's index (0..nnodes-1).")]
EndpointOpt = Annotated[str | None, typer.Option("--rdzv-endpoint", help="HOST:PORT of the c10d rendezvous.")]
RdzvIdOpt = Annotated[str, typer.Option("--rdzv-id", help="Rendezvous job id, the same on every node.")]
TrainModelOpt = Annotated[str, typer.Option("--model", help="Preset (tiny, small) or a dense Llama-family catalog "
                                            "model (e.g. llama-3.1-8b), random weights.")]
TrainLayersOpt = Annotated[int | None, typer.Option("--layers", help="Preset: its layers. Catalog model: keep the "
                                                    "first N (stored as truncated).")]
TrainVocabOpt = Annotated[int | None, typer.Option("--vocab", help="Preset: its vocabulary. Catalog model: truncate "
                                                   "it to N (stored as truncated).")]
TrainHiddenOpt = Annotated[int | None, typer.Option("--hidden", help="Override the preset's hidden size (presets "
                                                    "only).")]
TrainHeadsOpt = Annotated[int | None, typer.Option("--heads", help="Override the preset's head count (presets only).")]
TrainSeqOpt = Annotated[int | None, typer.Option("--seq-len", help="Sequence length (default: the preset's; 2048 "
                                                 "for a catalog model, capped by its context).")]


def _store(db: Path | None):
    """The run store for a command that adds runs, checked before anything is measured (``check_writable``)."""
    from scaleright.bench.db import RunStore

    store = RunStore(db)
    store.check_writable()
    return store


INTERRUPTED_EXIT = 130  # 128 + SIGINT


def _bound(flag: str, value: float | None, kind: str, low: float = 1) -> None:
    """``value`` (when given) within ``low..LIMITS[kind]``, or one line naming ``flag``."""
    from scaleright.limits import check_limit

    if value is not None:
        check_limit(flag, value, kind, low=low)


def _check_model_dims(layers: int | None, hidden: int | None, heads: int | None, vocab: int | None,
                      seq_len: int | None) -> None:
    for flag, value, kind in (("--layers", layers, "layers"), ("--hidden", hidden, "hidden"),
                              ("--heads", heads, "heads"), ("--vocab", vocab, "vocab"),
                              ("--seq-len", seq_len, "seq_len")):
        _bound(flag, value, kind)


def _check_seed(seed: int) -> None:
    from scaleright.bench.config import SEED_MAX
    from scaleright.errors import InputError

    if not 0 <= seed <= SEED_MAX:
        raise InputError(f"--seed must be from 0 to {SEED_MAX:,} (got {seed if abs(seed) < 10**20 else 'a huge int'})")


def _launch(nnodes: int, node_rank: int, endpoint: str | None, rdzv_id: str, timeout_s: float) -> dict[str, Any]:
    """The launch section of a config, every flag checked first."""
    from scaleright.bench.config import parse_endpoint
    from scaleright.errors import InputError

    _bound("--nnodes", nnodes, "nnodes")
    _bound("--node-rank", node_rank, "nnodes", low=0)
    if math.isfinite(timeout_s):  # inf and nan: the config's own finite-number error (pinned in tests)
        _bound("--timeout-s", timeout_s, "timeout_s", low=0)
    if timeout_s <= 0:
        raise InputError(f"--timeout-s must be > 0 (got {timeout_s:g})")
    if endpoint is not None:
        endpoint = parse_endpoint(endpoint, "--rdzv-endpoint")
    if not rdzv_id.strip() or len(rdzv_id) > 256 or not rdzv_id.isprintable():
        raise InputError("--rdzv-id must be 1 to 256 printable characters")
    return {"nnodes": nnodes, "node_rank": node_rank, "rdzv_endpoint": endpoint, "rdzv_id": rdzv_id,
            "timeout_s": timeout_s}


def _interrupted(exc: KeyboardInterrupt, as_json: bool, db: str) -> typer.Exit:
    """After Ctrl-C (the sweep already stopped its processes): print what was stored; exit 130."""
    result = getattr(exc, "result", None) or {"sweep_id": None, "runs": []}
    stored = [r for r in result["runs"] if r.get("run_id") is not None]
    if as_json:
        _echo_json({**result, "interrupted": True, "db": db})
    else:
        listed = ", ".join(f"run id {r['run_id']} ({_run_label(r)})" for r in stored) or "none"
        typer.echo(f"interrupted: stopped the benchmark and its processes; stored before the interrupt: {listed}")
    return typer.Exit(INTERRUPTED_EXIT)


def _stored(runs: list[dict], db: Path) -> None:
    """What the command wrote: the run ids it stored and the database file (stderr, so --json stays one object)."""
    from scaleright.cli.common import visible

    ids = [str(r["run_id"]) for r in runs if r.get("run_id") is not None]
    what = f"run id{'s' if len(ids) != 1 else ''} {', '.join(ids)}" if ids else "no runs"
    typer.echo(f"stored {what} in {visible(db)}", err=True)


def _wrote(path: Path) -> None:
    """The file a command wrote (stderr, so what it prints on stdout stays the table or the JSON)."""
    from scaleright.cli.common import visible

    typer.echo(f"wrote {visible(path)}", err=True)


def _run_label(run: dict) -> str:
    return f"batch_size={run['batch_size']}" if "batch_size" in run else f"world_size={run.get('world_size')}"


def _failed_json(exc: Exception, db: str) -> None:
    """``--json`` after a failed world size: the runs that finished and the failed one, with the error."""
    result = getattr(exc, "result", None)
    if result is not None:
        _echo_json({**result, "error": str(exc), "db": db})


def _echo_json(data: Any) -> None:
    from scaleright.cli.common import emit_json  # NaN/Infinity become null: the output is always valid JSON

    emit_json(data)


def _dry_run(launches: list, cfg: Any, as_json: bool, fit: list | None = None) -> None:
    """The torchrun commands; ``fit``: a catalog model's memory checks on this machine (informational: the command
    may be meant for another)."""
    from scaleright.bench.launch import job_env, rank_configs, torchrun_command, worker_config

    out = []
    for launch in launches:
        cmd = torchrun_command(launch)
        env = job_env(launch, "<temporary run directory>", "<pid of this command>")
        out.append({"world_size": launch.world_size, "nproc_per_node": launch.nproc_per_node, "command": cmd,
                    "command_line": shlex.join(cmd), "env": env,
                    "ranks": rank_configs(launch, worker_config(cfg, launch.nproc_per_node))})
    if as_json:
        _echo_json({"dry_run": True, "launches": out, **({"fit": [c.as_dict() for c in fit]} if fit else {})})
        return
    for c in fit or []:
        typer.echo(f"# memory on this machine: {c.line()}")
    for item in out:
        typer.echo(f"# world_size={item['world_size']}")
        typer.echo("env: " + " ".join(f"{k}={v}" for k, v in item["env"].items()))
        typer.echo(item["command_line"])
        _echo_json(item["ranks"])


@bench_app.command("train")
def train(
    nproc: Annotated[str, typer.Option("--nproc", help="Processes per node, one run each, e.g. 1,2,4.")] = "1",
    strategy: Annotated[str, typer.Option(
        "--strategy", help="single, ddp, fsdp-full (alias fsdp), fsdp-grad-op.")] = "ddp",
    model: TrainModelOpt = "tiny",
    layers: TrainLayersOpt = None,
    hidden: TrainHiddenOpt = None,
    heads: TrainHeadsOpt = None,
    vocab: TrainVocabOpt = None,
    seq_len: TrainSeqOpt = None,
    catalog: CatalogOpt = None,
    micro_batch: Annotated[int, typer.Option("--micro-batch", help="Sequences per rank per step.")] = 8,
    precision: Annotated[Precision, typer.Option("--precision", help="fp32 or bf16 mixed precision.")] = Precision.fp32,
    activation_checkpointing: Annotated[bool, typer.Option(
        "--activation-checkpointing/--no-activation-checkpointing", help="Recompute block activations.")] = False,
    device: DeviceOpt = Device.auto,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed steps first.")] = 3,
    steps: Annotated[int, typer.Option("--steps", help="Timed steps.")] = 10,
    seed: Annotated[int, typer.Option("--seed", help="Seed for weights and tokens.")] = 0,
    timeout_s: TimeoutOpt = 600.0,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: EndpointOpt = None,
    rdzv_id: RdzvIdOpt = "scaleright",
    db: DbOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryOpt = False,
) -> None:
    """Time training steps of a GPT preset or a catalog decoder at each world size (torchrun), store them, print
    scaling efficiency. A catalog model is checked against each rank's memory first (scaleright's own estimate;
    refused, naming what would fit, when it cannot) and under FSDP built on the meta device, each rank
    materialising only its shards."""
    from scaleright.bench.config import TrainBenchConfig, parse_int_list, parse_strategy
    from scaleright.bench.spec import DecoderSpec, model_spec
    from scaleright.bench.train import run_train_bench, train_launch
    from scaleright.bench.validate import validated

    nprocs = parse_int_list(nproc, "--nproc", "nproc")
    _check_model_dims(layers, hidden, heads, vocab, seq_len)
    _bound("--micro-batch", micro_batch, "micro_batch")
    _bound("--warmup", warmup, "steps", low=0)
    _bound("--steps", steps, "steps")
    _check_seed(seed)
    launch = _launch(nnodes, node_rank, rdzv_endpoint, rdzv_id, timeout_s)
    cat = None
    if catalog is not None:
        from scaleright.cli.common import catalog_from

        cat = catalog_from(catalog)
    spec = model_spec(model, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq_len, catalog=cat)
    cfg = validated(TrainBenchConfig, {
        "model": spec, "preset": model, "strategy": parse_strategy(strategy), "nproc": nprocs,
        "micro_batch": micro_batch, "precision": precision.value, "activation_checkpointing": activation_checkpointing,
        "device": device.value, "warmup": warmup, "steps": steps, "seed": seed,
        "launch": launch}, what="train config")
    if dry_run:
        from scaleright.bench.fit import fit_checks

        _dry_run([train_launch(cfg, n) for n in cfg.nproc], cfg, as_json, fit_checks(cfg))
        return
    from scaleright.bench.errors import BenchRunError
    from scaleright.bench.fit import check_fits, fit_checks
    from scaleright.bench.progress import Reporter

    fit = fit_checks(cfg)
    check_fits(cfg, fit)
    store = _store(db)
    progress = Reporter("bench train")
    if as_json:
        for c in fit:
            typer.echo(f"memory: {c.line()}", err=True)
        try:
            result = run_train_bench(cfg, store=store, progress=progress, fit=fit)
        except BenchRunError as exc:
            _failed_json(exc, str(store.path))
            raise
        except KeyboardInterrupt as exc:
            raise _interrupted(exc, True, str(store.path)) from None
        _echo_json({**result, "db": str(store.path)})
        _warn(result.get("warnings", []))
        _stored(result["runs"], store.path)
        return
    from rich.console import Console

    console = Console(markup=False, highlight=False)
    from scaleright.cli.common import visible

    if isinstance(spec, DecoderSpec):
        cut = (f"; truncated to {spec.num_hidden_layers} of {spec.catalog_layers} layers, vocab {spec.vocab_size:,} "
               f"of {spec.catalog_vocab:,} (the catalog model has {spec.catalog_params:,})" if spec.truncated else "")
        what = f"{visible(spec.name)}, {spec.params:,} params{cut}"
    else:
        what = f"{spec.params:,} params ({visible(model)})"
    console.print(f"model {what}, {cfg.strategy.value}, {cfg.precision}, micro batch {cfg.micro_batch}, sequence "
                  f"{spec.seq_len}; db {visible(store.path)}")
    for c in fit:
        console.print(f"memory: {c.line()}")

    def show(run: dict) -> None:
        console.print(
            f"world_size={run['world_size']}: step {run['step_time_s_median'] * 1e3:.2f} ms "
            f"(p10 {run['step_time_s_p10'] * 1e3:.2f}, p90 {run['step_time_s_p90'] * 1e3:.2f}), "
            f"{run['tokens_per_s']:,.0f} tokens/s, comm {run['comm_time_s_median'] * 1e3:.2f} ms, "
            f"data {run['data_time_s_median'] * 1e3:.3f} ms, peak {run['peak_memory_gb']:.3f} GB "
            f"[{run['peak_memory_method']}]{_loss_text(run)}, run id {run['run_id']}")

    try:
        result = run_train_bench(cfg, store=store, on_run=show, progress=progress, fit=fit)
    except KeyboardInterrupt as exc:
        raise _interrupted(exc, False, str(store.path)) from None
    for run in result["runs"]:
        if run["status"] == "remote":
            console.print(f"world_size={run['world_size']}: this node's ranks finished; the node hosting global "
                          "rank 0 stores the run")
    from scaleright.bench.scaling import scaling_line

    curve = {int(n): {"scaling_efficiency": e} for n, e in result["scaling_efficiency"].items()}
    shared = {r["world_size"]: r["shared_hardware"] for r in result["runs"] if r.get("shared_hardware")}
    _warn(result["warnings"])
    console.print(scaling_line(curve, shared))
    _stored(result["runs"], store.path)


def _loss_text(run: dict) -> str:
    """The loss of the first and last step, and the parameter bytes per rank when shards were held."""
    out = f", loss {run['loss_initial']:.3f} -> {run['loss_final']:.3f}" if "loss_initial" in run else ""
    per = run.get("param_bytes_per_rank") or []
    if per and str(run.get("strategy", "")).startswith("fsdp"):
        out += f", params {max(per) / 1e9:.3f} GB per rank (sharded)"
    return out


@bench_app.command("comm")
def comm(
    nproc: Annotated[str, typer.Option("--nproc", help="Processes per node, one run each, e.g. 2,4.")] = "2",
    sizes: Annotated[str, typer.Option(
        "--sizes", help="Message sizes, e.g. 1KB,1MB,64MB (KB=1e3, KiB=1024).")] = "1KB,1MB,64MB",
    ops: Annotated[str, typer.Option(
        "--ops", help="Comma-separated collectives.")] = "all-reduce,all-gather,reduce-scatter",
    dtype: Annotated[str, typer.Option("--dtype", help="float32 or bfloat16.")] = "float32",
    device: DeviceOpt = Device.auto,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed calls per op and size.")] = 2,
    iters: Annotated[int, typer.Option("--iters", help="Timed calls per op and size.")] = 10,
    timeout_s: TimeoutOpt = 600.0,
    nnodes: NnodesOpt = 1,
    node_rank: NodeRankOpt = 0,
    rdzv_endpoint: EndpointOpt = None,
    rdzv_id: RdzvIdOpt = "scaleright",
    db: DbOpt = None,
    as_json: JsonOpt = False,
    dry_run: DryOpt = False,
) -> None:
    """Time collectives over message sizes; report time, algbw and busbw (nccl-tests definitions)."""
    from scaleright.bench.comm import comm_launch, run_comm_bench
    from scaleright.bench.config import CommBenchConfig, parse_int_list, parse_ops, parse_sizes
    from scaleright.bench.errors import BenchRunError
    from scaleright.bench.validate import validated

    nprocs, size_list = parse_int_list(nproc, "--nproc", "nproc"), parse_sizes(sizes)
    _bound("--warmup", warmup, "steps", low=0)
    _bound("--iters", iters, "steps")
    launch = _launch(nnodes, node_rank, rdzv_endpoint, rdzv_id, timeout_s)
    cfg = validated(CommBenchConfig, {
        "nproc": nprocs, "sizes_bytes": size_list, "ops": parse_ops(ops),
        "dtype": dtype, "device": device.value, "warmup": warmup, "iters": iters,
        "launch": launch}, what="comm config")
    if dry_run:
        _dry_run([comm_launch(cfg, n) for n in cfg.nproc], cfg, as_json)
        return
    from scaleright.bench.progress import Reporter

    store = _store(db)
    try:
        result = run_comm_bench(cfg, store=store, progress=Reporter("bench comm"))
    except BenchRunError as exc:
        if as_json:
            _failed_json(exc, str(store.path))
        raise
    except KeyboardInterrupt as exc:
        raise _interrupted(exc, as_json, str(store.path)) from None
    if as_json:
        _echo_json({**result, "db": str(store.path)})
        _warn(result["warnings"])
        _stored(result["runs"], store.path)
        return
    from rich.console import Console
    from rich.table import Table

    for run in result["runs"]:
        t = Table(title=f"world_size={run['world_size']} ({run.get('backend', '?')}), run id {run['run_id']}",
                  title_justify="left")
        for col in ("op", "bytes", "time us (median)", "p10", "p90", "algbw GB/s", "busbw GB/s"):
            t.add_column(col, justify="right", no_wrap=col == "op")
        for r in run["rows"]:
            t.add_row(r["op"], f"{r['size_bytes']:,}", f"{r['time_s_median'] * 1e6:,.1f}",
                      f"{r['time_s_p10'] * 1e6:,.1f}", f"{r['time_s_p90'] * 1e6:,.1f}",
                      f"{r['algbw_gb_per_s']:.3f}", f"{r['busbw_gb_per_s']:.3f}")
        Console().print(t)
    _warn(result["warnings"])
    _stored(result["runs"], store.path)


@bench_app.command("infer")
def infer(
    model: PresetOpt = "tiny",
    layers: LayersOpt = None,
    hidden: HiddenOpt = None,
    heads: HeadsOpt = None,
    vocab: VocabOpt = None,
    seq_len: SeqOpt = None,
    batch_sizes: Annotated[str, typer.Option("--batch-sizes", help="Batch sizes, e.g. 1,4,16.")] = "1,4,16",
    prompt_len: Annotated[int, typer.Option("--prompt-len", help="Prompt tokens (prefill).")] = 32,
    gen_len: Annotated[int, typer.Option("--gen-len", help="Generated tokens (decode steps).")] = 16,
    precision: Annotated[Precision, typer.Option("--precision", help="fp32 or bf16 weights.")] = Precision.fp32,
    device: DeviceOpt = Device.auto,
    warmup: Annotated[int, typer.Option("--warmup", help="Untimed repetitions per batch size.")] = 1,
    repeats: Annotated[int, typer.Option("--repeats", help="Timed repetitions per batch size.")] = 3,
    seed: Annotated[int, typer.Option("--seed", help="Seed for weights and prompts.")] = 0,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Prefill and KV-cache decode throughput (tokens/s) against batch size, random weights, one device."""
    from scaleright.bench.config import InferBenchConfig, parse_int_list
    from scaleright.bench.infer import run_infer_bench
    from scaleright.bench.spec import gpt_spec
    from scaleright.bench.validate import validated

    batches = parse_int_list(batch_sizes, "--batch-sizes", "batch")
    _check_model_dims(layers, hidden, heads, vocab, seq_len)
    _bound("--prompt-len", prompt_len, "seq_len")
    _bound("--gen-len", gen_len, "seq_len")
    _bound("--warmup", warmup, "steps", low=0)
    _bound("--repeats", repeats, "steps")
    _check_seed(seed)
    spec = gpt_spec(model, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq_len)
    cfg = validated(InferBenchConfig, {
        "model": spec, "preset": model, "batch_sizes": batches,
        "prompt_len": prompt_len, "gen_len": gen_len, "precision": precision.value, "device": device.value,
        "warmup": warmup, "repeats": repeats, "seed": seed}, what="infer config")
    from scaleright.bench.progress import Reporter

    store = _store(db)
    try:
        result = run_infer_bench(cfg, store=store, progress=Reporter("bench infer"))
    except KeyboardInterrupt as exc:
        raise _interrupted(exc, as_json, str(store.path)) from None
    if as_json:
        _echo_json({**result, "db": str(store.path)})
        _warn(result["warnings"])
        _stored(result["runs"], store.path)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"{model}: {spec.params:,} params, prompt {prompt_len}, generate {gen_len}", title_justify="left")
    for col in ("batch", "prefill tok/s", "prefill ms", "decode tok/s", "ms / output token", "peak GB", "run id"):
        t.add_column(col, justify="right")
    for r in result["runs"]:
        t.add_row(str(r["batch_size"]), f"{r['prefill_tokens_per_s']:,.0f}", f"{r['prefill_time_s_median'] * 1e3:.2f}",
                  f"{r['decode_tokens_per_s']:,.0f}", f"{r['time_per_output_token_s'] * 1e3:.3f}",
                  f"{r['peak_memory_gb']:.3f}", str(r["run_id"]))
    Console().print(t)
    _warn(result["warnings"])
    _stored(result["runs"], store.path)


@bench_app.command("serve")
def serve(
    endpoint: Annotated[str, typer.Option("--endpoint", help="Base URL of an OpenAI-compatible server (vLLM, SGLang, "
                                          "trtllm-serve, llama.cpp), e.g. http://127.0.0.1:8000.")],
    model: Annotated[str, typer.Option("--model", help="Model name as the server serves it (GET /v1/models).")],
    input_len: Annotated[int, typer.Option("--input-len", help="Prompt tokens per request (mean).")] = 512,
    output_len: Annotated[int, typer.Option("--output-len", help="Output tokens per request (mean).")] = 128,
    rate: Annotated[float | None, typer.Option("--rate", help="Open-loop requests per second.")] = None,
    concurrency: Annotated[int | None, typer.Option("--concurrency", help="Closed-loop clients.")] = None,
    arrival: Annotated[str, typer.Option("--arrival", help="poisson, gamma or diurnal (with --rate).")] = "poisson",
    burstiness: Annotated[float, typer.Option("--burstiness", help="Gamma shape (vllm bench serve).")] = 1.0,
    diurnal_period_s: Annotated[float, typer.Option("--diurnal-period-s", help="Period of --arrival diurnal.")
                                ] = 86_400.0,
    diurnal_amplitude: Annotated[float, typer.Option("--diurnal-amplitude", help="Swing of --arrival diurnal.")
                                 ] = 0.5,
    requests: Annotated[int, typer.Option("--requests", help="Requests to send.")] = 200,
    length_dist: Annotated[str, typer.Option("--length-dist", help="fixed or lognormal (cv 0.5, as serve "
                                             "simulate).")] = "fixed",
    seed: Annotated[int, typer.Option("--seed", help="Seed of arrivals and lengths (as serve simulate).")] = 0,
    max_concurrency: Annotated[int, typer.Option("--max-concurrency", help="Most requests in flight (open loop).")
                               ] = 256,
    max_duration_s: Annotated[float, typer.Option("--max-duration-s", help="Stop sending after this many seconds "
                                                  "and report what completed.")] = 3_600.0,
    request_timeout_s: Annotated[float, typer.Option("--request-timeout-s", help="Give up on one request after "
                                                     "this many seconds without data.")] = 600.0,
    slo_ttft_ms: Annotated[float | None, typer.Option("--slo-ttft-ms", help="TTFT limit for goodput.")] = None,
    slo_tpot_ms: Annotated[float | None, typer.Option("--slo-tpot-ms", help="TPOT limit for goodput.")] = None,
    engine: Annotated[str | None, typer.Option("--engine", help="Engine profile of the server (default: from "
                                               "GET /v1/models): vllm, sglang, trtllm or llama.cpp.")] = None,
    sim_model: Annotated[str | None, typer.Option("--sim-model", help="Catalog model (or config.json) the server "
                                                  "runs, for compare-serving.")] = None,
    gpu: Annotated[str | None, typer.Option("--gpu", help="Catalog GPU of the server, for compare-serving.")] = None,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs behind the endpoint.")] = 1,
    tp: Annotated[int, typer.Option("--tp", help="Tensor-parallel size of a server replica.")] = 1,
    pp: Annotated[int, typer.Option("--pp", help="Pipeline stages of a server replica.")] = 1,
    precision: Annotated[str, typer.Option("--precision", help="Weight precision the server runs.")] = "bf16",
    max_num_seqs: Annotated[int, typer.Option("--max-num-seqs", help="The server's max-num-seqs.")] = 256,
    max_num_batched_tokens: Annotated[int, typer.Option("--max-num-batched-tokens", help="The server's "
                                                        "max-num-batched-tokens.")] = 8192,
    catalog: CatalogOpt = None,
    db: DbOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Drive an OpenAI-compatible server with serve simulate's traffic; measure TTFT, TPOT, ITL, end-to-end
    latency, throughput and goodput from streamed responses; store the run (kind serve)."""
    from scaleright.bench.serve import ServeBenchConfig, run_serve_bench, store_run

    cfg = ServeBenchConfig(
        endpoint=endpoint, model=model, input_len=input_len, output_len=output_len, rate=rate,
        concurrency=concurrency, arrival=arrival, burstiness=burstiness, diurnal_period_s=diurnal_period_s,
        diurnal_amplitude=diurnal_amplitude, requests=requests, length_dist=length_dist, seed=seed,
        max_concurrency=max_concurrency, max_duration_s=max_duration_s, request_timeout_s=request_timeout_s,
        slo_ttft_ms=slo_ttft_ms, slo_tpot_ms=slo_tpot_ms, engine_profile=engine, sim_model=sim_model, gpu=gpu,
        gpus=gpus, tp=tp, pp=pp, precision=precision, max_num_seqs=max_num_seqs,
        max_num_batched_tokens=max_num_batched_tokens)  # fmt: skip
    if sim_model is not None or gpu is not None:
        _serve_sim_inputs(sim_model, gpu, precision, catalog)
    store = _store(db)
    res = run_serve_bench(cfg)
    from scaleright.bench.errors import RunStoreError

    stored_error = None
    try:
        run_id: int | None = store_run(store, cfg, res)
    except RunStoreError as exc:  # the measurement is in a recovery file; still print it
        run_id, stored_error = None, str(exc)
    out = {**res.metrics, "run_id": run_id, "db": str(store.path), "endpoint": cfg.endpoint, "model": cfg.model,
           **{k: v for k, v in res.server.items() if k != "models"}, "interrupted": res.stopped == "interrupted"}
    if as_json:
        _echo_json(out)
    else:
        _print_serve(out)
    if run_id is not None:
        _stored([{"run_id": run_id}], store.path)
    if stored_error is not None:
        from scaleright.errors import InputError

        raise InputError(stored_error)
    if res.stopped == "interrupted":
        if not as_json:
            typer.echo("interrupted: stopped sending, cancelled the requests in flight; the completed ones are "
                       f"above{f' and stored as run id {run_id}' if run_id is not None else ''}")
        raise typer.Exit(INTERRUPTED_EXIT)
    if res.metrics["requests"] == 0:
        from scaleright.errors import InputError

        first = res.metrics["error_messages"][0]["error"] if res.metrics["error_messages"] else "none completed"
        raise InputError(f"--endpoint={cfg.endpoint}: no request completed ({first}); stored as failed run id "
                         f"{run_id}")


def _serve_sim_inputs(sim_model: str | None, gpu: str | None, precision: str, catalog: Path | None) -> None:
    """--sim-model, --gpu and --precision checked against the catalog before anything is sent."""
    from scaleright.cli.common import catalog_from, check_choice
    from scaleright.workload import load_model
    from scaleright.workload.precision import STORAGE_PRECISIONS

    check_choice("--precision", precision, STORAGE_PRECISIONS)
    cat = catalog_from(catalog)
    if gpu is not None:
        cat.gpu(gpu)
    if sim_model is not None:
        load_model(sim_model, catalog=cat)


def _print_serve(out: dict) -> None:
    from scaleright.cli.common import table, visible

    rows = [[name, d["mean"], d["p50"], d["p90"], d["p99"]]
            for name, d in (("TTFT (ms)", out["ttft_ms"]), ("TPOT (ms)", out["tpot_ms"]), ("ITL (ms)", out["itl_ms"]),
                            ("end-to-end (ms)", out["e2e_ms"]))]  # fmt: skip
    engine = f"{out.get('engine') or 'unknown engine'} {out.get('engine_version') or ''}".strip()
    table(f"{out['model']} at {out['endpoint']} ({engine}), run id {out['run_id']}",
          ["latency", "mean", "p50", "p90", "p99"], rows)
    table("Throughput", ["metric", "value"], [
        ["requests/s", out["requests_per_s"]], ["output tokens/s", out["output_tokens_per_s"]],
        ["goodput requests/s", out["goodput_requests_per_s"]], ["requests completed", out["requests"]],
        ["requests failed", out["errors"]], ["not completed (stopped)", out["not_completed"]],
        ["send delay after arrival p99 (ms)", out["send_delay_ms"]["p99"]]])  # fmt: skip
    for e in out["error_messages"]:
        typer.echo(f"error x{e['count']}: {visible(e['error'])}", err=True)


def _serving_runs(db: Path | None, run_ids: str | None, sim_model: str | None, gpu: str | None, engine: str | None,
                  catalog: Path | None) -> list:
    """The stored serve runs named by ``--run-ids`` (default: every ok serve run), as simulator inputs; read-only."""
    from scaleright.bench.calibrate_serving import load_serving_runs
    from scaleright.bench.config import parse_int_list
    from scaleright.cli.common import catalog_from

    if engine is not None:
        from scaleright.estimate.engine_store import check_engine

        check_engine("--engine", engine)
    cat = catalog_from(catalog)
    ids = parse_int_list(run_ids, "--run-ids") if run_ids is not None else None
    damaged: list[str] = []
    runs = load_serving_runs(_read_store(db), ids, catalog=cat, sim_model=sim_model, gpu=gpu, engine=engine,
                             damaged=damaged)  # fmt: skip
    _warn([f"{m}; skipped" for m in damaged])
    return runs


_RunIdsOpt = Annotated[str | None, typer.Option("--run-ids", help="Serve run ids, e.g. 3,4 (default: every ok "
                                                "serve run).")]
_SimModelOpt = Annotated[str | None, typer.Option("--sim-model", help="Catalog model the server ran (default: "
                                                  "the run's --sim-model).")]
_SimGpuOpt = Annotated[str | None, typer.Option("--gpu", help="Catalog GPU of the server (default: the run's).")]
_EngineOpt = Annotated[str | None, typer.Option("--engine", help="Engine profile (default: the run's).")]
_CalOpt = Annotated[str | None, typer.Option("--calibration", help="Calibration profile name or JSON path.")]


@bench_app.command("compare-serving")
def compare_serving(
    run_ids: _RunIdsOpt = None, sim_model: _SimModelOpt = None, gpu: _SimGpuOpt = None, engine: _EngineOpt = None,
    calibration: _CalOpt = None, catalog: CatalogOpt = None, db: DbOpt = None, as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Simulated (serve simulate, the run's workload redrawn from its seed) vs measured, for stored serve runs."""
    serving_compare(run_ids, sim_model, gpu, engine, calibration, catalog, db, as_json)


def serving_compare(run_ids: str | None, sim_model: str | None, gpu: str | None, engine: str | None,
                    calibration: str | None, catalog: Path | None, db: Path | None, as_json: bool) -> None:
    """The body of ``bench compare-serving`` and ``compare --serving``."""
    from scaleright.bench.calibrate_serving import compare_run, simulate_run
    from scaleright.cli.common import calibration_from, table

    cal = calibration_from("--calibration", calibration)
    inputs = _serving_runs(db, run_ids, sim_model, gpu, engine, catalog)
    rows: list[dict[str, Any]] = []
    for si in inputs:
        sim = simulate_run(si, cal=cal)
        rows.extend({**r, "engine": si.engine, "stopped": si.stopped} for r in compare_run(si, sim))
    if as_json:
        _echo_json({"calibration": calibration or "default", "rows": rows})
        return
    table(f"Simulated vs measured serving (calibration {calibration or 'default'})",
          ["run", "engine", "metric", "simulated", "measured", "error %"],
          [[r["run_id"], r["engine"], r["metric"], r["simulated"], r["measured"], r["error_pct"]] for r in rows])
    stopped = sorted({r["run_id"] for r in rows if r["stopped"]})
    if stopped:
        typer.echo(f"runs {', '.join(map(str, stopped))} were stopped early: measured over the requests that "
                   "finished, simulated in full", err=True)


@bench_app.command("calibrate-serving")
def calibrate_serving(
    run_ids: _RunIdsOpt = None, sim_model: _SimModelOpt = None, gpu: _SimGpuOpt = None, engine: _EngineOpt = None,
    calibration: _CalOpt = None, catalog: CatalogOpt = None, db: DbOpt = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write the fitted profile and report as JSON "
                                             "(atomically).")] = None,
    as_json: JsonOpt = False,
) -> None:  # fmt: skip
    """Fit the engine profile's iteration overhead, HBM fraction and frontend latency to stored serve runs (and
    the per-sequence host time when every run's server is vLLM before 0.8)."""
    serving_calibrate(run_ids, sim_model, gpu, engine, calibration, catalog, db, out, as_json)


def serving_calibrate(run_ids: str | None, sim_model: str | None, gpu: str | None, engine: str | None,
                      calibration: str | None, catalog: Path | None, db: Path | None, out: Path | None,
                      as_json: bool, name: str | None = None, force: bool = False) -> None:
    """The body of ``bench calibrate-serving`` and ``calibrate --serving``; ``name`` (``calibrate --serving
    --name``) also stores the fitted profile for ``--engine NAME`` (``estimate.engine_store``)."""
    import dataclasses
    import json

    from scaleright.bench.calibrate_serving import fit_engine
    from scaleright.cli.common import calibration_from, check_output_path, table, write_output
    from scaleright.textfile import refuse_input_as_output

    if out is not None:
        check_output_path("--out", out)
        refuse_input_as_output("--out", out, _store_files(_read_store(db)))
    if name is not None:
        from scaleright.errors import InputError
        from scaleright.estimate.engine_store import engine_profile_path

        target = engine_profile_path(name)  # refused before the fit
        if target.exists() and not force:
            raise InputError(f"--name={name}: an engine profile already exists at {target}; pass --force to "
                             "replace it")  # fmt: skip
    cal = calibration_from("--calibration", calibration)
    inputs = _serving_runs(db, run_ids, sim_model, gpu, engine, catalog)
    profile, report = fit_engine(inputs, cal=cal)
    data = {"profile": dataclasses.asdict(profile), **report}
    if name is not None:
        from scaleright.bench.calibrate_serving import engine_provenance
        from scaleright.estimate.engine_store import save_engine_profile

        saved = save_engine_profile(name, profile, provenance=engine_provenance(inputs, report), overwrite=force)
        data = {"name": name, "path": str(saved), **data, "profile": {**data["profile"], "name": name}}
        _wrote(saved)
    if out is not None:
        write_output("--out", out, json.dumps(data, indent=2, allow_nan=False) + "\n")
        _wrote(out)
    if as_json:
        _echo_json(data)
        return
    table(f"Engine profile {report['base']!r} fitted to serve runs {', '.join(map(str, report['runs']))} "
          "(in-sample)", ["factor", "shipped", "fitted", "on its bound"],
          [[k, report["before"][k], report["after"][k], "yes" if k in report["on_bound"] else ""]
           for k in report["fitted"]])  # fmt: skip
    typer.echo(f"median |error| of mean TTFT, TPOT and ITL: {report['median_abs_pct_error_before']:.1f} % -> "
               f"{report['median_abs_pct_error_after']:.1f} %")
    if report.get("fit_choice"):
        typer.echo(str(report["fit_choice"]))


@bench_app.command("report")
def report(
    db: DbOpt = None,
    price: Annotated[float | None, typer.Option(
        "--price-usd-per-gpu-hour", help="Price per GPU-hour, for cost per job.")] = None,
    job_tokens: Annotated[float, typer.Option("--job-tokens", help="Tokens in one job, for job time and cost.")] = 1e9,
    html_out: Annotated[Path | None, typer.Option("--html", help="Also write a self-contained HTML report.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Speedup, scaling efficiency and cost per job against world size, from stored train runs."""
    from scaleright.bench.report import render_html, render_table, scaling_report
    from scaleright.cli.common import check_output_path, emit_json, write_output
    from scaleright.errors import InputError
    from scaleright.textfile import refuse_input_as_output

    if not (math.isfinite(job_tokens) and job_tokens > 0):
        raise InputError(f"--job-tokens={job_tokens} must be a finite positive number")
    if price is not None and not (math.isfinite(price) and price >= 0):
        raise InputError(f"--price-usd-per-gpu-hour={price} must be a finite non-negative number")
    if price is not None:
        from scaleright.limits import check_limit

        check_limit("--price-usd-per-gpu-hour", price, "usd_per_hour", low=0)
    store = _read_store(db)
    if html_out is not None:
        check_output_path("--html", html_out)
        refuse_input_as_output("--html", html_out, _store_files(store))
    skipped: list[str] = []
    groups = scaling_report(_listed(store, "train", status="ok"), price_usd_per_gpu_hour=price,
                            job_tokens=job_tokens, skipped=skipped)
    _warn(skipped)
    if not groups:  # as `compare` and `calibrate` do: nothing to report is an error, not an empty success
        raise InputError("no successful train runs in the database to report on; run `scaleright bench train` first")
    if html_out is not None:
        write_output("--html", html_out, render_html(groups))
        _wrote(html_out)
    if as_json:
        emit_json(groups)
        return
    from rich.console import Console

    Console().print(render_table(groups))


@runs_app.command("list")
def runs_list(
    db: DbOpt = None,
    kind: Annotated[str | None, typer.Option("--kind", help="train, comm, infer or serve.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Stored runs, oldest first (opens the database read-only; a damaged row is skipped with a warning)."""
    from scaleright.cli.common import emit_json

    _check_kind(kind)
    runs = _listed(_read_store(db), kind)
    if as_json:
        emit_json(runs)
        return
    from rich.console import Console
    from rich.table import Table

    t = Table()
    for col in ("id", "time (UTC)", "kind", "status", "hardware", "model", "layout", "headline"):
        t.add_column(col)
    for r in runs:
        t.add_row(*(_cell(v) for v in _list_row(r)))
    Console(markup=False, highlight=False).print(t)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(help="Run id (1 to 2**63-1).")],
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option(
        "--json", help="Print JSON: this command's only output, so the flag changes nothing (accepted for "
        "uniformity with the other commands).")] = False,
) -> None:
    """One stored run, as JSON (with or without --json); NaN and Infinity print as null."""
    from scaleright.bench.db import check_run_id
    from scaleright.cli.common import emit_json

    del as_json  # the output is JSON either way
    check_run_id(run_id, flag="ID")
    emit_json(_read_store(db).get(run_id))


@runs_app.command("export")
def runs_export(
    fmt: Annotated[Format, typer.Option("--format", help="csv or json.")] = Format.json,
    out: Annotated[Path | None, typer.Option(
        "--out", help="Write to this file (atomically; never the database itself) instead of stdout.")] = None,
    kind: Annotated[str | None, typer.Option("--kind", help="train, comm, infer or serve.")] = None,
    db: DbOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Same as --format json (the default).")] = False,
) -> None:
    """Every stored run as CSV (nested fields flattened; text that would start a spreadsheet formula gets a leading
    quote) or JSON (the default; NaN and Infinity as null)."""
    from scaleright.cli.common import check_output_path
    from scaleright.errors import InputError

    if as_json and fmt is Format.csv:
        raise InputError("--json and --format csv conflict; give one")
    _check_kind(kind)
    if out is not None:
        check_output_path("--out", out)
    store = _read_store(db)
    damaged: list[str] = []
    text = store.export(fmt.value, out, kind=kind, damaged=damaged)
    _warn(damaged)
    if out is None:
        typer.echo(text, nl=False)
    else:
        _wrote(out)


@runs_app.command("import")
def runs_import(
    file: Annotated[Path, typer.Argument(help="Recovery file written when a finished run could not be stored.")],
    db: DbOpt = None,
) -> None:
    """Store a run that a benchmark saved to a recovery file because the database was busy or unusable."""
    from scaleright.textfile import check_input_file

    check_input_file("FILE", file)
    store = _store(db)
    run_id = store.import_unsaved(file)
    typer.echo(f"stored the run from {file} as run id {run_id} in {store.path}; the recovery file is no longer "
               "needed (importing it again would store the run twice)")


def register(app: typer.Typer) -> None:
    """Add the ``bench`` and ``runs`` command groups to ``app``."""
    app.add_typer(bench_app, name="bench")
    app.add_typer(runs_app, name="runs")


def _read_store(db: Path | None):
    """The run store for a read-only command (nothing is created or changed)."""
    from scaleright.bench.db import RunStore

    return RunStore(db)


def _check_kind(kind: str | None) -> None:
    from scaleright.bench.db import KINDS
    from scaleright.cli.common import check_choice

    if kind is not None:
        check_choice("--kind", kind, KINDS)


def _store_files(store) -> list[str]:
    return [str(store.path), f"{store.path}-wal", f"{store.path}-shm"]


def _warn(messages: list[str]) -> None:
    for m in messages:
        typer.echo(f"warning: {m}", err=True)


def _listed(store, kind: str | None = None, **filters: Any) -> list[dict]:
    """``store.list``, printing one warning per damaged row (skipped) instead of failing."""
    damaged: list[str] = []
    runs = store.list(kind, damaged=damaged, **filters)
    _warn([f"{m}; skipped" for m in damaged])
    return runs


def _cell(value: Any) -> str:
    return "" if value is None else str(value)


def _fmt_num(value: Any, spec: str) -> str:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return format(value, spec)
    return str(value)


def _list_row(r: dict) -> list[Any]:
    """One row of `runs list`: tolerant of runs that lack a field (older versions, other kinds)."""
    m, lay, met = r["model"], r["layout"], r["metrics"]
    if r["kind"] == "serve":
        ttft = met.get("ttft_ms") if isinstance(met.get("ttft_ms"), dict) else {}
        load = f"{lay.get('rate')} req/s" if lay.get("rate") is not None else f"C={lay.get('concurrency')}"
        head = (f"TTFT p50 {_fmt_num(ttft.get('p50'), ',.1f')} ms, "
                f"{_fmt_num(met.get('output_tokens_per_s'), ',.0f')} tok/s" if r["status"] == "ok" else
                str(r["error"] or "")[:60])  # fmt: skip
        return [r["id"], r["time_utc"], r["kind"], r["status"], r["fingerprint"], m.get("name", ""),
                f"{load} in={lay.get('input_len')} out={lay.get('output_len')}", head]
    if m.get("arch") == "llama-decoder":
        from scaleright.bench.report import model_key

        k = model_key(m)
        model = f"{m.get('name', '?')} L{k['layers']}" + (f"/{k['catalog_layers']}" if m.get("truncated") else "")
    else:
        model = f"L{m.get('layers', '?')} h{m.get('hidden', '?')}" if "layers" in m else m.get("dtype", "")
    layout = " ".join(str(lay[k]) for k in ("strategy", "precision") if k in lay)
    layout += f" N={lay.get('world_size', '?')}" + (f" B={lay['batch_size']}" if "batch_size" in lay else "")
    rows = met.get("rows")
    head = (f"{_fmt_num(met['tokens_per_s'], ',.0f')} tok/s" if "tokens_per_s" in met else
            f"{_fmt_num(met['decode_tokens_per_s'], ',.0f')} decode tok/s" if "decode_tokens_per_s" in met else
            f"{len(rows) if isinstance(rows, list) else 0} rows" if r["status"] == "ok" else
            str(r["error"] or "")[:60])
    return [r["id"], r["time_utc"], r["kind"], r["status"], r["fingerprint"], model, layout.strip(), head]
