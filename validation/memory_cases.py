"""Published memory figures: measured peaks as ``MemoryCase``, closed forms as ``FormulaRow``.

- ``memory_measured.csv``: a measured row takes its layout from the training row of the same run in
  ``train_measured.csv``; a closed-form row (ZeRO model states, Korthikanti et al. 2022 activation bytes, BLOOM's
  checkpoint size) is checked exactly against the model's own formula, with no calibration.
- ``train_measured.csv``'s BLOOM-176B sweeps (``load_bloom_cases``): nvidia-smi snapshots ("Mem=NNGB") of layouts
  that ran, and the layouts that went out of memory ("Mem=OOM"), each a verdict the model must get right.

GiB readings are converted to GB (1e9 B). Each case states what its source's counter measures (``counter``) and
the framework behaviour the prediction assumes (``FRAMEWORKS``): torchtitan logs the caching allocator's peak
(``torch.cuda.max_memory_reserved``, its ``max_reserved`` field), nvidia-smi everything the process holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import (
    GB,
    LoraConfig,
    MemoryBreakdown,
    activation_bytes_per_layer,
    memory_profile,
    model_state_bytes,
    training_memory,
)
from scaleright.workload import TransformerSpec, count_params
from validation.files import Skipped, SkipRow, cell_int, read_rows
from validation.models import gpt_spec
from validation.train_cases import TrainCase, _train_case, load_train_cases

__all__ = ["FRAMEWORKS", "GIB", "FormulaRow", "MemoryCase", "RanRow", "load_bloom_cases", "load_memory_cases",
           "load_ran_rows"]

GIB = 2.0**30

# The framework behaviour each source's runs had: the ``estimate.framework`` preset (whose memory inputs
# ``estimate.memory.profiles`` reads) and what a row states beyond it.
FRAMEWORKS = {
    # torchtitan (Dec 2024 - 2025): FSDP2 with MixedPrecisionPolicy(bf16, reduce fp32), F.cross_entropy on
    # pred.float() (eager in 2024: train.py "TODO: compiling loss function causes CUDA errors, turning off for now";
    # compiled with the model in 2025, torchtitan/components/loss.py), SDPA flash attention,
    # activation_checkpoint.selective_ac_option = "op" (llama3 configs)
    "torchtitan": dict(framework="fsdp2", selective="op-selective", loss_compiled_from_year=2025),
    # Megatron-DeepSpeed as BLOOM ran it (2022): DeepSpeed ZeRO-1 (fp16 optimizer, or BF16_Optimizer with fp32
    # gradient accumulation where the row says so), Megatron's vocab-parallel cross entropy, materialised softmax,
    # a CUDA 11 stack without lazy module loading
    "bloom": dict(framework="megatron-2021", states="deepspeed-fp16"),
}


def _torchtitan_year(source: str) -> int:
    """The year of a torchtitan / torchao measurement: the benchmark file's YYYYMM, or 2025 for torchao's MX formats
    README (its B200 table ran torchtitan 6fc499f6, 2025)."""
    m = re.search(r"_(20\d\d)\d\d_", source)
    if m:
        return int(m.group(1))
    if "mx_formats" in source:
        return 2025
    raise SkipRow(f"no date for torchtitan source {source!r}")


@dataclass(frozen=True)
class MemoryCase:
    """One measured peak-memory row as model inputs."""

    source: str
    line: int
    group: str
    label: str
    spec: TransformerSpec
    layout: Layout
    seq_len: int
    precision: str
    measured_gb: float  # converted to GB (1e9 B); nan for a layout that went out of memory
    unit_note: str  # what the source reported and how it was converted
    assumptions: tuple[str, ...] = ()
    counter: str = "reserved"  # "reserved" (torch.cuda.max_memory_reserved) or "device" (nvidia-smi)
    outcome: str = "ran"  # "ran" or "oom"
    gpu_memory_gb: float | None = None  # the GPU's memory, for the fits verdict
    framework: str = "fsdp2"  # the estimate.framework preset the run used
    states: str | None = None  # None: the framework's (estimate.memory.profiles)
    cross_entropy: str | None = None
    compile_blocks: bool = False  # the transformer blocks ran under torch.compile (what op-selective saves)
    train_line: int | None = None  # the train_measured.csv line of the same run


@dataclass(frozen=True)
class FormulaRow:
    """A published closed-form figure, checked exactly against the model's formula (no calibration)."""

    source: str
    line: int
    label: str
    published: float
    predicted: float
    unit: str
    how: str


