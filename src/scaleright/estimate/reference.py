"""Published measurements as inputs of the performance model: one case per measured row, or a counted reason why not.

Reads ``train_measured.csv``, ``infer_measured.csv`` and ``memory_measured.csv`` (``../shared/reference``, see its
README) and turns each row into the model's three separate inputs (STYLE habit 2): a ``TransformerSpec`` (the catalog
model the row names, or one built from the row's own shape columns), a catalog ``Accelerator`` with its ``Cluster``,
and a ``Layout`` — plus the measured number and the convention it was measured in. ``predict_train``,
``predict_infer`` and ``predict_memory`` evaluate one case with a ``Calibration``; ``benchmarks/accuracy.py``,
``benchmarks/memory_accuracy.py`` and ``tests/test_accuracy.py`` use them.

Conventions (reference README, "Read before comparing numbers"; every one re-derived from the rows themselves where
a row gives both TFLOP/s and tokens/s, see ``implied_flops_per_token``):
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
- TensorRT-LLM throughput tables: output tokens/s of the whole system at maximum load, compared with
  ``estimate_infer(batch="max", tp=row tp)``. Quantised checkpoints (FP8, NVFP4) are assumed to run an FP8 KV
  cache (trtllm-bench ``--quantization FP8`` / ModelOpt recipes); 16-bit rows a 16-bit one.
- TensorRT-LLM online serving: mean inter-token latency at an achieved request rate. We compare TPOT at the
  concurrency Little's law gives, rate × measured end-to-end latency (TTFT + (O − 1)·ITL), capped at the KV-cache
  capacity; the rate is the row's output throughput / O. QPS=INF rows are skipped: their concurrency is the
  server's unstated batch limit, not a Little's-law figure. These rows are reported separately and are not part
  of the throughput median.

Simulated attention is always causal (decoder LMs run causal kernels); only the FLOP count a prediction is reported
in follows the source's convention, so ``predict_train`` multiplies the model's tokens/s by
``train_flops_per_token(causal=<source>)`` itself.

Rows that cannot be mapped are returned as ``Skipped`` with a reason, never dropped silently.
"""

from __future__ import annotations

import csv
import functools
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from scaleright.catalog import get_gpu
from scaleright.catalog.gpus import Accelerator
from scaleright.errors import InputError
from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.comm import Cluster
from scaleright.estimate.infer import infer_arrays, max_batch
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import GB, LoraConfig, training_memory
from scaleright.estimate.train import train_step_arrays
from scaleright.workload import TransformerSpec, count_params, load_model, train_flops_per_token

__all__ = [
    "REFERENCE_ENV_VAR",
    "TRAIN_METRICS",
    "INFER_METRICS",
    "TrainCase",
    "InferCase",
    "MemoryCase",
    "FormulaRow",
    "Skipped",
    "reference_dir",
    "load_train_cases",
    "load_infer_cases",
    "load_memory_cases",
    "predict_train",
    "predict_infer",
    "predict_memory",
    "implied_flops_per_token",
    "source_flops_per_token",
]

REFERENCE_ENV_VAR = "SCALERIGHT_REFERENCE_DIR"
GIB = 2.0**30
TRAIN_METRICS = ("model_tflops_per_gpu", "hardware_tflops_per_gpu", "tokens_per_s_per_gpu")
INFER_METRICS = ("output_tokens_per_s", "tpot_s")


# ---- cases ---------------------------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class InferCase:
    """One measured inference row as model inputs."""

    source: str
    line: int
    group: str
    label: str
    spec: TransformerSpec
    gpu: Accelerator
    cluster: Cluster
    gpus: int  # GPUs of the whole system the row measures
    tp: int
    pp: int
    input_len: int
    output_len: int
    precision: str  # weight / GEMM format
    kv_precision: str
    batch: int | str  # "max" (each replica at its KV-cache capacity) or the concurrency of the whole system
    metric: str  # one of INFER_METRICS
    measured: float  # output tokens/s of the whole system, or seconds per output token
    convention: str
    assumptions: tuple[str, ...] = ()


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
    measured_gb: float  # converted to GB (1e9 B)
    unit_note: str  # what the source reported and how it was converted
    assumptions: tuple[str, ...] = ()


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


@dataclass(frozen=True)
class Skipped:
    """A row left out of the comparison, with the reason."""

    source: str
    line: int
    group: str
    reason: str


# ---- files ---------------------------------------------------------------------------------------------------------


