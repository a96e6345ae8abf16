"""Measured inference rows (``infer_measured.csv``) as model inputs: one ``InferCase`` per row, or a ``Skipped``.

Conventions (reference README, "Read before comparing numbers"):
- TensorRT-LLM throughput tables: output tokens/s of the whole system at maximum load, compared with
  ``estimate_infer(batch="max", tp=row tp, max_batch_size=2048, max_num_tokens=8192)``: each replica runs the
  largest batch that fits its KV cache and that the engine's scheduler admits. The rows do not state the engine's
  ``max_batch_size`` / ``max_num_tokens``; we assume TensorRT-LLM's defaults, 2048 sequences and 8192 tokens per
  iteration (TensorRT-LLM docs, "Tuning Max Batch Size and Max Num Tokens" and the LLM API / ``BuildConfig``
  reference: ``max_batch_size=2048``, ``max_num_tokens=8192``), which ``trtllm-bench`` uses unless told otherwise
  (``estimate.infer.scheduler_batch_cap``). Quantised checkpoints (FP8, NVFP4) are assumed to run an FP8 KV
  cache (trtllm-bench ``--quantization FP8`` / ModelOpt recipes); 16-bit rows a 16-bit one.
- TensorRT-LLM online serving: mean inter-token latency at an achieved request rate. We compare TPOT at the
  concurrency Little's law gives, rate × measured end-to-end latency (TTFT + (O − 1)·ITL), capped at the KV-cache
  capacity; the rate is the row's output throughput / O. QPS=INF rows are skipped: their concurrency is the
  server's unstated batch limit, not a Little's-law figure. These rows are reported separately and are not part
  of the throughput median.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

from scaleright.catalog import get_gpu
from scaleright.catalog.gpus import Accelerator
from scaleright.estimate.comm import Cluster
from scaleright.estimate.infer import max_batch
from scaleright.workload import TransformerSpec
from validation.files import Skipped, SkipRow, cell_float, cell_int, read_rows
from validation.hardware import map_gpu
from validation.models import MODEL_MAP, catalog_spec, model_key

__all__ = ["INFER_METRICS", "InferCase", "TRTLLM_MAX_BATCH_SIZE", "TRTLLM_MAX_NUM_TOKENS", "kv_capacity",
           "load_infer_cases"]

INFER_METRICS = ("output_tokens_per_s", "tpot_s")
# TensorRT-LLM's scheduler defaults (docs: "Tuning Max Batch Size and Max Num Tokens"; LLM API BuildConfig /
# TorchLlmArgs): at most 2048 sequences in flight and 8192 tokens (prefill + decode) per iteration
TRTLLM_MAX_BATCH_SIZE = 2048
TRTLLM_MAX_NUM_TOKENS = 8192


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
    # the engine scheduler's caps on a "max" batch (``estimate.infer.scheduler_batch_cap``); None: no cap
    max_batch_size: int | None = None
    max_num_tokens: int | None = None


_INFER_PRECISION = {"FP8": "fp8", "FP4": "fp4", "FP16": "fp16", "BF16": "bf16"}


def _infer_group(row: dict[str, str]) -> str:
    if row["table"].startswith("Online"):
        return "TensorRT-LLM online serving (TPOT)"
    if "v0.17" in row["table"]:
        return "TensorRT-LLM v0.17 throughput"
    # the PCIe server's rows apart (benchmarks/accuracy.py NOT_FITTED): 89 of its 109 mapped rows run TP or PP over PCIe
    return "TensorRT-LLM v1.0 RTX PRO 6000 (PCIe)" if "RTX PRO" in row["gpu"] else "TensorRT-LLM v1.0 throughput"


def _infer_case(line: int, row: dict[str, str]) -> InferCase:
    online = row["table"].startswith("Online")
    group = _infer_group(row)
    key = model_key(row["model"])
    if key not in MODEL_MAP:
        raise SkipRow(f"model not mapped: {row['model']!r}")
    if MODEL_MAP[key] is None:
        raise SkipRow("model not in catalog and row gives no shape")
    spec = catalog_spec(MODEL_MAP[key])
    gpu, cluster, assumptions = map_gpu(row["gpu"])
    precision = _INFER_PRECISION.get(row["precision"].strip())
    if precision is None:
        raise SkipRow(f"precision not mapped: {row['precision']!r}")
    kv = "fp8" if precision in ("fp8", "fp4") else precision
    tp, pp, n = cell_int(row["tp"]), cell_int(row["pp"]), cell_int(row["num_gpus"])
    if tp * pp != n:
        raise SkipRow(f"tp({tp}) * pp({pp}) != num_gpus({n})")
    i_len, o_len = cell_int(row["input_len"]), cell_int(row["output_len"])
    measured_tps = cell_float(row["throughput_tokens_per_s"])
    label = f"{spec.name} {n}x{gpu.id} tp{tp} pp{pp} {precision} {i_len}/{o_len}"
    if not online:
        return InferCase(
            source="infer_measured.csv", line=line, group=group, label=label, spec=spec, gpu=gpu, cluster=cluster,
            gpus=n, tp=tp, pp=pp, input_len=i_len, output_len=o_len, precision=precision, kv_precision=kv,
            batch="max", metric="output_tokens_per_s", measured=measured_tps,
            convention="output tokens/s, whole system, maximum load",
            assumptions=(*assumptions, f"engine caps assumed (TensorRT-LLM defaults): max_batch_size "
                         f"{TRTLLM_MAX_BATCH_SIZE}, max_num_tokens {TRTLLM_MAX_NUM_TOKENS}"),
            max_batch_size=TRTLLM_MAX_BATCH_SIZE, max_num_tokens=TRTLLM_MAX_NUM_TOKENS,
        )  # fmt: skip
    if "QPS=INF" in row["batch_or_concurrency"]:
        raise SkipRow("QPS=INF: concurrency set by the server's unstated max batch size (queue unbounded)")
    ttft, itl = cell_float(row["ttft_ms"]), cell_float(row["tpot_ms"])
    if None in (ttft, itl, measured_tps):
        raise SkipRow("online row without TTFT, ITL or throughput")
    rate = measured_tps / o_len  # requests/s, from the output throughput (finer than the rounded 'achieved' figure)
    e2e = (ttft + (o_len - 1) * itl) / 1e3
    conc = max(round(rate * e2e), 1)
    cap = kv_capacity(spec, gpu, i_len + o_len, tp, pp, precision, kv)
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
    for line, row in read_rows("infer_measured.csv", directory):
        try:
            cases.append(_infer_case(line, row))
        except SkipRow as exc:
            group = _infer_group(row)
            skipped.append(Skipped("infer_measured.csv", line, group, str(exc)))
    return cases, skipped


def kv_capacity(spec: TransformerSpec, gpu: Accelerator, context: int, tp: int, pp: int, precision: str,
                kv_precision: str) -> int:  # fmt: skip
    """KV-cache capacity in sequences per replica (no calibration in it, so cached across fits)."""
    return _kv_capacity_cached(spec, gpu.id, context, tp, pp, precision, kv_precision)


@functools.cache
def _kv_capacity_cached(spec, gpu_id, context, tp, pp, precision, kv_precision) -> int:
    return max_batch(spec, gpu=get_gpu(gpu_id), context=context, tp=tp, pp=pp, precision=precision,
                     kv_precision=kv_precision)  # fmt: skip
