"""Score ``scaleright serve simulate`` against measured serving rows, per source; the last line is machine-readable.

In-sample: the engine profiles in ``scaleright.estimate.engines`` were fitted on these same rows, so these figures
check the fit, not its generalisation (no leave-one-source-out pass yet: each engine has one source).

Sources (``validation/reference``):
- ``infer_measured.csv`` 'Online Serving Measurements' (TensorRT-LLM 0.14 + Triton, 500 requests per row): each row
  simulated at its target QPS (Poisson; QPS=INF as 10**4 requests/s) with the ``trtllm`` engine, 500 requests;
  compared: mean TTFT, mean ITL (the row's tpot column) and output tokens/s.
- ``components/serving_engine.csv``:
  vLLM (ROCm) ``benchmark_latency`` rows: B requests at once (closed loop, B clients, B requests), mean end-to-end
  latency; llama.cpp ``tg128`` (single stream, 128 tokens, no prompt: TPOT) and ``pp512`` (one 512-token prompt:
  512 / TTFT tokens/s); TensorRT-LLM Azure tables: B clients, 4·B requests of 128 in / 8 out, input + output tokens/s
  (reported, but not in the overall median: the tables sit an order of magnitude below the physical bounds).
  Rows without stated lengths (DBRX), token kinds not stated (offline tables), micro-batch sweeps and engines
  without a profile (MLC LLM, ExLlama) are skipped with the reason.
Errors are ``predicted / measured − 1``; a group's score is the median of |error| over its rows.

    python benchmarks/serve_accuracy.py [--rows] [--max-error 0.25]

Exits 1 when the overall median |error| exceeds ``--max-error`` (a validation that fails, not one that prints).
"""

from __future__ import annotations

import argparse
import csv
import re
import statistics
import sys
from pathlib import Path

# the repository root (validation/) and src/ first on sys.path, in that order
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from scaleright.catalog import get_gpu
from scaleright.errors import ScalerightError
from scaleright.serve import simulate
from validation.files import SkipRow
from validation.hardware import map_gpu
from validation.models import MODEL_MAP, catalog_spec, model_key

ROOT = Path(__file__).resolve().parents[1]
REF = ROOT / "validation" / "reference"

_GPU = {  # serving_engine.csv GPU strings -> catalog ids
    "AMD Instinct MI300X (OCI BM.GPU.MI300X.8)": "mi300x", "AMD Instinct MI300X 192GB 750W": "mi300x",
    "AMD Instinct MI300X (Azure ND MI300X v5)": "mi300x", "NVIDIA A100-SXM4-80GB (Azure ND A100 v4)": "a100-80gb",
    "NVIDIA H100 80GB HBM3 (Azure ND H100 v5)": "h100-sxm", "NVIDIA H200 141GB (Azure ND H200 v5)": "h200-sxm",
    "NVIDIA GeForce RTX 4090": "rtx-4090", "NVIDIA GeForce RTX 3090": "rtx-3090",
}  # fmt: skip
_PREC = {"FP8": "fp8", "FP16": "fp16", "F16": "fp16", "BF16": "bf16", "Q8_0": "int8", "Q4_0": "int4"}
_MODEL = {"llama 7b (codellama-7b)": "llama-2-7b", "llama 7b": "llama-2-7b", "llama 8b": "llama-3.1-8b"}


def _spec(model: str):
    k = model_key(model.split(" (")[0])
    if model.lower() in _MODEL:
        return catalog_spec(_MODEL[model.lower()])
    if MODEL_MAP.get(k):
        return catalog_spec(MODEL_MAP[k])
    raise SkipRow(f"model not mapped: {model!r}")


def online_rows():
    """(group, label, metric, predicted, measured) for the TensorRT-LLM online serving table."""
    out, skipped = [], []
    with open(REF / "infer_measured.csv", newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["table"].startswith("Online")]
    for r in rows:
        try:
            spec = catalog_spec(MODEL_MAP[model_key(r["model"])])
            gpu, cluster, _ = map_gpu(r["gpu"])
        except (SkipRow, KeyError) as exc:
            skipped.append((r["model"], str(exc)))
            continue
        qps = re.search(r"QPS=(\w+)", r["batch_or_concurrency"]).group(1)
        rate = 1e4 if qps == "INF" else float(qps)
        tp, n = int(r["tp"]), int(r["num_gpus"])
        prec = _PREC[r["precision"]]
        res = simulate(spec, gpu=gpu, cluster=cluster, gpus=n, tp=tp, input_len=int(r["input_len"]),
                       output_len=int(r["output_len"]), rate=rate, requests=500, engine="trtllm",
                       precision=prec)  # fmt: skip
        label = f"{spec.name} {n}x{gpu.id} {r['input_len']}/{r['output_len']} QPS={qps}"
        out.append(("online_ttft", label, "mean TTFT ms", res.ttft_ms["mean"], float(r["ttft_ms"])))
        out.append(("online_itl", label, "mean ITL ms", res.itl_ms["mean"], float(r["tpot_ms"])))
        out.append(("online_throughput", label, "output tok/s", res.output_tokens_per_s,
                    float(r["throughput_tokens_per_s"])))  # fmt: skip
    return out, skipped