def reference_dir(directory: Path | str | None = None) -> Path:
    """The reference data directory: the argument, ``$SCALERIGHT_REFERENCE_DIR``, or the nearest ``shared/reference``
    beside a parent of this file or of the working directory (a checkout's ``../shared/reference``)."""
    if directory is None:
        directory = os.environ.get(REFERENCE_ENV_VAR) or None
    if directory is not None:
        p = Path(directory)
    else:
        # beside a checkout: walk up from this file (editable install) and from the working directory
        starts = [Path(__file__).resolve(), Path.cwd().resolve() / "_"]
        found = [a.parent / "shared" / "reference" for start in starts for a in start.parents]
        p = next((d for d in found if d.is_dir()), Path.cwd() / ".." / "shared" / "reference")
    if not p.is_dir():
        raise InputError(f"reference directory {p} not found (set ${REFERENCE_ENV_VAR} or pass directory=)")
    return p


def _rows(directory: Path | str | None, name: str) -> list[tuple[int, dict[str, str]]]:
    path = reference_dir(directory) / name
    with path.open(newline="", encoding="utf-8") as fh:
        return [(i + 2, row) for i, row in enumerate(csv.DictReader(fh))]


def _num(s: str) -> float | None:
    s = (s or "").strip()
    try:
        return float(s)
    except ValueError:
        return None


def _int(s: str) -> int | None:
    v = _num(s)
    return int(v) if v is not None and v == int(v) else None


class _Skip(Exception):
    """Raised while mapping a row; becomes a ``Skipped``."""


# ---- GPUs ----------------------------------------------------------------------------------------------------------

# csv gpu string -> (catalog name, note or "") ; None: not in the catalog (the row is skipped with that reason)
_GPU_MAP: dict[str, tuple[str, str] | None] = {
    "A100": ("a100-80gb", "Megatron-LM 2021 runs on Selene (A100 80GB SXM, Narayanan et al. 2021)"),
    "A100-80GB": ("a100-80gb", ""),
    "A100-40GB": ("a100-40gb", ""),
    "A100-SXM-80GB (Jean Zay)": ("a100-80gb", ""),
    "A100-SXM4-80GB": ("a100-80gb", ""),
    "H100": ("h100-sxm", ""),
    "H100-80GB": ("h100-sxm", ""),
    "H100 (DGX H100)": ("h100-sxm", ""),
    "H100 (DGX-H100)": ("h100-sxm", ""),
    "DGX-H100": ("h100-sxm", ""),
    "H100 80GB HBM3": ("h100-sxm", ""),
    "H100 SXM 80GB (DGX H100)": ("h100-sxm", ""),
    "H100 SXM 96GB HBM2e @500W (Grand Teton)": (
        "h100-sxm",
        "H100 96GB HBM2e capped at 500 W (not the 700 W SXM part): modelled as h100-sxm, so a 500 W clock deficit "
        "shows up as over-prediction",
    ),
    "H200 (8/node, 400Gb/s CX-7 per GPU)": ("h200-sxm", ""),
    "H200 141GB HBM3": ("h200-sxm", ""),
    "H200 SXM 141GB (DGX H200)": ("h200-sxm", ""),
    "H200 131GB HBM3": ("h200-sxm", "listed as 'H200 131GB' (usable memory of the run); modelled as h200-sxm"),
    "B200 (power limited), single node": (
        "b200", "power-limited B200: modelled as the datasheet b200, so the power cap shows up as over-prediction"
    ),
    "DGX-B200": ("b200", ""),
    "B200 180GB (DGX B200)": ("b200", ""),
    "DGX-GB200": ("gb200", ""),
    "GB200 192GB (GB200 NVL72)": ("gb200", ""),
    "L40S": ("l40s", ""),
    "DGX-GB300": None,
    "GH200 480GB": None,
    "RTX PRO 6000 Blackwell Server Edition": None,
}

# Jean Zay's A100 partition (BLOOM): 8 GPUs per node and 4 x 100 Gb/s Omni-Path per node (BLOOM paper,
# arXiv:2211.05100, "Hardware"; IDRIS Jean Zay gpu_p5 description): 50 Gb/s per GPU, not the catalog's typical 200.
_CLUSTER_OVERRIDES = {"A100-SXM-80GB (Jean Zay)": {"inter_node_gbps_per_gpu": 50.0}}