def load_memory_cases(directory: Path | str | None = None) -> tuple[list[MemoryCase], list[FormulaRow], list[Skipped]]:
    """Measured rows of ``memory_measured.csv`` as ``MemoryCase`` (layout taken from the matching training row),
    the closed-form rows as exact ``FormulaRow`` checks, and the rest as ``Skipped``."""
    train, _ = load_train_cases(directory)
    notes = {line: row["notes"] for line, row in read_rows("train_measured.csv", directory)}
    cases, formulas, skipped = [], [], []
    for line, row in read_rows("memory_measured.csv", directory):
        kind = row["measured_or_formula"]
        if kind.startswith("measured"):
            try:
                cases.append(_memory_case(line, row, train, notes))
            except SkipRow as exc:
                skipped.append(Skipped("memory_measured.csv", line, row["table"], str(exc)))
        else:
            try:
                formulas.extend(_formula_rows(line, row))
            except SkipRow as exc:
                skipped.append(Skipped("memory_measured.csv", line, row["table"], str(exc)))
    return cases, formulas, skipped


def _memory_case(line: int, row: dict[str, str], train: list[TrainCase], notes: dict[int, str]) -> MemoryCase:
    """The layout comes from the training row of the same run: same GPU count and the same memory figure in its
    notes (``train_measured.csv`` repeats each run's memory there)."""
    method = row["method(zero stage/fsdp/recompute)"]
    val = row["memory_gb_per_gpu"].strip()
    rx = re.compile(rf"memory {re.escape(val)} Gi?B")
    match = next((c for c in train if c.layout.gpus == cell_int(row["num_gpus"]) and rx.search(notes[c.line])), None)
    if match is None:
        raise SkipRow(f"no training row of the same run found for {method!r}")
    if "GiB" in row["notes"]:
        unit_note = "GiB as reported"
    else:
        unit_note = "reported as 'GB' by a torchtitan run, whose memory monitor prints GiB: read as GiB"
    fw = FRAMEWORKS["torchtitan"]  # every measured row of memory_measured.csv is a torchtitan / torchao run
    layout = match.layout
    assumptions = match.assumptions
    if layout.recompute == "selective":
        layout = layout.replace(recompute=str(fw["selective"]))
        assumptions += ("torchtitan's selective AC is per-op (selective_ac_option = 'op'): op-selective",)
    compiled = "compile" in method or "torch.compile" in notes[match.line]
    if compiled and layout.recompute == "op-selective":
        assumptions += ("torch.compile: a compiled block saves only what backward reads (no row-parallel outputs)",)
    cross_entropy = None
    if compiled and _torchtitan_year(row["source"]) >= int(fw["loss_compiled_from_year"]):
        cross_entropy = "compiled"
        assumptions += ("torch.compile in 2025 torchtitan compiles the loss too: compiled cross-entropy",)
    return MemoryCase(
        source="memory_measured.csv", line=line, group=row["table"], label=f"{match.label} [{method}]",
        spec=match.spec, layout=layout, seq_len=match.seq_len, precision=match.precision,
        measured_gb=float(val) * GIB / GB, unit_note=unit_note, assumptions=assumptions, counter="reserved",
        gpu_memory_gb=match.gpu.memory_gb, framework=str(fw["framework"]), cross_entropy=cross_entropy,
        compile_blocks=compiled, train_line=match.line,
    )  # fmt: skip


