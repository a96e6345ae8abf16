"""``scaleright estimate memory|train|infer``: one workload on one hardware choice, explained by component."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from scaleright.api import (
    FLAGS,
    TRAIN_TASKS,
    check_counts,
    check_infer_args,
    check_lora_task,
    check_memory_task_args,
    check_offload_link,
    check_positive,
    check_pp_fits,
    check_sequence_parallel,
    check_task_precision,
    check_zero_recompute,
)
from scaleright.cli.common import (
    CatalogOpt,
    JsonOpt,
    catalog_from,
    check_choice,
    console,
    emit_json,
    esc,
    profile_from,
    startup_imports,
    table,
)
from scaleright.errors import InputError
from scaleright.limits import LIMITS

estimate_app = typer.Typer(help="Estimate memory, training speed or inference latency/throughput for one setup.",
                           no_args_is_help=True)  # fmt: skip


def register(app: typer.Typer) -> None:
    app.add_typer(estimate_app, name="estimate")


ModelOpt = typer.Option(..., "--model", help="Catalog model (e.g. llama-3.1-70b) or a path to a HF config.json.")
GpuOpt = typer.Option("h100-sxm", "--gpu", help="Catalog GPU id or alias (scaleright catalog gpus).")
GpusOpt = typer.Option(1, "--gpus", help=f"Number of GPUs, 1-{int(LIMITS['gpus'].high):,}.")
TpOpt = typer.Option(1, "--tp", help="Tensor-parallel size.")
PpOpt = typer.Option(1, "--pp", help="Pipeline-parallel stages.")
CpOpt = typer.Option(1, "--cp", help="Context-parallel size (training only).")
EpOpt = typer.Option(1, "--ep", help="Expert-parallel size (MoE; training only).")
ZeroOpt = typer.Option(0, "--zero", help="ZeRO stage 0-3 over data parallel (3 = FSDP full shard; training only).")
SeqOpt = typer.Option(4096, "--seq-len", help=f"Sequence length in tokens, 1-{int(LIMITS['seq_len'].high):,} "
                      "(inference: context per sequence).")
MbOpt = typer.Option(1, "--micro-batch", help="Sequences per micro-batch per data-parallel replica (training only).")
RecOpt = typer.Option("none", "--recompute", help="Activation recomputation: none, selective, full or op-selective "
                      "(torchtitan's per-op checkpointing; training only).")
SpOpt = typer.Option(False, "--sequence-parallel", help="Megatron sequence parallelism with TP (training only).")
PrecOpt = typer.Option("bf16", "--precision", help="Compute / weight precision.")
OffOptOpt = typer.Option(False, "--offload-optimizer", help="ZeRO-Offload: optimizer states, fp32 master weights "
                         "and gradients in host memory, the optimizer step on the CPU (needs --zero >= 1 or --fsdp; "
                         "parts with a PCIe host link; training only).")
OffActOpt = typer.Option(False, "--offload-activations", help="Saved activations in host memory between forward and "
                         "backward, two layers kept on the GPU (parts with a PCIe host link; training only).")
LoraOpt = typer.Option(16, "--lora-rank", help="LoRA / QLoRA adapter rank.")
LoraTargetsOpt = typer.Option("q,k,v,o,gate,up,down", "--lora-targets",
                              help="Comma-separated projections carrying adapters: q, k, v, o, gate, up, down.")


_LORA_DEFAULTS = {"lora_rank": 16, "lora_targets": "q,k,v,o,gate,up,down"}


def _lora(task: str, rank: int, targets: str):
    """The adapter of a LoRA / QLoRA task; None for other tasks (which refuse a non-default --lora-* option)."""
    from scaleright.estimate.memory import LORA_TARGETS, LoraConfig

    _bounded("lora_rank", lora_rank=rank)
    if task not in ("lora", "qlora"):
        given = {"lora_rank": rank, "lora_targets": targets}
        check_lora_task(task, {k: v for k, v in given.items() if v != _LORA_DEFAULTS[k]}, FLAGS)
        return None
    names = tuple(t.strip() for t in targets.split(",") if t.strip())
    if not names:
        raise InputError(f"--lora-targets={targets!r} names no projection; give at least one of "
                         f"{', '.join(LORA_TARGETS)}")  # fmt: skip
    return LoraConfig(rank=rank, targets=names)


OptimOpt = typer.Option("adamw", "--optimizer", help="adamw, adam, adam8bit or sgd (training only).")
CalOpt = typer.Option(None, "--calibration", help="Calibration profile name or JSON path (scaleright calibrate).")


def _load(model: str, gpu: str, catalog: Path | None):
    from scaleright.workload import load_model

    cat = catalog_from(catalog)
    return load_model(model, catalog=cat), cat.gpu(gpu)


def _bounded(kind: str, **kw: int | None) -> None:
    """Each given count is a positive integer at most ``LIMITS[kind]`` (the API's ``check_counts``, by flag)."""
    check_counts(kind, kw, FLAGS)


MIN_LINK_GBPS = 0.01  # 10 Mb/s: slower than any data-centre NIC; keeps collective times finite


def _link_gbps(flag: str, v: float | None) -> None:
    check_positive(flag, v, "link_gbps")
    if v is not None and v < MIN_LINK_GBPS:
        raise InputError(f"{flag}={v:g} must be at least {MIN_LINK_GBPS:g} Gb/s (10 Mb/s, slower than any "
                         "data-centre NIC)")  # fmt: skip


def _zero_stage(fsdp: bool, zero: int) -> int:
    """The ZeRO stage of ``--zero`` and ``--fsdp`` (full shard: stage 3), one home for both layout commands."""
    if fsdp and zero not in (0, 3):
        raise InputError(f"--fsdp is ZeRO-3; drop --zero or set --zero 3 (got --zero {zero})")
    return 3 if fsdp else zero


def _dp(gpus: int, tp: int, pp: int, cp: int) -> int:
    if gpus % (tp * pp * cp):
        raise InputError(f"tp({tp}) * pp({pp}) * cp({cp}) = {tp * pp * cp} does not divide gpus({gpus})")
    return gpus // (tp * pp * cp)


def _memory_table(title: str, breakdown: dict[str, float], total: float, gpu_gb: float, caption: str) -> None:
    rows = [[k, v] for k, v in breakdown.items()]
    rows += [["total", total], ["GPU memory", gpu_gb], ["fits", total <= gpu_gb], ["headroom", gpu_gb - total]]
    table(title, ["component", "GB per GPU"], rows)
    console.print(esc(caption), style="dim")


# layout options shared by ``estimate train`` and ``estimate memory`` (one vocabulary)
EtpOpt = typer.Option(None, "--etp", help="Expert-tensor-parallel size (MoE parallel folding, Megatron-Core "
                      "--expert-tensor-parallel-size; default: tp). ep * etp must divide tp * cp * dp.")
DpOpt = typer.Option(None, "--dp", help="Data-parallel size (default: gpus / (tp*pp*cp)).")
FsdpOpt = typer.Option(False, "--fsdp", help="FSDP full shard (same as --zero 3; conflicts with --zero 1 or 2).")
DpShardOpt = typer.Option(None, "--dp-shard", help="ZeRO-3 shard group (HSDP when smaller than dp * cp: shard over "
                          "this many data-parallel ranks, replicate across the rest; dense models). Default: dp * cp.")
VirtualStagesOpt = typer.Option(1, "--virtual-stages", help="Interleaved pipeline chunks per stage.")
PipelineSplitOpt = typer.Option(
    False, "--pipeline-split-embedding-loss", help="The pipeline split counts the embedding and the loss as one "
    "layer slot each (Megatron-Core account_for_embedding_in_pipeline_split and account_for_loss_in_pipeline_split; "
    "off by default, as in Megatron-Core): pp * virtual-stages may then reach layers + 2.")


@estimate_app.command("memory")
def memory_cmd(
    model: str = ModelOpt,
    task: str = typer.Option("pretrain", "--task", help="pretrain, full-finetune, lora, qlora or inference."),
    gpu: str = GpuOpt,
    gpus: int = GpusOpt,
    tp: int = TpOpt,
    pp: int = PpOpt,
    cp: int = CpOpt,
    ep: int = EpOpt,
    etp: int | None = EtpOpt,
    dp: int | None = DpOpt,
    zero: int = ZeroOpt,
    fsdp: bool = FsdpOpt,
    dp_shard: int | None = DpShardOpt,
    virtual_stages: int = VirtualStagesOpt,
    pipeline_split_embedding_loss: bool = PipelineSplitOpt,
    seq_len: int = SeqOpt,
    micro_batch: int = MbOpt,
    global_batch: int | None = typer.Option(None, "--global-batch",
                                            help="Sequences per step (pipeline in-flight; training only)."),
    recompute: str = RecOpt,
    sequence_parallel: bool = SpOpt,
    offload_optimizer: bool = OffOptOpt,
    offload_activations: bool = OffActOpt,
    precision: str = PrecOpt,
    kv_precision: str | None = typer.Option(None, "--kv-precision", help="KV-cache precision (inference only; "
                                             "default: fp32 with --precision fp32, else bf16)."),
    batch: int = typer.Option(1, "--batch", help="Concurrent sequences per replica (inference only)."),
    lora_rank: int = LoraOpt,
    lora_targets: str = LoraTargetsOpt,
    optimizer: str = OptimOpt,
    framework: str | None = typer.Option(
        None, "--framework", help="Training framework whose memory behaviour to assume: megatron-2021, megatron-core, "
        "deepspeed, fsdp2, accelerate or llm-foundry (sets --states, --cross-entropy, --attention and the CUDA "
        "context; scaleright.estimate.memory.profiles). Default: none, the ZeRO paper's accounting; training only."),
    attention: str | None = typer.Option(
        None, "--attention", help="Override the framework: flash or materialized (the s x s scores stored for "
        "backward); training only."),
    states: str | None = typer.Option(None, "--states", help="Who keeps the model states: zero (the ZeRO paper's 2 "
                                      "+ 2 + 12 B; the default without --framework), megatron (fp32 main grads), "
                                      "deepspeed-fp16, deepspeed-bf16 (fp32 grad accumulation) or fsdp2 (fp32 "
                                      "sharded params); overrides the framework's; training only."),
    cross_entropy: str | None = typer.Option(None, "--cross-entropy", help="Loss transient: fused (Megatron's "
                                             "vocab-parallel loss, 6 B per logit; the default without "
                                             "--framework), eager (PyTorch F.cross_entropy on fp32 logits, 12 B) "
                                             "or compiled (the same under torch.compile, 4 B); overrides the "
                                             "framework's; training only."),
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Memory per GPU by component (weights, gradients, optimizer, gathered ZeRO-3 buffers, activations, KV cache,
    overhead: allocator reserve, CUDA context, NCCL buffers)."""
    with startup_imports():
        from scaleright.estimate.calibration import MEMORY_CALIBRATION_RECORD
        from scaleright.estimate.framework import ATTENTION_KINDS, FRAMEWORKS
        from scaleright.estimate.layout import Layout
        from scaleright.estimate.memory import (
            CROSS_ENTROPY,
            STATE_FORMATS,
            inference_memory,
            resolve_profile,
            training_memory,
        )
        from scaleright.results.memory import MemoryResult
        from scaleright.workload.precision import KV_PRECISIONS

    check_task_precision(task, precision, FLAGS)
    for flag, value, allowed in (("--states", states, tuple(STATE_FORMATS)),
                                 ("--cross-entropy", cross_entropy, tuple(CROSS_ENTROPY)),
                                 ("--framework", framework, tuple(FRAMEWORKS)),
                                 ("--attention", attention, ATTENTION_KINDS)):  # fmt: skip
        if value is not None:
            check_choice(flag, value, allowed)
    _check_optimizer(optimizer)
    _bounded("gpus", gpus=gpus)
    _bounded("parallel_degree", tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, dp=dp, dp_shard=dp_shard,
             virtual_stages=virtual_stages)
    _bounded("seq_len", seq_len=seq_len)
    _bounded("micro_batch", micro_batch=micro_batch)
    _bounded("global_batch", global_batch=global_batch)
    _bounded("batch", batch=batch)
    check_zero_recompute(zero, recompute, FLAGS)
    stage = _zero_stage(fsdp, zero)  # (the flags as given are checked against the task first)
    given = {"cp": cp, "ep": ep, "etp": etp, "dp": 1 if dp is None else dp, "dp_shard": dp_shard,
             "virtual_stages": virtual_stages, "pipeline_split_embedding_loss": pipeline_split_embedding_loss,
             "zero": zero, "fsdp": fsdp, "micro_batch": micro_batch,
             "global_batch": global_batch,
             "recompute": recompute, "sequence_parallel": sequence_parallel, "optimizer": optimizer,
             "states": states, "cross_entropy": cross_entropy, "framework": framework,
             "attention": attention, "offload_optimizer": offload_optimizer,
             "offload_activations": offload_activations, "batch": batch, "kv_precision": kv_precision}  # fmt: skip
    check_memory_task_args(task, given, FLAGS)  # training-only options with --task inference, and the reverse
    zero = stage
    check_sequence_parallel(sequence_parallel, tp, FLAGS)
    lora = _lora(task, lora_rank, lora_targets)
    spec, g = _load(model, gpu, catalog)
    if task == "inference":
        if gpus % (tp * pp):
            raise InputError(f"tp({tp}) * pp({pp}) = {tp * pp} does not divide gpus({gpus})")
        kvp = kv_precision or ("fp32" if precision == "fp32" else "bf16")
        check_choice("--kv-precision", kvp, KV_PRECISIONS)
        mem = inference_memory(spec, batch=batch, context=seq_len, tp=tp, pp=pp, precision=precision,
                               kv_precision=kvp, gpu_memory_gb=g.memory_gb)  # fmt: skip
        caption = f"{spec.name} inference, {precision} weights, {kvp} KV cache, batch {batch} x {seq_len} tokens"
    else:
        dp = dp if dp is not None else _dp(gpus, tp, pp, cp)
        layout = Layout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, zero=zero, dp_shard=dp_shard,
                        micro_batch=micro_batch, global_batch=global_batch, recompute=recompute,
                        sequence_parallel=sequence_parallel, virtual_stages=virtual_stages,
                        offload_optimizer=offload_optimizer, offload_activations=offload_activations,
                        pipeline_split_embedding_loss=pipeline_split_embedding_loss)
        layout.validate(spec, gpus=gpus)
        check_offload_link(g, offload_optimizer, offload_activations, FLAGS)
        fw = _framework(framework, attention=attention) if framework is not None else None
        memory_kw: dict[str, Any] = dict(precision=precision, optimizer=optimizer, lora=lora, framework=fw,
                                         states=states, cross_entropy=cross_entropy,
                                         flash_attention=None if attention is None else attention == "flash")
        mem = training_memory(spec, layout=layout, seq_len=seq_len, task=task, gpu_memory_gb=g.memory_gb,
                              **memory_kw)  # fmt: skip
        prof = resolve_profile(fw, zero=zero, precision=precision, states=states, cross_entropy=cross_entropy,
                               flash_attention=memory_kw["flash_attention"])  # fmt: skip
        caption = (f"{spec.name} {task}, {precision}, {optimizer}, tp={tp} pp={pp} dp={dp} cp={cp} zero={zero}, "
                   f"micro-batch {micro_batch} x {seq_len} tokens, recompute {recompute}"
                   + "".join(f", {what} offload" for what, on in (("optimizer", offload_optimizer),
                                                                   ("activation", offload_activations)) if on))
    hints = []
    if task != "inference" and mem.fits is False:  # the smallest single changes that make it fit, each computed
        from scaleright.estimate.memory.hints import fit_hints

        hints = fit_hints(spec, layout=layout, seq_len=seq_len, gpu=g, task=task,
                          gpus_catalog=list(catalog_from(catalog).gpus.values()), **memory_kw)  # fmt: skip
    if as_json:  # validated: the schema's keys (scaleright schema memory), nothing else
        emit_json(MemoryResult.of(mem, model=spec.name, gpu=g, task=task, hints=hints,
                                  accounting=prof if task != "inference" else None).to_dict())  # fmt: skip
        return
    _memory_table(f"Memory per GPU on {g.id}", mem.as_dict(), mem.total_gb, g.memory_gb, caption)
    if task != "inference":
        console.print(esc(prof.summary()))
    if hints:
        console.print("would fit with: " + esc("; ".join(f"{h.change} ({h.total_gb:.1f} GB)" for h in hints)))
    elif task != "inference" and mem.fits is False:
        console.print("no single change of recompute, ZeRO stage, micro-batch, GPU count or GPU type fits it")
    console.print(f"PyTorch would read max_memory_allocated {mem.allocated_gb:.1f} GB and max_memory_reserved "
                  f"{mem.reserved_gb:.1f} GB; the total adds the CUDA context and NCCL buffers (what nvidia-smi "
                  "shows, what must fit).", style="dim")  # fmt: skip
    console.print(f"calibration: {MEMORY_CALIBRATION_RECORD['name']} ({MEMORY_CALIBRATION_RECORD['source']})",
                  style="dim")


def _system(g, system, gpus_per_node, inter_node_gbps_per_gpu):
    """The system (network tiers) of ``g``: ``--system`` or the GPU's default one, with the node flags as overrides
    (the flags were checked with the others, before the model was loaded)."""
    from scaleright.estimate.comm import system_of

    return system_of(g, system=system, gpus_per_node=gpus_per_node, nic_gbps_per_gpu=inter_node_gbps_per_gpu)


SystemOpt = typer.Option(None, "--system", help="Built-in system id (network tiers, "
                         "scaleright/catalog/data/systems.yaml). Default: the GPU's first system.")  # fmt: skip


@estimate_app.command("train")
def train_cmd(
    model: str = ModelOpt,
    gpu: str = GpuOpt,
    gpus: int = GpusOpt,
    tp: int = TpOpt,
    pp: int = PpOpt,
    cp: int = CpOpt,
    ep: int = EpOpt,
    etp: int | None = EtpOpt,
    dp: int | None = DpOpt,
    zero: int = ZeroOpt,
    fsdp: bool = FsdpOpt,
    dp_shard: int | None = DpShardOpt,
    recompute: str = RecOpt,
    sequence_parallel: bool = SpOpt,
    virtual_stages: int = VirtualStagesOpt,
    pipeline_split_embedding_loss: bool = PipelineSplitOpt,
    offload_optimizer: bool = OffOptOpt,
    offload_activations: bool = OffActOpt,
    seq_len: int = SeqOpt,
    global_batch: int | None = typer.Option(None, "--global-batch",
                                            help="Sequences per optimizer step (default: dp * micro-batch)."),
    micro_batch: int = MbOpt,
    precision: str = PrecOpt,
    task: str = typer.Option("pretrain", "--task", help="pretrain, full-finetune, lora or qlora."),
    lora_rank: int = LoraOpt,
    lora_targets: str = LoraTargetsOpt,
    optimizer: str = OptimOpt,
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", help="Default: the GPU's typical node."),
    inter_node_gbps_per_gpu: float | None = typer.Option(None, "--inter-node-gbps-per-gpu",
                                                         help="NIC Gb/s per GPU (default: the GPU's typical node)."),
    system: str | None = SystemOpt,
    framework: str | None = typer.Option(
        None, "--framework", help="Training framework whose behaviour the estimate assumes: megatron-2021, "
        "megatron-core, deepspeed, fsdp2 (default), accelerate or llm-foundry (scaleright.estimate.framework)."),
    tp_comm_overlap: bool | None = typer.Option(
        None, "--tp-comm-overlap/--no-tp-comm-overlap",
        help="Override the framework: TP communication overlapped with GEMMs (Megatron-Core --tp-comm-overlap, "
             "torch async TP; on in megatron-core only). Never on PCIe without P2P."),
    attention: str | None = typer.Option(
        None, "--attention", help="Override the framework: flash or materialized (s x s scores through HBM)."),
    cp_variant: str | None = typer.Option(
        None, "--cp-variant", help="Override the framework: context parallelism as ring, allgather or ulysses."),
    pipeline_schedule: str | None = typer.Option(
        None, "--pipeline-schedule", help="Override the framework: 1f1b, interleaved or zero-bubble (ZB-H1)."),
    tokens: float | None = typer.Option(None, "--tokens", help="Training tokens, for time and GPU-hours."),
    calibration: str | None = CalOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Step time, tokens/s, MFU/HFU, memory and scaling efficiency of one training layout."""
    with startup_imports():
        from scaleright.estimate.framework import ATTENTION_KINDS, CP_VARIANTS, FRAMEWORKS, PIPELINE_SCHEDULES
        from scaleright.estimate.layout import Layout
        from scaleright.estimate.train import estimate_train
        from scaleright.results.train import TrainResult
        from scaleright.workload.precision import TRAIN_PRECISIONS

    check_choice("--precision", precision, TRAIN_PRECISIONS)
    for flag, value, allowed in (("--framework", framework, tuple(FRAMEWORKS)), ("--attention", attention,
                                 ATTENTION_KINDS), ("--cp-variant", cp_variant, CP_VARIANTS),
                                 ("--pipeline-schedule", pipeline_schedule, PIPELINE_SCHEDULES)):  # fmt: skip
        if value is not None:
            check_choice(flag, value, allowed)
    fw = _framework(framework, tp_comm_overlap=tp_comm_overlap, attention=attention, cp_variant=cp_variant,
                    pipeline_schedule=pipeline_schedule)
    check_choice("--task", task, TRAIN_TASKS)
    _bounded("gpus", gpus=gpus)
    _bounded("parallel_degree", tp=tp, pp=pp, cp=cp, ep=ep, etp=etp, dp=dp, dp_shard=dp_shard,
             virtual_stages=virtual_stages)
    _bounded("seq_len", seq_len=seq_len)
    _bounded("micro_batch", micro_batch=micro_batch)
    _bounded("global_batch", global_batch=global_batch)
    check_positive("--tokens", tokens, "tokens")
    check_zero_recompute(zero, recompute, FLAGS)
    zero = _zero_stage(fsdp, zero)
    check_sequence_parallel(sequence_parallel, tp, FLAGS)
    lora = _lora(task, lora_rank, lora_targets)
    _bounded("gpus_per_node", gpus_per_node=gpus_per_node)
    _link_gbps("--inter-node-gbps-per-gpu", inter_node_gbps_per_gpu)
    prof = profile_from("--calibration", calibration)
    cal = prof.calibration
    spec, g = _load(model, gpu, catalog)
    dp = dp if dp is not None else _dp(gpus, tp, pp, cp)
    layout = Layout(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, etp=etp, zero=zero, dp_shard=dp_shard,
                    micro_batch=micro_batch,
                    global_batch=global_batch, recompute=recompute, sequence_parallel=sequence_parallel,
                    virtual_stages=virtual_stages, offload_optimizer=offload_optimizer,
                    offload_activations=offload_activations,
                    pipeline_split_embedding_loss=pipeline_split_embedding_loss)  # fmt: skip
    layout.validate(spec, gpus=gpus)
    check_offload_link(g, offload_optimizer, offload_activations, FLAGS)
    sysm = _system(g, system, gpus_per_node, inter_node_gbps_per_gpu)
    est = estimate_train(
        spec, gpu=g, layout=layout, seq_len=seq_len, system=sysm, precision=precision, task=task, lora=lora,
        optimizer=optimizer, tokens=tokens, cal=cal, framework=fw,
    )  # fmt: skip
    if as_json:
        emit_json(TrainResult.of(est, model=spec.name, calibration=prof.record()).to_dict())  # validated
        return
    head = f"{spec.name} {task} on {gpus} x {g.id}: {layout.text()}"
    console.print(f"[bold]{esc(head)}[/bold]")
    console.print(f"framework {esc(est.framework.summary())}")
    if not est.calibrated:
        console.print(f"[yellow]{esc(est.calibration_note)}[/yellow]")
    if not est.fits:
        console.print(f"[red]does not fit:[/red] {esc(est.reason)}")
    table("Throughput", ["metric", "value"], [
        ["step time (s)", est.step_time_s], ["tokens/s", est.tokens_per_s],
        ["tokens/s per GPU", est.tokens_per_s_per_gpu],
        ["model TFLOP/s per GPU", est.model_tflops_per_gpu], ["hardware TFLOP/s per GPU", est.hardware_tflops_per_gpu],
        ["MFU", est.mfu], ["HFU", est.hfu],
        ["scaling efficiency", est.scaling_efficiency], ["vs GPUs (smallest that fits)", est.base_gpus],
        ["train time (h)", est.train_time_h], ["GPU-hours", est.gpu_hours],
    ])  # fmt: skip
    if est.scaling_note:
        console.print("scaling efficiency " + esc(est.scaling_note), style="dim")
    table("Step time breakdown", ["part", "seconds", "share"],
          [[k, v, v / est.step_time_s] for k, v in est.time_breakdown_s.items() if v > 0])  # fmt: skip
    _memory_table("Memory per GPU", est.memory_breakdown_gb, est.memory_gb_per_gpu, g.memory_gb,
                  "GB = 1e9 bytes")  # fmt: skip
    if est.memory_accounting is not None:  # the framework's memory behaviour the figures assume
        console.print("memory accounting " + esc(est.memory_accounting.summary()))
        console.print("(estimate memory gives the same figures with the same --framework; without one it keeps the "
                      "ZeRO paper's accounting)", style="dim")
    if layout.offload_optimizer or sysm.tiers[0].kind == "pcie-host":  # the figures use the host's DRAM bandwidth
        console.print("host memory " + esc(sysm.host.derivation), style="dim")
    console.print(esc(prof.line()), style="dim")


@estimate_app.command("infer")
def infer_cmd(
    model: str = ModelOpt,
    gpu: str = GpuOpt,
    gpus: int = GpusOpt,
    tp: int | None = typer.Option(None, "--tp", help="Tensor-parallel size (default: the best of all valid)."),
    pp: int = PpOpt,
    input_len: int = typer.Option(..., "--input-len", help="Prompt tokens per request."),
    output_len: int = typer.Option(..., "--output-len", help="Generated tokens per request."),
    batch: str | None = typer.Option(None, "--batch", help="Concurrent sequences in total, or 'max' (KV capacity)."),
    concurrency: int | None = typer.Option(None, "--concurrency", help="Concurrent requests in total."),
    precision: str = PrecOpt,
    kv_precision: str | None = typer.Option(
        None, "--kv-precision", help="KV-cache precision (default: fp32 with --precision fp32, else bf16)."),
    gpus_per_node: int | None = typer.Option(None, "--gpus-per-node", help="Default: the GPU's typical node."),
    system: str | None = SystemOpt,
    calibration: str | None = CalOpt,
    catalog: Path | None = CatalogOpt,
    as_json: bool = JsonOpt,
) -> None:
    """TTFT, TPOT, end-to-end latency and throughput for serving; replicas vs tensor parallel."""
    with startup_imports():
        from scaleright.api import check_batch
        from scaleright.estimate.calibration import arch_factors
        from scaleright.estimate.infer import estimate_infer
        from scaleright.results.infer import InferResult

    check_infer_args(gpus=gpus, tp=tp, pp=pp, input_len=input_len, output_len=output_len, precision=precision,
                     kv_precision=kv_precision, names=FLAGS)  # fmt: skip
    if batch is not None and concurrency is not None:
        raise InputError("--batch and --concurrency are alternatives; give one")
    _bounded("batch", concurrency=concurrency)
    b: int | str = concurrency if concurrency is not None else 1
    if batch is not None:  # a count or "max"; any other word is refused by check_batch, naming --batch
        try:
            b = int(batch)
        except ValueError:
            b = batch
        check_batch("--batch", b)
    _bounded("gpus_per_node", gpus_per_node=gpus_per_node)
    prof = profile_from("--calibration", calibration)
    cal = prof.calibration
    spec, g = _load(model, gpu, catalog)
    check_pp_fits(gpus, pp, spec.layers)
    est = estimate_infer(
        spec, gpu=g, gpus=gpus, tp=tp, pp=pp, input_len=input_len, output_len=output_len, batch=b,
        system=_system(g, system, gpus_per_node, None), precision=precision, kv_precision=kv_precision,
        cal=cal,
    )  # fmt: skip
    arch = arch_factors(g)
    if as_json:
        emit_json(InferResult.of(est, model=spec.name, gpu=g, calibration=prof.record()).to_dict())  # validated
        return
    lay = est.layout
    idle = f" ({lay['idle_gpus']} GPU(s) idle: no faster layout uses them)" if lay.get("idle_gpus") else ""
    head = (f"{spec.name} on {gpus} x {g.id}: tp={lay['tp']} pp={lay['pp']} x {lay['replicas']} replicas{idle}, "
            f"{precision}, {input_len} in / {output_len} out, batch {est.batch}")  # fmt: skip
    console.print(f"[bold]{esc(head)}[/bold]")
    if not arch.calibrated:
        console.print(f"[yellow]{esc(arch.note)}[/yellow]")
    if not est.fits:
        console.print(f"[red]does not fit:[/red] {esc(est.reason)}")
    table("Latency and throughput (all GPUs)", ["metric", "value"], [
        ["TTFT (s)", est.ttft_s], ["TPOT (s)", est.tpot_s], ["end-to-end latency (s)", est.e2e_latency_s],
        ["output tokens/s", est.output_tokens_per_s], ["total tokens/s", est.total_tokens_per_s],
        ["requests/s", est.requests_per_s], ["max batch per replica (KV cache)", est.max_batch],
        ["memory per GPU (GB)", est.memory_gb_per_gpu],
    ])  # fmt: skip
    if est.alternatives and tp is None:
        table("Replicas vs tensor parallel", ["tp", "replicas", "fits", "output tokens/s", "TPOT (s)", "max batch"],
              [[a["layout"]["tp"], a["layout"]["replicas"], a["fits"], a["output_tokens_per_s"], a["tpot_s"],
                a["max_batch"]] for a in est.alternatives])  # fmt: skip
    from scaleright.workload.precision import is_gguf

    kernels = ("GGUF weights at their file's bytes per weight, dequantised to fp16 for prompts as llama.cpp does"
               if is_gguf(precision) else "TensorRT-LLM-like kernels")
    console.print("Assumes: the steady state of continuous batching (in-flight, prompts fused with decode steps) at "
                  f"a closed-loop concurrency, {kernels} with the calibration's decode factors; no "
                  "queueing (for queues and tail latency: scaleright serve simulate).", style="dim")
    console.print(esc(prof.line()), style="dim")


def _framework(name: str | None, **overrides: object):
    """The ``Framework`` of ``--framework`` with the per-field flags applied (None: the preset's value)."""
    from scaleright.estimate.framework import framework_of

    return framework_of(name, field="--framework").with_overrides(**overrides)


def _check_optimizer(optimizer: str) -> None:
    """Every task names a known optimizer (QLoRA and inference used to accept any string)."""
    from scaleright.estimate.memory import OPTIMIZERS

    if optimizer.lower() not in OPTIMIZERS:
        raise InputError(f"--optimizer={optimizer!r} not allowed; allowed: {', '.join(OPTIMIZERS)}")