def _gpu(gpu_str: str) -> tuple[Accelerator, Cluster, tuple[str, ...]]:
    key = gpu_str.strip()
    if key not in _GPU_MAP:
        raise _Skip(f"GPU not mapped: {key!r}")
    entry = _GPU_MAP[key]
    if entry is None:
        raise _Skip(f"GPU not in catalog: {key.split(' (')[0].replace('DGX-', '')}")
    name, note = entry
    gpu = get_gpu(name)
    cluster = Cluster.for_gpu(gpu, **_CLUSTER_OVERRIDES.get(key, {}))
    notes = (note,) if note else ()
    if key in _CLUSTER_OVERRIDES:
        notes += ("inter-node 50 Gb/s per GPU (Jean Zay: 4 x 100 Gb/s Omni-Path per 8-GPU node)",)
    return gpu, cluster, notes


# ---- models --------------------------------------------------------------------------------------------------------

# row model string (lower case, suffixes like ' lora' removed) -> catalog name; None: not in the catalog
_MODEL_MAP: dict[str, str | None] = {
    "llama 3.1 8b": "llama-3.1-8b", "llama 3 8b": "llama-3.1-8b", "llama3-8b": "llama-3.1-8b",
    "llama3 8b": "llama-3.1-8b", "llama v3.1 8b": "llama-3.1-8b",
    "llama 3.1 70b": "llama-3.1-70b", "llama 3 70b": "llama-3.1-70b", "llama3 70b": "llama-3.1-70b",
    "llama3-70b": "llama-3.1-70b", "llama v3.1 70b": "llama-3.1-70b", "llama 3.3 70b": "llama-3.1-70b",
    "llama3 70b 2-node": "llama-3.1-70b",
    "llama 3.1 405b": "llama-3.1-405b", "llama v3.1 405b": "llama-3.1-405b",
    "llama2-7b": "llama-2-7b", "llama2-13b": "llama-2-13b", "llama2-70b": "llama-2-70b",
    "gpt3-175b": "gpt3-175b",
    "mistral 7b": "mistral-7b-v0.3", "mixtral 8x7b": "mixtral-8x7b", "mixtral 8x22b": "mixtral-8x22b",
    "qwen3-30b-a3b": "qwen3-30b-a3b",
    "llama 4 scout": None, "llama 4 maverick": None, "qwen3-235b-a22b": None,
    "gpt3-5b": None, "gpt3-20b": None, "nemotron-8b": None, "nemotron-22b": None, "nemotron-340b": None,
}  # fmt: skip


def _model_key(model: str) -> str:
    m = model.strip().lower()
    m = re.sub(r"\s*\((sft|lora) performance\)$", "", m)
    m = re.sub(r"\s+(sft|lora)$", "", m)
    return m


@functools.cache
def _catalog_spec(name: str) -> TransformerSpec:
    return load_model(name)


@functools.cache
def _gpt_spec(name: str, layers: int, hidden: int, heads: int, ffn: int, vocab: int, positions: int) -> TransformerSpec:
    """GPT-style block (Radford et al. 2019; Megatron GPT, MPT as benchmarked, BLOOM): LayerNorm with bias, biases on
    every projection, 2-matrix GELU MLP, tied head; ``positions`` rows of learned positions (0 for ALiBi)."""
    return TransformerSpec(
        name=name, family="gpt2", layers=layers, hidden=hidden, heads=heads, kv_heads=heads, head_dim=hidden // heads,
        ffn_hidden=ffn, vocab=vocab, gated_mlp=False, tied_embeddings=True, qkv_bias=True, out_bias=True,
        mlp_bias=True, norm="layernorm", learned_positions=positions, max_position=positions,
    )  # fmt: skip


def _check_shape(spec: TransformerSpec, row: dict[str, str]) -> None:
    """A row that states a shape must agree with the catalog model it names."""
    pairs = {"layers": spec.layers, "hidden": spec.hidden, "heads": spec.heads, "kv_heads": spec.kv_heads,
             "ffn_hidden": spec.ffn_hidden, "vocab": spec.vocab}  # fmt: skip
    bad = [f"{k}={row[k]} vs {v}" for k, v in pairs.items() if _int(row.get(k, "")) not in (None, v)]
    if bad:
        raise _Skip(f"row shape disagrees with catalog {spec.name}: {', '.join(bad)}")