def load_bloom_cases(directory: Path | str | None = None) -> list[MemoryCase]:
    """BLOOM-176B sweep rows of ``train_measured.csv`` with a memory outcome: an nvidia-smi snapshot ("Mem=NNGB",
    MiB as nvidia-smi prints them, read as GiB) of a layout that ran, or "Mem=OOM" for one that went out of memory.
    Rows with neither ("Mem=GB") are left out. The layout is built by the training-row mapping
    (``train_cases._train_case``); an OOM row has no throughput, so a placeholder fills that cell first."""
    fw = FRAMEWORKS["bloom"]
    out = []
    for line, row in read_rows("train_measured.csv", directory):
        if "bigscience" not in row["source"]:
            continue
        m = re.search(r"Mem=(\d+(?:\.\d+)?)GB|Mem=(OOM)", row["notes"])
        if not m:
            continue
        oom = m.group(2) is not None
        try:
            tc = _train_case(line, {**row, "achieved_tflops_per_gpu": "1"} if oom else row)
        except SkipRow:
            continue
        states, assumptions = _bloom_states(row, tc.assumptions)
        shown = states or memory_profile(str(fw["framework"]), zero=tc.layout.zero, precision=tc.precision).states
        out.append(MemoryCase(
            source="train_measured.csv", line=line, group="BLOOM-176B sweeps (A100)",
            label=f"{tc.label} [{'OOM' if oom else 'ran'}; {shown}]", spec=tc.spec, layout=tc.layout,
            seq_len=tc.seq_len, precision=tc.precision,
            measured_gb=float("nan") if oom else float(m.group(1)) * GIB / GB,
            unit_note="nvidia-smi snapshot, MiB shown as 'GB': read as GiB", assumptions=assumptions,
            counter="device", outcome="oom" if oom else "ran", gpu_memory_gb=tc.gpu.memory_gb,
            framework=str(fw["framework"]), states=states,
        ))  # fmt: skip
    return out


def _bloom_states(row: dict[str, str], assumptions: tuple[str, ...]) -> tuple[str | None, tuple[str, ...]]:
    """The optimizer states of a BLOOM sweep row: BF16_Optimizer where the row says so, else DeepSpeed's ZeRO fp16
    optimizer."""
    if "fp32 grad accumulation" in row["precision"]:
        return None, assumptions  # the megatron-2021 profile's: BF16_Optimizer (deepspeed-bf16) for bf16, ZeRO-1
    why = "precision not stated: DeepSpeed's ZeRO fp16 optimizer (BF16_Optimizer rows say so)"
    return str(FRAMEWORKS["bloom"]["states"]), (*assumptions, why)


# The device memory of a row whose GPU the catalog models with another part (``validation.hardware``), in GB: the
# torchtitan H100 rows ran on 96 GB HBM2e H100s (Grand Teton) modelled as the 80 GB h100-sxm; the catalog reads a
# datasheet "80GB" as GiB (85.9 GB), so the same reading of "96GB" (103.1 GB). Their measured peaks (82.4 GiB) are
# above 80 GiB, so the 80 GB part could not have run them.
_DEVICE_MEMORY_GB = {"H100 SXM 96GB HBM2e @500W (Grand Teton)": 96 * GIB / GB}


@dataclass(frozen=True)
class RanRow:
    """A training row that ran (it has a measured throughput) with the model's memory for it on its GPU."""

    line: int  # train_measured.csv line
    group: str  # the training table (``TrainCase.group``)
    label: str
    memory: MemoryBreakdown  # ``fits``: the verdict on the row's GPU
    gpu_memory_gb: float
    mapping: str  # whose inputs: "training row", or the memory case of the same run


def load_ran_rows(directory: Path | str | None = None) -> list[RanRow]:
    """Every training row that ran, with the memory model's verdict: a layout that ran must fit. The inputs are the
    training-row mapping's (``train_cases``: layout, precision, task, framework with its row overrides), and where
    the run's memory was measured, that memory case's (torchtitan's compiled blocks and loss; a BLOOM row's
    optimizer states, ``_bloom_states``, for every BLOOM row); the device memory of the part the row names where the
    catalog models it with another (``_DEVICE_MEMORY_GB``)."""
    train, _ = load_train_cases(directory)
    rows = dict(read_rows("train_measured.csv", directory))
    measured, _, _ = load_memory_cases(directory)
    by_line = {c.train_line: c for c in measured if c.train_line is not None}
    out = []
    for tc in train:
        mc = by_line.get(tc.line)
        states: str | None = None
        layout, cross_entropy, compiled, mapping = tc.layout, None, False, "training row"
        if mc is not None:
            layout, states, cross_entropy, compiled = mc.layout, mc.states, mc.cross_entropy, mc.compile_blocks
            mapping = f"memory_measured.csv line {mc.line}"
        elif tc.group == "BLOOM-176B sweeps (A100)":
            states, _ = _bloom_states(rows[tc.line], ())
        gpu_gb = _DEVICE_MEMORY_GB.get(rows[tc.line]["gpu"], tc.gpu.memory_gb)
        m = training_memory(tc.spec, layout=layout, seq_len=tc.seq_len, precision=tc.precision, task=tc.task,
                            lora=LoraConfig() if tc.task == "lora" else None, framework=tc.framework, states=states,
                            cross_entropy=cross_entropy, compile_blocks=compiled,
                            gpu_memory_gb=gpu_gb)  # fmt: skip
        out.append(RanRow(tc.line, tc.group, tc.label, m, gpu_gb, mapping))
    return out