def engine_rows():
    out, skipped = [], []
    with open(REF / "components" / "serving_engine.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        eng, metric, batch = r["engine"], r["metric"], r["batch_or_concurrency"]
        try:
            if r["gpu"] not in _GPU:
                raise SkipRow(f"GPU not mapped: {r['gpu']!r}")
            gpu = get_gpu(_GPU[r["gpu"]])
            spec = _spec(r["model"])
            prec = next((v for k, v in _PREC.items() if r["precision"].startswith(k)), "bf16")
            n = int(r["num_gpus_count"] or 1)
            tp = int(r["tensor_parallel_degree"] or 1)
            kvp = "fp8" if "FP8-KV" in r["model"] else None
            value = float(r["value_in_unit_column"])
            if eng.startswith("vLLM (ROCm)") and "end-to-end latency" in metric:
                b = int(batch.split()[1])
                res = simulate(spec, gpu=gpu, gpus=n, tp=tp, input_len=int(r["input_len_tokens"]),
                               output_len=int(r["output_len_tokens"]), concurrency=b, requests=b, engine="vllm",
                               precision=prec, kv_precision=kvp)  # fmt: skip
                out.append(("vllm_e2e", f"{spec.name} {n}x{gpu.id} batch {b}", "mean e2e s", res.e2e_ms["mean"] / 1e3,
                            value))  # fmt: skip
            elif eng == "llama.cpp (CUDA backend)" and "tg 128" in metric:
                res = simulate(spec, gpu=gpu, input_len=1, output_len=128, concurrency=1, requests=1,
                               engine="llama.cpp", precision=prec)  # fmt: skip
                out.append(("llamacpp", f"{spec.name} {gpu.id} {r['precision']} tg128", "ms/token",
                            res.tpot_ms["mean"], 1000 / value))  # fmt: skip
            elif eng == "llama.cpp (CUDA backend)" and "pp 512" in metric:
                res = simulate(spec, gpu=gpu, input_len=512, output_len=1, concurrency=1, requests=1,
                               engine="llama.cpp", precision=prec)  # fmt: skip
                out.append(("llamacpp", f"{spec.name} {gpu.id} {r['precision']} pp512", "tok/s",
                            512 / (res.ttft_ms["mean"] / 1e3), value))  # fmt: skip
            elif eng == "TensorRT-LLM" and metric.startswith("throughput (input+output"):
                b = int(batch.split()[1])
                i, o = int(r["input_len_tokens"]), int(r["output_len_tokens"])
                res = simulate(spec, gpu=gpu, gpus=n, tp=tp, input_len=i, output_len=o, concurrency=b,
                               requests=4 * b, engine="trtllm", precision=prec)  # fmt: skip
                out.append(("trtllm_azure", f"{spec.name} {n}x{gpu.id} batch {b}", "in+out tok/s",
                            res.output_tokens_per_s + res.input_tokens_per_s, value))  # fmt: skip
            else:
                raise SkipRow(f"not scored: {eng} / {metric} / {batch}")
        except SkipRow as exc:
            skipped.append((r["model"], str(exc)))
        except ScalerightError as exc:
            skipped.append((r["model"], f"model error: {exc}"))
    return out, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", action="store_true", help="print every scored row")
    ap.add_argument("--max-error", type=float, default=0.25, help="fail above this overall median |error|")
    args = ap.parse_args(argv)
    a, sa = online_rows()
    b, sb = engine_rows()
    rows = a + b
    groups: dict[str, list[float]] = {}
    for g, label, metric, pred, meas in rows:
        err = pred / meas - 1
        groups.setdefault(g, []).append(abs(err))
        if args.rows:
            print(f"{g:18s} {label:48s} {metric:14s} predicted {pred:10.4g} measured {meas:10.4g} error {err:+.1%}")
    print(f"scored {len(rows)} rows, skipped {len(sa) + len(sb)}")
    for g, errs in groups.items():
        print(f"{g:18s} rows {len(errs):3d}  in-sample median |error| {statistics.median(errs):.1%}  "
              f"max {max(errs):.1%}")
    # The Azure TensorRT-LLM tables sit 10-15x below what any bandwidth or compute bound allows for their shapes
    # (e.g. 7B on one A100 at batch 64: 859 tokens/s): their tokens/s is not a whole-system throughput in the sense
    # simulated here. Reported, kept out of the overall median.
    overall = statistics.median([e for g, errs in groups.items() if g != "trtllm_azure" for e in errs])
    print("serve_accuracy in_sample " + " ".join(f"{g}={statistics.median(e):.3f}" for g, e in groups.items())
          + f" overall={overall:.3f}")  # fmt: skip
    if overall > args.max_error:
        print(f"FAIL: overall median |error| {overall:.1%} > {args.max_error:.0%}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