def _train_spec(row: dict[str, str], family: str, seq_len: int) -> tuple[TransformerSpec, tuple[str, ...]]:
    model = row["model"]
    if family == "llm-foundry":
        spec = _gpt_spec(model.strip(), _int(row["layers"]), _int(row["hidden"]), _int(row["heads"]),
                         _int(row["ffn_hidden"]), _int(row["vocab"]), seq_len)  # fmt: skip
        m = re.search(r"NumParams=(\d+)", row["notes"])
        if m and count_params(spec).total != int(m.group(1)):
            raise _Skip(f"MPT shape gives {count_params(spec).total} params, row says NumParams={m.group(1)}")
        return spec, ()
    if family == "bloom":
        # BLOOM: ALiBi (no position table), biases, LayerNorm, tied head; the 250 680-token vocabulary padded to
        # 250 880 (bigscience/bloom config.json). The embedding LayerNorm (2h parameters) is left out.
        spec = _gpt_spec(model.strip(), _int(row["layers"]), _int(row["hidden"]), _int(row["heads"]),
                         _int(row["ffn_hidden"]), 250880, 0)  # fmt: skip
        return spec, ("vocabulary 250880 (BLOOM's padded tokenizer; the row leaves it blank)",)
    if family in ("megatron", "megatron-hw"):
        h = _int(row["hidden"])
        if None in (_int(row["layers"]), h, _int(row["heads"]), _int(row["vocab"])):
            raise _Skip("model shape missing in row")
        ffn = _int(row["ffn_hidden"]) or 4 * h
        spec = _gpt_spec(model.strip(), _int(row["layers"]), h, _int(row["heads"]), ffn, _int(row["vocab"]), seq_len)
        return spec, (() if _int(row["ffn_hidden"]) else ("ffn_hidden = 4 x hidden (GPT)",))
    key = _model_key(model)
    if key not in _MODEL_MAP:
        raise _Skip(f"model not mapped: {model!r}")
    name = _MODEL_MAP[key]
    if name is None:
        raise _Skip("model not in catalog and row gives no shape")
    spec = _catalog_spec(name)
    _check_shape(spec, row)
    return spec, ()


# ---- training rows -------------------------------------------------------------------------------------------------


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
    raise _Skip(f"precision not mapped: {s!r}")


def _recompute(s: str) -> str:
    s = s.strip().lower()
    if s in ("", "none"):
        return "none"
    if "full" in s:
        return "full"
    if "sac" in s or "selective" in s:
        return "selective"
    raise _Skip(f"recompute not mapped: {s!r}")


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
    raise _Skip(f"ZeRO/FSDP mode not mapped: {s!r}")