def _formula_rows(line: int, row: dict[str, str]) -> list[FormulaRow]:
    """Closed-form published figures checked against the model's own formulas."""
    src = row["source"]
    method = row["method(zero stage/fsdp/recompute)"]
    if src.startswith("Rajbhandari"):
        # ZeRO Figure 1: Psi = 7.5B, Nd = 64, K = 12; model states per device in GB
        psi, nd = 7.5e9, 64
        spec = gpt_spec("zero-example", 32, 4096, 32, 16384, 50304, 0)
        total = count_params(spec).total
        stage = 0 if "baseline" in method else int(re.search(r"stage (\d)", method).group(1))
        w, g, o = model_state_bytes(spec, dp=nd, zero=stage)
        per_param = float(w + g + o) / total
        return [FormulaRow("memory_measured.csv", line, f"ZeRO {method}, 7.5B params, Nd=64",
                           float(row["memory_gb_per_gpu"]), per_param * psi / GB, "GB",
                           "model_state_bytes per parameter x 7.5e9")]  # fmt: skip
    if src.startswith("Korthikanti") and row["table"].startswith("Table 2"):
        # bytes per layer for a GPT layer with dropout and without flash attention, at a generic shape
        s, b, h, a, t = 2048, 1, 12288, 96, 8
        spec = gpt_spec("gpt-generic", 96, h, a, 4 * h, 51200, 0).replace(dropout=True)
        kw = {"no parallelism": dict(tp=1), "tensor parallel (baseline)": dict(tp=t),
              "tensor + sequence parallel": dict(tp=t, sequence_parallel=True),
              "tensor parallel + selective recompute": dict(tp=t, recompute="selective"),
              "tensor + sequence parallel + selective recompute": dict(tp=t, sequence_parallel=True,
                                                                      recompute="selective"),
              "full activation recomputation": dict(tp=1, recompute="full")}[method]  # fmt: skip
        tt = kw.get("tp", 1)
        published = {
            "no parallelism": s * b * h * (34 + 5 * a * s / h),
            "tensor parallel (baseline)": s * b * h * (10 + 24 / tt + 5 * a * s / (h * tt)),
            "tensor + sequence parallel": s * b * h * (34 / tt + 5 * a * s / (h * tt)),
            "tensor parallel + selective recompute": s * b * h * (10 + 24 / tt),
            "tensor + sequence parallel + selective recompute": s * b * h * 34 / tt,
            "full activation recomputation": s * b * h * 2,
        }[method]
        pred = float(activation_bytes_per_layer(spec, seq_len=s, micro_batch=b, flash_attention=False, **kw))
        return [FormulaRow("memory_measured.csv", line, f"Korthikanti Table 2: {method} (s={s}, h={h}, a={a}, t={tt})",
                           published / 1e6, pred / 1e6, "MB per layer", row["notes"].split(";")[0])]  # fmt: skip
    if src.startswith("bigscience") and "Checkpoint" in row["table"]:
        spec = gpt_spec("bloom-176b", 70, 14336, 112, 4 * 14336, 250880, 0)
        pred = count_params(spec).total * 2 / GIB
        return [FormulaRow("memory_measured.csv", line, "BLOOM-176B bf16 weights, whole model (README: 328.34 'GB')",
                           328.34, pred, "GiB",
                           "count_params x 2 B; the README's GB are GiB (176.2e9 x 2 / 2^30)")]  # fmt: skip
    raise SkipRow("formula not modelled: " + (row["notes"].split(";")[0] if row["notes"] else method))
