"""Measured training rows (``train_measured.csv``) as model inputs: one ``TrainCase`` per row, or a ``Skipped``.

Each row becomes the model's three separate inputs (STYLE habit 2): a ``TransformerSpec``, a catalog
``Accelerator`` with its ``Cluster``, and a ``Layout`` — plus the measured number and the convention it was
measured in.

Conventions (reference README, "Read before comparing numbers"; every one re-derived from the rows themselves where
a row gives both TFLOP/s and tokens/s, see ``validation.conventions.implied_flops_per_token``):
- llm-foundry MFU: 6·N·tokens + non-causal attention (4·L·d·s² per sequence forward), FP8 normalised to the FP8
  peak; ``achieved_tflops_per_gpu`` is that model TFLOP/s. Its MPT benchmark models are GPT-style with learned
  positions (n_positions = seq_len), biases, LayerNorm with bias and a tied head: the row's ``NumParams`` equals
  that shape's count exactly (6 658 859 008 for MPT-7B at 2048), so the spec is built that way.
- BLOOM (Megatron-DeepSpeed) logs hardware TFLOP/s, 96·B·s·L·h²·(1 + s/6h + V/16Lh): full recomputation included,
  attention non-causal. Megatron-LM's 2021 GPT-3 175B figure (138 TFLOP/s, 44 % of 312) is the same formula.
- Megatron-LM (Megatron-Core r0.8.0, 2024) and NeMo 24.07 report model TFLOP/s with non-causal attention;
  Megatron-Bridge (25.09 – 26.06) and NeMo Automodel count causal attention (their TFLOP/s ÷ tokens/s equals
  6·N + 6·L·h·s, e.g. 728e12 / 1621 = 4.49e11 for Llama 3 70B at 8192, against 4.81e11 non-causal). Their
  fine-tuning rows (packed SQuAD sequences) count attention only over the packed examples, a length the rows do
  not give (TFLOP/s ÷ tokens/s = 6·N, or 4·N for LoRA: the frozen base at 2/3): they are compared in tokens/s.
- torchtitan and torchao report tokens/s per GPU.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scaleright.catalog.gpus import Accelerator
from scaleright.errors import InputError
from scaleright.estimate.comm import Cluster
from scaleright.estimate.framework import FRAMEWORKS, Framework
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import LoraConfig, training_memory
from scaleright.workload import TransformerSpec, count_params
from validation.files import Skipped, SkipRow, cell_float, cell_int, read_rows
from validation.hardware import map_gpu
from validation.models import MODEL_MAP, catalog_spec, check_shape, gpt_spec, model_key

__all__ = ["TRAIN_METRICS", "TrainCase", "load_train_cases"]

TRAIN_METRICS = ("model_tflops_per_gpu", "hardware_tflops_per_gpu", "tokens_per_s_per_gpu")


@dataclass(frozen=True)
class TrainCase:
    """One measured training row as model inputs."""

    source: str  # csv file name
    line: int  # line in the csv (the header is line 1)
    group: str  # table family, e.g. "llm-foundry H100 BF16"
    label: str  # short description of model and layout
    spec: TransformerSpec
    gpu: Accelerator
    cluster: Cluster
    layout: Layout
    seq_len: int
    precision: str  # bf16, fp16, fp8 or fp4 (GEMM format)
    task: str  # pretrain, full-finetune or lora
    causal: bool  # attention FLOP convention of the source (True: half the s² matrix is counted)
    metric: str  # one of TRAIN_METRICS
    measured: float  # in the metric's unit (TFLOP/s per GPU or tokens/s per GPU)
    convention: str  # how the source counts, in words
    measured_tokens_per_s_per_gpu: float | None = None  # when the row also gives it (convention check)
    assumptions: tuple[str, ...] = ()  # inputs the row does not state and we chose
    framework: Framework = FRAMEWORKS["fsdp2"]  # what the source ran (``_FRAMEWORK``)


def _train_spec(row: dict[str, str], family: str, seq_len: int) -> tuple[TransformerSpec, tuple[str, ...]]:
    model = row["model"]
    if family == "llm-foundry":
        spec = gpt_spec(model.strip(), cell_int(row["layers"]), cell_int(row["hidden"]), cell_int(row["heads"]),
                         cell_int(row["ffn_hidden"]), cell_int(row["vocab"]), seq_len)  # fmt: skip
        m = re.search(r"NumParams=(\d+)", row["notes"])
        if m and count_params(spec).total != int(m.group(1)):
            raise SkipRow(f"MPT shape gives {count_params(spec).total} params, row says NumParams={m.group(1)}")
        return spec, ()
    if family == "bloom":
        # BLOOM: ALiBi (no position table), biases, LayerNorm, tied head; the 250 680-token vocabulary padded to
        # 250 880 (bigscience/bloom config.json). The embedding LayerNorm (2h parameters) is left out.
        spec = gpt_spec(model.strip(), cell_int(row["layers"]), cell_int(row["hidden"]), cell_int(row["heads"]),
                         cell_int(row["ffn_hidden"]), 250880, 0)  # fmt: skip
        return spec, ("vocabulary 250880 (BLOOM's padded tokenizer; the row leaves it blank)",)
    if family in ("megatron", "megatron-hw"):
        h = cell_int(row["hidden"])
        if None in (cell_int(row["layers"]), h, cell_int(row["heads"]), cell_int(row["vocab"])):
            raise SkipRow("model shape missing in row")
        ffn = cell_int(row["ffn_hidden"]) or 4 * h
        spec = gpt_spec(model.strip(), cell_int(row["layers"]), h, cell_int(row["heads"]), ffn, cell_int(row["vocab"]),
                        seq_len)
        return spec, (() if cell_int(row["ffn_hidden"]) else ("ffn_hidden = 4 x hidden (GPT)",))
    key = model_key(model)
    if key not in MODEL_MAP:
        raise SkipRow(f"model not mapped: {model!r}")
    name = MODEL_MAP[key]
    if name is None:
        raise SkipRow("model not in catalog and row gives no shape")
    spec = catalog_spec(name)
    check_shape(spec, row)
    return spec, ()


def _train_family(row: dict[str, str]) -> tuple[str, str]:
    """(family key, table group) of a training row."""
    src, table, gpu = row["source"], row["table"], row["gpu"]
    if "llm-foundry" in src:
        if table.startswith("H100 80GB FP8"):
            return "llm-foundry", "llm-foundry H100 FP8"
        if table.startswith("H100"):
            return "llm-foundry", "llm-foundry H100 BF16"
        return "llm-foundry", "llm-foundry A100 80GB" if table.startswith("A100 80GB") else "llm-foundry A100 40GB"
    if "bigscience" in src:
        return "bloom", "BLOOM-176B sweeps (A100)"
    if "Megatron-LM" in src:
        if table.startswith("GPT-3 Example"):
            return "megatron-hw", "Megatron-LM GPT-3 175B (A100)"
        return "megatron", "Megatron-LM weak scaling (H100)"
    if "torchtitan" in src or "pytorch/ao" in src:
        if "B200" in gpu:
            return "torchtitan", "torchtitan/torchao B200"
        if "H200" in gpu:
            return "torchtitan", "torchtitan H200"
        return "torchtitan", "torchtitan H100 (500 W)"
    if "Automodel" in src:
        return "automodel", "NeMo Automodel H100"
    if "NVIDIA/NeMo " in src:
        return "nemo24", "NeMo 24.07 H100 FP8"
    if "Megatron-Bridge" in src:
        return "bridge", "Megatron-Bridge " + ("pretrain" if "Pre-Training" in table else "SFT/LoRA")
    return "unknown", "other"


_PRECISION = [
    (re.compile(r"nvfp4", re.I), "fp4"),
    (re.compile(r"fp8|float8|mxfp8", re.I), "fp8"),
    (re.compile(r"bf16|bfloat16|16-bit|not stated \(MFU consistent with BF16|fp16 or bf16", re.I), "bf16"),
]


def _precision(s: str) -> str:
    for rx, p in _PRECISION:
        if rx.search(s):
            return p
    raise SkipRow(f"precision not mapped: {s!r}")


def _recompute(s: str) -> str:
    s = s.strip().lower()
    if s in ("", "none"):
        return "none"
    if "full" in s:
        return "full"
    if "sac" in s or "selective" in s:
        return "selective"
    raise SkipRow(f"recompute not mapped: {s!r}")


def _zero(s: str, dp_cp: int, family: str) -> tuple[int, tuple[str, ...]]:
    s = s.strip()
    if family in ("nemo24", "bridge", "megatron") and s in ("", "not stated", "FSDP=0"):
        # Megatron's distributed optimizer (ZeRO-1), on in NeMo / Megatron-Bridge recipes and implied by
        # Megatron-LM's --overlap-param-gather
        return 1, ("distributed optimizer (ZeRO-1)",)
    if s in ("", "none", "FSDP=0", "DeepSpeed ZeRO stage 0"):
        return 0, ()
    if "stage 1" in s:
        return 1, ()
    if "SHARD_GRAD_OP" in s:
        return 2, ()
    m = re.fullmatch(r"FSDP=(\d+)", s)
    if m:
        return (3 if int(m.group(1)) > 1 and dp_cp > 1 else 0), ()
    if "FULL_SHARD" in s or s.startswith("FSDP2"):
        return (3 if dp_cp > 1 else 0), ()
    raise SkipRow(f"ZeRO/FSDP mode not mapped: {s!r}")


def _task(model: str) -> str:
    m = model.lower()
    if "lora" in m:
        return "lora"
    if "sft" in m:
        return "full-finetune"
    return "pretrain"


# The framework each source table was measured with (scaleright.estimate.framework presets), from the source's own
# description (validation/reference/README.md and the rows' source column):
# - llm-foundry (mosaicml/llm-foundry scripts/train/benchmarking/README.md): Composer + PyTorch FSDP, flash-attn;
# - BLOOM (bigscience-workshop/bigscience train/tr11-176B-ml, tr8-104B-wide): Megatron-DeepSpeed 2022, fused softmax
#   over materialised scores, no TP-comm overlap;
# - Megatron-LM GPT-3 175B (NVIDIA/Megatron-LM README 2021, Narayanan et al. 2021): Megatron-LM 2021, the same;
# - Megatron-LM weak scaling (NVIDIA/Megatron-LM README, Megatron-Core r0.8.0), NeMo 24.07 and Megatron-Bridge
#   (NVIDIA performance summaries): Megatron-Core with --tp-comm-overlap, TE flash attention, virtual pipeline;
# - NeMo Automodel (NVIDIA-NeMo/Automodel performance summary): PyTorch FSDP2;
# - torchtitan / torchao (pytorch/torchtitan benchmarks/*.md, pytorch/ao): FSDP2, async TP where the table says so,
#   the pipeline schedule the row names.
_FRAMEWORK = {
    "llm-foundry": "llm-foundry", "bloom": "megatron-2021", "megatron-hw": "megatron-2021",
    "megatron": "megatron-core", "nemo24": "megatron-core", "bridge": "megatron-core", "automodel": "fsdp2",
    "torchtitan": "fsdp2",
}  # fmt: skip


def _framework(family: str, row: dict[str, str], virtual_stages: int) -> Framework:
    fw = FRAMEWORKS[_FRAMEWORK[family]]
    text = f"{row['table']} {row['notes']}".lower()
    if family == "torchtitan":
        # the FSDP float8 all-gather where the row names it (its zero_or_fsdp or precision column)
        f8_gather = re.search(r"f(loat)?8 all-gather", f"{row['zero_or_fsdp']} {row['precision']}", re.I) is not None
        fw = fw.with_overrides(tp_comm_overlap="asynctp" in text or "async tp" in text,
                               pipeline_schedule="interleaved" if virtual_stages > 1 else "1f1b",
                               fp8_all_gather=f8_gather)  # fmt: skip
    elif virtual_stages == 1 and family in ("megatron", "nemo24", "bridge", "bloom", "megatron-hw"):
        fw = fw.with_overrides(pipeline_schedule="1f1b")  # the same schedule with one chunk per rank
    return fw


_TRAIN_CONVENTION = {
    "llm-foundry": ("model_tflops_per_gpu", False, "llm-foundry model TFLOP/s: 6·N + non-causal attention"),
    "bloom": ("hardware_tflops_per_gpu", False, "Megatron-DeepSpeed hardware TFLOP/s (recompute counted, non-causal)"),
    "megatron-hw": ("hardware_tflops_per_gpu", False,
                    "Megatron-LM 2021 hardware TFLOP/s (recompute counted, non-causal)"),
    "megatron": ("model_tflops_per_gpu", False, "Megatron-Core r0.8.0 model TFLOP/s (non-causal attention)"),
    "nemo24": ("model_tflops_per_gpu", False, "NeMo 24.07 model TFLOP/s (non-causal attention)"),
    "bridge": ("model_tflops_per_gpu", True, "Megatron-Bridge model TFLOP/s (causal attention)"),
    "automodel": ("model_tflops_per_gpu", True, "NeMo Automodel model TFLOP/s (causal attention)"),
    "torchtitan": ("tokens_per_s_per_gpu", True, "torchtitan tokens/s per GPU"),
}


def _train_case(line: int, row: dict[str, str]) -> TrainCase:
    family, group = _train_family(row)
    if family not in _TRAIN_CONVENTION:
        raise SkipRow("unknown source")
    metric, causal, convention = _TRAIN_CONVENTION[family]
    assumptions: list[str] = []
    tokens_per_s = cell_float(row["tokens_per_sec_per_gpu"])
    if family in ("nemo24", "bridge") and _task(row["model"]) != "pretrain" and tokens_per_s:
        # fine-tuning on packed sequences (SQuAD): the sources' TFLOP/s count attention over the packed examples
        # only (their TFLOP/s / tokens/s is 6·N, or 4·N for LoRA, within 1-4 %), a length the row does not give
        metric, convention = "tokens_per_s_per_gpu", "NeMo / Megatron-Bridge tokens/s per GPU (packed fine-tuning)"
        assumptions.append("packed sequences: the model attends over the full seq_len (attention overestimated)")
    if family == "megatron" and not row["tp"].strip():
        raise SkipRow("parallel layout not stated (MFU end points of a strong-scaling plot)")
    key = {"tokens_per_s_per_gpu": "tokens_per_sec_per_gpu", "model_tflops_per_gpu": "achieved_tflops_per_gpu",
           "hardware_tflops_per_gpu": "achieved_tflops_per_gpu"}[metric]  # fmt: skip
    measured = cell_float(row[key])
    if measured is None:
        raise SkipRow("no measured value (OOM)" if "OOM" in row["notes"] else "no measured value in the compared unit")
    gpu, cluster, gnotes = map_gpu(row["gpu"])
    assumptions += gnotes
    seq_len = cell_int(row["seq_len"])
    if seq_len is None:
        if family != "torchtitan":
            raise SkipRow("seq_len missing")
        seq_len = 8192
        assumptions.append("seq_len 8192 (torchtitan's llama3 train configs; not restated in the table)")
    spec, snotes = _train_spec(row, family, seq_len)
    assumptions += snotes
    tp = cell_int(row["tp"]) or (None if row["tp"].strip() else 1)
    pp = cell_int(row["pp"]) or (None if row["pp"].strip() else 1)
    if tp is None or pp is None:
        raise SkipRow("parallel layout not stated")
    m = re.search(r"CP=(\d+)", row["cp_or_sp"])
    cp = int(m.group(1)) if m else 1
    n = cell_int(row["num_gpus"])
    dp = cell_int(row["dp"]) or (n // (tp * pp * cp) if n else None)
    if not n or dp is None or tp * pp * dp * cp != n:
        raise SkipRow(f"layout tp({tp})*pp({pp})*dp({dp})*cp({cp}) != num_gpus({n})")
    mb = cell_int(row["micro_batch"])
    if mb is None:
        mb = 1
        assumptions.append("micro-batch 1 (not stated)")
    gb = cell_int(row["global_batch_seqs"])
    vp = 1
    split_embedding_loss = False
    mv = re.search(r"VP=(\d+)", row["notes"])
    if mv and pp > 1:
        vp = int(mv.group(1))
        chunks = pp * vp
        if family in ("bridge", "nemo24") and vp > 1 and spec.layers % chunks and (spec.layers + 2) % chunks == 0:
            # Megatron-Core's interleaved schedule needs equal model chunks of whole layers; L layers do not split
            # into pp·vp of them, L + 2 slots do: the split counts the embedding and the loss as one layer each
            # (TransformerConfig account_for_embedding_in_pipeline_split / account_for_loss_in_pipeline_split).
            # Inferred from the published layout (Llama 3.1 405B: 126 + 2 = 128 = 16 x 8, 8 x 8, 16 x 4, 8 x 4);
            # that the Megatron-Bridge 405B recipe sets both flags is recalled, not checked against its source here.
            split_embedding_loss = True
            assumptions.append(f"VP={vp} x pp={pp} over {spec.layers} layers: the pipeline split counts the "
                               "embedding and the loss as layers (Megatron-Core account_for_*_in_pipeline_split)")
        elif chunks > spec.layers:
            assumptions.append(f"VP={vp} with pp={pp} exceeds {spec.layers} layers: run as {spec.layers // pp} chunks")
            vp = spec.layers // pp
    if family == "torchtitan" and pp > 1:
        # torchtitan splits the local batch into as many micro-batches as pipeline stages (its default
        # pipeline_parallel_microbatches); the 1F1B vs interleaved rows (100 vs 128 tok/s) fit that bubble
        local = mb
        n_micro = pp if local % pp == 0 else local
        mb = local // n_micro
        gb = gb or local * dp
        if "Interleaved" in row["notes"]:
            vp = 2
            assumptions.append("interleaved 1F1B with 2 stages per rank (torchtitan default)")
        assumptions.append(f"local batch {local} run as {n_micro} micro-batches of {mb}")
    if gb is None:
        gb = mb * dp
    if gb % (mb * dp):
        raise SkipRow(f"global batch {gb} is not a multiple of micro_batch({mb}) * dp({dp})")
    zero, znotes = _zero(row["zero_or_fsdp"], dp * cp, family)
    assumptions += znotes
    recompute = _recompute(row["recompute"])
    if family == "torchtitan" and not row["recompute"].strip():
        recompute = "selective"
        assumptions.append("selective activation checkpointing (llama3_8b.toml default; not restated)")
    if family == "torchtitan" and recompute == "selective":
        # torchtitan's selective AC is per-op (selective_ac_option = "op", its default and the rows' "per-op SAC"):
        # it recomputes every other matmul and the elementwise work, not Korthikanti's attention core
        # (validation/memory_cases.py reads its memory the same way)
        recompute = "op-selective"
        assumptions.append("torchtitan's selective AC is per-op (selective_ac_option = 'op'): op-selective")
    if family == "megatron-hw":
        recompute = "full"
        assumptions.append("full recomputation (Narayanan et al. 2021; the 138 TFLOP/s counts it)")
    elif family in ("megatron", "nemo24", "bridge") and not row["recompute"].strip():
        assumptions.append("no activation recomputation (not stated)")
    precision = _precision(row["precision"]) if row["precision"].strip() else "bf16"
    sp = tp > 1 and family in ("megatron", "megatron-hw", "nemo24", "bridge", "torchtitan", "automodel")
    layout = Layout(tp=tp, pp=pp, dp=dp, cp=cp, zero=zero, micro_batch=mb, global_batch=gb, recompute=recompute,
                    sequence_parallel=sp, virtual_stages=vp,
                    pipeline_split_embedding_loss=split_embedding_loss)  # fmt: skip
    try:
        layout.validate(spec, gpus=n)
    except InputError as exc:
        raise SkipRow(f"invalid layout: {exc}") from None
    task = _task(row["model"])
    framework = _framework(family, row, vp)
    if family == "automodel" and not row["recompute"].strip():
        layout, note = _checkpointing_that_fits(spec, gpu, layout, seq_len, precision, task, framework)
        assumptions.append(note)
    if task == "lora":
        assumptions.append("LoRA rank 16 on every linear layer (scaleright default; not stated)")
    label = (f"{row['model'].strip()} {n}x{gpu.id} s{seq_len} tp{tp} pp{pp}{f'v{vp}' if vp > 1 else ''} dp{dp}"
             f"{f' cp{cp}' if cp > 1 else ''} mb{mb} gb{gb} z{zero} {layout.recompute} {precision}")  # fmt: skip
    return TrainCase(
        source="train_measured.csv", line=line, group=group, label=label, spec=spec, gpu=gpu, cluster=cluster,
        layout=layout, seq_len=seq_len, precision=precision, task=task, causal=causal, metric=metric,
        measured=measured, convention=convention,
        measured_tokens_per_s_per_gpu=cell_float(row["tokens_per_sec_per_gpu"]),
        assumptions=tuple(assumptions), framework=framework,
    )  # fmt: skip


def _checkpointing_that_fits(spec: TransformerSpec, gpu: Accelerator, layout: Layout, seq_len: int, precision: str,
                             task: str, framework: Framework) -> tuple[Layout, str]:  # fmt: skip
    """The layout with the least activation checkpointing (none, then full) whose training memory fits ``gpu``, for
    a row that does not state its checkpointing: a run that went through held its activations somehow. NeMo
    Automodel's FSDP2 recipes switch ``activation_checkpointing`` on for the 70B models, whose activations at the
    published layouts (e.g. Llama 3 70B LoRA, tp2, micro-batch 2 x 4096) need about 100 GB per GPU on an 80 GB
    H100; its 8B LoRA on one GPU fits without. Full checkpointing is Automodel's (and PyTorch
    ``checkpoint_wrapper``'s) per-block recompute; Korthikanti's selective recompute saves nothing under flash
    attention, so it is not a step between the two."""
    lora = LoraConfig() if task == "lora" else None

    def need_gb(rc: str) -> float:
        return training_memory(spec, layout=layout.replace(recompute=rc), seq_len=seq_len, precision=precision,
                               task=task, lora=lora, framework=framework).total_gb  # fmt: skip

    without = need_gb("none")
    if without <= gpu.memory_gb:
        return layout.replace(recompute="none"), "no activation checkpointing (not stated; the layout fits without)"
    if need_gb("full") > gpu.memory_gb:
        raise SkipRow(f"the layout does not fit in {gpu.memory_gb:.1f} GB even with full activation checkpointing")
    return layout.replace(recompute="full"), (f"full activation checkpointing (not stated; without it the layout needs "
                                              f"{without:.0f} GB per GPU, the {gpu.id} has {gpu.memory_gb:.1f})")


def load_train_cases(directory: Path | str | None = None) -> tuple[list[TrainCase], list[Skipped]]:
    """Every row of ``train_measured.csv`` as a ``TrainCase`` or a ``Skipped`` with its reason."""
    cases, skipped = [], []
    for line, row in read_rows("train_measured.csv", directory):
        try:
            cases.append(_train_case(line, row))
        except SkipRow as exc:
            skipped.append(Skipped("train_measured.csv", line, _train_family(row)[1], str(exc)))
    return cases, skipped