def _task(model: str) -> str:
    m = model.lower()
    if "lora" in m:
        return "lora"
    if "sft" in m:
        return "full-finetune"
    return "pretrain"


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
        raise _Skip("unknown source")
    metric, causal, convention = _TRAIN_CONVENTION[family]
    assumptions: list[str] = []
    if family in ("nemo24", "bridge") and _task(row["model"]) != "pretrain" and _num(row["tokens_per_sec_per_gpu"]):
        # fine-tuning on packed sequences (SQuAD): the sources' TFLOP/s count attention over the packed examples
        # only (their TFLOP/s / tokens/s is 6·N, or 4·N for LoRA, within 1-4 %), a length the row does not give
        metric, convention = "tokens_per_s_per_gpu", "NeMo / Megatron-Bridge tokens/s per GPU (packed fine-tuning)"
        assumptions.append("packed sequences: the model attends over the full seq_len (attention overestimated)")
    if family == "megatron" and not row["tp"].strip():
        raise _Skip("parallel layout not stated (MFU end points of a strong-scaling plot)")
    key = {"tokens_per_s_per_gpu": "tokens_per_sec_per_gpu", "model_tflops_per_gpu": "achieved_tflops_per_gpu",
           "hardware_tflops_per_gpu": "achieved_tflops_per_gpu"}[metric]  # fmt: skip
    measured = _num(row[key])
    if measured is None:
        raise _Skip("no measured value (OOM)" if "OOM" in row["notes"] else "no measured value in the compared unit")
    gpu, cluster, gnotes = _gpu(row["gpu"])
    assumptions += gnotes
    seq_len = _int(row["seq_len"])
    if seq_len is None:
        if family != "torchtitan":
            raise _Skip("seq_len missing")
        seq_len = 8192
        assumptions.append("seq_len 8192 (torchtitan's llama3 train configs; not restated in the table)")
    spec, snotes = _train_spec(row, family, seq_len)
    assumptions += snotes
    tp = _int(row["tp"]) or (None if row["tp"].strip() else 1)
    pp = _int(row["pp"]) or (None if row["pp"].strip() else 1)
    if tp is None or pp is None:
        raise _Skip("parallel layout not stated")
    m = re.search(r"CP=(\d+)", row["cp_or_sp"])
    cp = int(m.group(1)) if m else 1
    n = _int(row["num_gpus"])
    dp = _int(row["dp"]) or (n // (tp * pp * cp) if n else None)
    if not n or dp is None or tp * pp * dp * cp != n:
        raise _Skip(f"layout tp({tp})*pp({pp})*dp({dp})*cp({cp}) != num_gpus({n})")
    mb = _int(row["micro_batch"])
    if mb is None:
        mb = 1
        assumptions.append("micro-batch 1 (not stated)")
    gb = _int(row["global_batch_seqs"])
    vp = 1
    mv = re.search(r"VP=(\d+)", row["notes"])
    if mv and pp > 1:
        vp = int(mv.group(1))
        if pp * vp > spec.layers:
            # Megatron-Bridge counts the embedding and the loss as pipeline layers (account_for_*_in_pipeline_split)
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
        raise _Skip(f"global batch {gb} is not a multiple of micro_batch({mb}) * dp({dp})")
    zero, znotes = _zero(row["zero_or_fsdp"], dp * cp, family)
    assumptions += znotes
    recompute = _recompute(row["recompute"])
    if family == "torchtitan" and not row["recompute"].strip():
        recompute = "selective"
        assumptions.append("selective activation checkpointing (llama3_8b.toml default; not restated)")
    if family == "megatron-hw":
        recompute = "full"
        assumptions.append("full recomputation (Narayanan et al. 2021; the 138 TFLOP/s counts it)")
    elif family in ("megatron", "nemo24", "bridge") and not row["recompute"].strip():
        assumptions.append("no activation recomputation (not stated)")
    precision = _precision(row["precision"]) if row["precision"].strip() else "bf16"
    sp = tp > 1 and family in ("megatron", "megatron-hw", "nemo24", "bridge", "torchtitan", "automodel")
    layout = Layout(tp=tp, pp=pp, dp=dp, cp=cp, zero=zero, micro_batch=mb, global_batch=gb, recompute=recompute,
                    sequence_parallel=sp, virtual_stages=vp)  # fmt: skip
    try:
        layout.validate(spec, gpus=n)
    except InputError as exc:
        raise _Skip(f"invalid layout: {exc}") from None
    task = _task(row["model"])
    if task == "lora":
        assumptions.append("LoRA rank 16 on every linear layer (scaleright default; not stated)")
    label = (f"{row['model'].strip()} {n}x{gpu.id} s{seq_len} tp{tp} pp{pp}{f'v{vp}' if vp > 1 else ''} dp{dp}"
             f"{f' cp{cp}' if cp > 1 else ''} mb{mb} gb{gb} z{zero} {recompute} {precision}")  # fmt: skip
    return TrainCase(
        source="train_measured.csv", line=line, group=group, label=label, spec=spec, gpu=gpu, cluster=cluster,
        layout=layout, seq_len=seq_len, precision=precision, task=task, causal=causal, metric=metric,
        measured=measured, convention=convention, measured_tokens_per_s_per_gpu=_num(row["tokens_per_sec_per_gpu"]),
        assumptions=tuple(assumptions),
    )  # fmt: skip


def load_train_cases(directory: Path | str | None = None) -> tuple[list[TrainCase], list[Skipped]]:
    """Every row of ``train_measured.csv`` as a ``TrainCase`` or a ``Skipped`` with its reason."""
    cases, skipped = [], []
    for line, row in _rows(directory, "train_measured.csv"):
        try:
            cases.append(_train_case(line, row))
        except _Skip as exc:
            skipped.append(Skipped("train_measured.csv", line, _train_family(row)[1], str(exc)))
    return cases, skipped


# ---- inference rows ------------------------------------------------------------------------------------------------

_INFER_PRECISION = {"FP8": "fp8", "FP4": "fp4", "FP16": "fp16", "BF16": "bf16"}


def _infer_group(row: dict[str, str]) -> str:
    if row["table"].startswith("Online"):
        return "TensorRT-LLM online serving (TPOT)"
    return "TensorRT-LLM v0.17 throughput" if "v0.17" in row["table"] else "TensorRT-LLM v1.0 throughput"


def _infer_case(line: int, row: dict[str, str]) -> InferCase:
    online = row["table"].startswith("Online")
    group = _infer_group(row)
    key = _model_key(row["model"])
    if key not in _MODEL_MAP:
        raise _Skip(f"model not mapped: {row['model']!r}")
    if _MODEL_MAP[key] is None:
        raise _Skip("model not in catalog and row gives no shape")
    spec = _catalog_spec(_MODEL_MAP[key])
    gpu, cluster, assumptions = _gpu(row["gpu"])
    precision = _INFER_PRECISION.get(row["precision"].strip())
    if precision is None:
        raise _Skip(f"precision not mapped: {row['precision']!r}")
    kv = "fp8" if precision in ("fp8", "fp4") else precision
    tp, pp, n = _int(row["tp"]), _int(row["pp"]), _int(row["num_gpus"])
    if tp * pp != n:
        raise _Skip(f"tp({tp}) * pp({pp}) != num_gpus({n})")
    i_len, o_len = _int(row["input_len"]), _int(row["output_len"])
    measured_tps = _num(row["throughput_tokens_per_s"])
    label = f"{spec.name} {n}x{gpu.id} tp{tp} pp{pp} {precision} {i_len}/{o_len}"
    if not online:
        return InferCase(
            source="infer_measured.csv", line=line, group=group, label=label, spec=spec, gpu=gpu, cluster=cluster,
            gpus=n, tp=tp, pp=pp, input_len=i_len, output_len=o_len, precision=precision, kv_precision=kv,
            batch="max", metric="output_tokens_per_s", measured=measured_tps,
            convention="output tokens/s, whole system, maximum load", assumptions=tuple(assumptions),
        )  # fmt: skip
    if "QPS=INF" in row["batch_or_concurrency"]:
        raise _Skip("QPS=INF: concurrency set by the server's unstated max batch size (queue unbounded)")
    ttft, itl = _num(row["ttft_ms"]), _num(row["tpot_ms"])
    if None in (ttft, itl, measured_tps):
        raise _Skip("online row without TTFT, ITL or throughput")
    rate = measured_tps / o_len  # requests/s, from the output throughput (finer than the rounded 'achieved' figure)
    e2e = (ttft + (o_len - 1) * itl) / 1e3
    conc = max(int(round(rate * e2e)), 1)
    cap = _max_batch(spec, gpu, i_len + o_len, tp, pp, precision, kv)
    batch = min(conc, cap * (n // (tp * pp))) if cap else conc
    note = (f"concurrency {batch} = {rate:.2f} req/s x {e2e:.2f} s (Little's law"
            + (", capped at KV capacity)" if batch < conc else ")"))
    return InferCase(
        source="infer_measured.csv", line=line, group=group, label=f"{label} {row['batch_or_concurrency']}",
        spec=spec, gpu=gpu, cluster=cluster, gpus=n, tp=tp, pp=pp, input_len=i_len, output_len=o_len,
        precision=precision, kv_precision=kv, batch=batch, metric="tpot_s", measured=itl / 1e3,
        convention="mean inter-token latency at an achieved request rate", assumptions=(*assumptions, note),
    )  # fmt: skip


def load_infer_cases(directory: Path | str | None = None) -> tuple[list[InferCase], list[Skipped]]:
    """Every row of ``infer_measured.csv`` as an ``InferCase`` (throughput and latency) or a ``Skipped``."""
    cases, skipped = [], []
    for line, row in _rows(directory, "infer_measured.csv"):
        try:
            cases.append(_infer_case(line, row))
        except _Skip as exc:
            group = _infer_group(row)
            skipped.append(Skipped("infer_measured.csv", line, group, str(exc)))
    return cases, skipped


# ---- memory rows ---------------------------------------------------------------------------------------------------


def load_memory_cases(directory: Path | str | None = None) -> tuple[list[MemoryCase], list[FormulaRow], list[Skipped]]:
    """Measured rows of ``memory_measured.csv`` as ``MemoryCase`` (layout taken from the matching training row),
    the closed-form rows as exact ``FormulaRow`` checks, and the rest as ``Skipped``."""
    train, _ = load_train_cases(directory)
    notes = {line: row["notes"] for line, row in _rows(directory, "train_measured.csv")}
    cases, formulas, skipped = [], [], []
    for line, row in _rows(directory, "memory_measured.csv"):
        kind = row["measured_or_formula"]
        if kind.startswith("measured"):
            try:
                cases.append(_memory_case(line, row, train, notes))
            except _Skip as exc:
                skipped.append(Skipped("memory_measured.csv", line, row["table"], str(exc)))
        else:
            try:
                formulas.extend(_formula_rows(line, row))
            except _Skip as exc:
                skipped.append(Skipped("memory_measured.csv", line, row["table"], str(exc)))
    return cases, formulas, skipped


def _memory_case(line: int, row: dict[str, str], train: list[TrainCase], notes: dict[int, str]) -> MemoryCase:
    """The layout comes from the training row of the same run: same GPU count and the same memory figure in its
    notes (``train_measured.csv`` repeats each run's memory there)."""
    method = row["method(zero stage/fsdp/recompute)"]
    val = row["memory_gb_per_gpu"].strip()
    rx = re.compile(rf"memory {re.escape(val)} Gi?B")
    match = next((c for c in train if c.layout.gpus == _int(row["num_gpus"]) and rx.search(notes[c.line])), None)
    if match is None:
        raise _Skip(f"no training row of the same run found for {method!r}")
    if "GiB" in row["notes"]:
        unit_note = "GiB as reported"
    else:
        unit_note = "reported as 'GB' by a torchtitan run, whose memory monitor prints GiB: read as GiB"
    return MemoryCase(
        source="memory_measured.csv", line=line, group=row["table"], label=f"{match.label} [{method}]",
        spec=match.spec, layout=match.layout, seq_len=match.seq_len, precision=match.precision,
        measured_gb=float(val) * GIB / GB, unit_note=unit_note, assumptions=match.assumptions,
    )  # fmt: skip


def _formula_rows(line: int, row: dict[str, str]) -> list[FormulaRow]:
    """Closed-form published figures checked against the model's own formulas."""
    src = row["source"]
    method = row["method(zero stage/fsdp/recompute)"]
    if src.startswith("Rajbhandari"):
        # ZeRO Figure 1: Psi = 7.5B, Nd = 64, K = 12; model states per device in GB
        psi, nd = 7.5e9, 64
        spec = _gpt_spec("zero-example", 32, 4096, 32, 16384, 50304, 0)
        total = count_params(spec).total
        stage = 0 if "baseline" in method else int(re.search(r"stage (\d)", method).group(1))
        from scaleright.estimate.memory import model_state_bytes

        w, g, o = model_state_bytes(spec, dp=nd, zero=stage)
        per_param = float(w + g + o) / total
        return [FormulaRow("memory_measured.csv", line, f"ZeRO {method}, 7.5B params, Nd=64",
                           float(row["memory_gb_per_gpu"]), per_param * psi / GB, "GB",
                           "model_state_bytes per parameter x 7.5e9")]  # fmt: skip
    if src.startswith("Korthikanti") and row["table"].startswith("Table 2"):
        # bytes per layer for a GPT layer with dropout and without flash attention, at a generic shape
        s, b, h, a, t = 2048, 1, 12288, 96, 8
        spec = _gpt_spec("gpt-generic", 96, h, a, 4 * h, 51200, 0).replace(dropout=True)
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
        from scaleright.estimate.memory import activation_bytes_per_layer

        pred = float(activation_bytes_per_layer(spec, seq_len=s, micro_batch=b, flash_attention=False, **kw))
        return [FormulaRow("memory_measured.csv", line, f"Korthikanti Table 2: {method} (s={s}, h={h}, a={a}, t={tt})",
                           published / 1e6, pred / 1e6, "MB per layer", row["notes"].split(";")[0])]  # fmt: skip
    if src.startswith("bigscience") and "Checkpoint" in row["table"]:
        spec = _gpt_spec("bloom-176b", 70, 14336, 112, 4 * 14336, 250880, 0)
        pred = count_params(spec).total * 2 / GIB
        return [FormulaRow("memory_measured.csv", line, "BLOOM-176B bf16 weights, whole model (README: 328.34 'GB')",
                           328.34, pred, "GiB",
                           "count_params x 2 B; the README's GB are GiB (176.2e9 x 2 / 2^30)")]  # fmt: skip
    raise _Skip("formula not modelled: " + (row["notes"].split(";")[0] if row["notes"] else method))


# ---- predictions ---------------------------------------------------------------------------------------------------


def source_flops_per_token(case: TrainCase) -> float:
    """FLOPs per token of the source's convention for ``case`` (model or hardware, causal or not, 2/3 for LoRA)."""
    if case.metric == "tokens_per_s_per_gpu":
        raise InputError(f"{case.group} reports tokens/s, not FLOPs")
    rc = case.layout.recompute if case.metric == "hardware_tflops_per_gpu" else "none"
    model, hw = train_flops_per_token(case.spec, case.seq_len, recompute=rc, causal=case.causal)
    f = float(hw if case.metric == "hardware_tflops_per_gpu" else model)
    return f * (2 / 3 if case.task in ("lora", "qlora") else 1.0)


def implied_flops_per_token(case: TrainCase) -> float | None:
    """The source's own FLOPs per token (its TFLOP/s over its tokens/s), when the row gives both."""
    if case.metric == "tokens_per_s_per_gpu" or not case.measured_tokens_per_s_per_gpu:
        return None
    return case.measured * 1e12 / case.measured_tokens_per_s_per_gpu


def _NO_TP_OVERLAP(case: TrainCase) -> bool:  # noqa: N802
    """Frameworks that predate TP-communication overlap: Megatron-DeepSpeed as used for BLOOM (2022) and the 2021
    Megatron-LM GPT-3 run; Megatron-Core (2023+, ``--tp-comm-overlap``), NeMo and Megatron-Bridge overlap."""
    return case.group.startswith(("BLOOM", "Megatron-LM GPT-3"))


def predict_train(case: TrainCase, cal: Calibration = DEFAULT_CALIBRATION, *,
                  flops_per_token: float | None = None) -> dict[str, float]:  # fmt: skip
    """The model's step breakdown for ``case`` plus ``predicted``: the value in the case's metric and convention.

    ``flops_per_token`` may pass a precomputed ``source_flops_per_token(case)`` (it does not depend on ``cal``)."""
    lay = case.layout
    perf = train_step_arrays(
        case.spec, gpu=case.gpu, cluster=case.cluster, seq_len=case.seq_len, global_batch=lay.global_batch,
        tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp, ep=lay.ep, zero=lay.zero, micro_batch=lay.micro_batch,
        recompute=lay.recompute, sequence_parallel=lay.sequence_parallel, virtual_stages=lay.virtual_stages,
        precision=case.precision, task=case.task, lora=LoraConfig() if case.task == "lora" else None, cal=cal,
        causal=True, tp_comm_overlap=not _NO_TP_OVERLAP(case),
    )  # fmt: skip
    out = {k: float(v) for k, v in perf.items()}
    tok = out["tokens_per_s_per_gpu"]
    if case.metric == "tokens_per_s_per_gpu":
        out["predicted"] = tok
    else:
        out["predicted"] = tok * (flops_per_token or source_flops_per_token(case)) / 1e12
    return out


def _max_batch(spec: TransformerSpec, gpu: Accelerator, context: int, tp: int, pp: int, precision: str,
               kv_precision: str) -> int:  # fmt: skip
    """KV-cache capacity in sequences per replica (no calibration in it, so cached across fits)."""
    return _max_batch_cached(spec, gpu.id, context, tp, pp, precision, kv_precision)


@functools.cache
def _max_batch_cached(spec, gpu_id, context, tp, pp, precision, kv_precision) -> int:
    return max_batch(spec, gpu=get_gpu(gpu_id), context=context, tp=tp, pp=pp, precision=precision,
                     kv_precision=kv_precision)  # fmt: skip


def predict_infer(case: InferCase, cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, float]:
    """The model's prediction for ``case`` (what ``estimate_infer(..., tp=case.tp)`` computes, with the KV-cache
    capacity cached across calibrations) plus ``predicted`` in the case's metric."""
    replicas = case.gpus // (case.tp * case.pp)
    mb = _max_batch(case.spec, case.gpu, case.input_len + case.output_len, case.tp, case.pp, case.precision,
                    case.kv_precision)  # fmt: skip
    per_replica = mb if case.batch == "max" else max(math.ceil(int(case.batch) / replicas), 1)
    out = {"max_batch": float(mb), "batch_per_replica": float(per_replica), "fits": float(mb >= 1)}
    if mb < 1:
        out["predicted"] = float("nan")
        return out
    perf = infer_arrays(case.spec, gpu=case.gpu, cluster=case.cluster, tp=case.tp, pp=case.pp, batch=per_replica,
                        input_len=case.input_len, output_len=case.output_len, precision=case.precision,
                        kv_precision=case.kv_precision, cal=cal)  # fmt: skip
    out.update({k: float(v) for k, v in perf.items()})
    out["output_tokens_per_s"] *= replicas
    out["predicted"] = out[case.metric]
    return out


def predict_memory(case: MemoryCase) -> float:
    """Predicted peak memory per GPU (GB) for ``case``."""
    return training_memory(case.spec, layout=case.layout, seq_len=case.seq_len, precision=case.precision).total_gb
