"""Side-by-side accuracy: scaleright against llm-analysis (PyPI ``llm-analysis`` 0.2.2) on the same measured rows.

Training throughput: every row of ``validation/reference/train_measured.csv`` that the ``validation`` package maps
to a ``TrainCase`` and that llm-analysis can represent is predicted by both tools; the error of a row is
predicted / measured − 1 in the row's own metric and convention (model TFLOP/s per GPU, causal or non-causal
attention as the source counts it; hardware TFLOP/s for BLOOM and Megatron-LM 2021; tokens/s per GPU). llm-analysis
gives a latency per iteration; it becomes tokens/s per GPU (global batch × seq_len / latency / GPUs) and, for the
TFLOP/s rows, is multiplied by ``ref.source_flops_per_token(case)`` — the same FLOP convention scaleright's
prediction is expressed in, so neither tool's own FLOP count enters the comparison.
Peak memory: the measured rows of ``memory_measured.csv`` (``ref.load_memory_cases``) against llm-analysis's
``(weight+op_state+grad+act)_memory_per_gpu``.

Both tools run out of the box. llm-analysis gets its defaults: ``flops_efficiency`` 1 (its constant
``FLOPS_EFFICIENCY``), HBM / intra-node / inter-node efficiency 1; scaleright its default calibration. Nothing is
tuned for this comparison.

Mapping into llm-analysis ``train()`` (one call per row, all rows in one batch):
- model: ``ModelConfig(num_layers, n_head, hidden_dim, vocab_size, num_key_value_heads, ffn_embed_dim,
  max_seq_len=seq_len)``; ``mlp_gated_linear_units`` for SwiGLU models; ``flash_attn=True``.
- GPU: llm-analysis's own config where it has the part (a100-sxm-40gb, a100-sxm-80gb, h100-sxm-80gb), otherwise a
  ``GPUConfig`` built from scaleright's catalog entry (memory, HBM and NVLink bandwidth, dense BF16 / INT8 peaks).
- layout: tp, pp, dp, ``ds_zero`` = ZeRO stage (FSDP full shard = 3), ``batch_size_per_gpu`` = micro-batch,
  ``global_batch_size`` (llm-analysis derives the accumulation steps), ``sp_size`` = tp with Megatron sequence
  parallelism else 1, ``activation_recomputation`` none/selective/full = 0/1/2.
- skipped (counted, with the reason): FP8/FP4 rows (llm-analysis has no FP8 training path; its 8-bit dtype configs
  are integer-quantised weights/activations), context parallelism, LoRA, MoE, MLA, tp > 8 (its ``train`` asserts
  tp ≤ GPUs per node), and any row on which llm-analysis raises.

    python benchmarks/vs_llm_analysis.py                                          # llm-analysis importable here
    python benchmarks/vs_llm_analysis.py --llm-analysis-python /tmp/llmavenv/bin/python   # or in another venv
    python benchmarks/vs_llm_analysis.py --rows                                   # also print every row

llm-analysis is not a dependency of scaleright: it is imported here only when the current interpreter has it,
otherwise ``_llm_analysis_runner.py`` runs in the given interpreter (JSON in, JSON out). The last line is
``rows=<n> scaleright_median_pct=<x> llm_analysis_median_pct=<y>`` over the training-throughput rows.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

# The repository root on sys.path, so that `python3 benchmarks/<this>.py` imports the validation/ package (the
# reference data and its mapping to model inputs; not part of the installed wheel).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import validation as ref

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "_llm_analysis_runner.py"
INSTALL_HINT = (
    "llm-analysis not found: install it in a separate venv (python -m venv /tmp/llmavenv && "
    "/tmp/llmavenv/bin/pip install llm-analysis) and pass --llm-analysis-python /tmp/llmavenv/bin/python"
)

# scaleright catalog id -> llm-analysis's own GPU config (same part)
LA_GPU = {"a100-40gb": "a100-sxm-40gb", "a100-80gb": "a100-sxm-80gb", "h100-sxm": "h100-sxm-80gb"}
# llm-analysis has no per-op policy: torchtitan's op-selective rows run as its (Korthikanti) selective
RECOMPUTE = {"none": 0, "selective": 1, "full": 2, "op-selective": 1}
LA_MEMORY_KEY = "(weight+op_state+grad+act)_memory_per_gpu"
METRIC_UNIT = {"tokens_per_s_per_gpu": "tok/s/GPU", "model_tflops_per_gpu": "model TF/s",
               "hardware_tflops_per_gpu": "hw TF/s"}


# ---- mapping -------------------------------------------------------------------------------------------------------


def _unrepresentable(spec, layout, precision: str, task: str = "pretrain") -> str | None:
    """Why llm-analysis cannot represent this row, or None."""
    if precision not in ("bf16", "fp16"):
        return f"{precision} precision (llm-analysis has no FP8/FP4 training path)"
    if spec.is_moe:
        return "MoE model (dense models only in this comparison)"
    if spec.mla:
        return "MLA attention (not modelled by llm-analysis)"
    if task in ("lora", "qlora"):
        return "LoRA (not modelled by llm-analysis)"
    if layout.cp > 1:
        return "context parallelism (not modelled by llm-analysis)"
    if layout.tp > 8:
        return "tp > 8 (llm-analysis train() asserts tp <= GPUs per node)"
    if spec.heads * spec.head_dim != spec.hidden:
        return "heads x head_dim != hidden (llm-analysis derives head_dim = hidden / heads)"
    return None


def _gpu_config(gpu) -> dict:
    if gpu.id in LA_GPU:
        return {"name": LA_GPU[gpu.id]}
    peak = gpu.dense_tflops.get("bf16") or gpu.dense_tflops.get("fp16")
    cfg = {
        "name": gpu.id,
        "mem_per_GPU_in_GB": gpu.memory_gb * 1e9 / 2**30,  # llm-analysis multiplies by 1024**3
        "hbm_bandwidth_in_GB_per_sec": gpu.hbm_bandwidth_tb_per_s * 1e3,
        "intra_node_bandwidth_in_GB_per_sec": gpu.intra_node_gb_per_s_per_gpu,
        "intra_node_min_message_latency": 8e-06,  # the value of every llm-analysis GPU config
        "peak_fp16_TFLOPS": peak,
        # llm-analysis's own configs put the NIC's Gb/s figure here (h100: 400); unused by train()
        "inter_node_bandwidth_in_GB_per_sec": gpu.nic_gbps_per_gpu,
    }
    if gpu.dense_tflops.get("int8"):
        cfg["peak_i8_TFLOPS"] = gpu.dense_tflops["int8"]
    return cfg


def _job(jid: int, spec, gpu, layout, seq_len: int, precision: str) -> dict:
    model = {
        "num_layers": spec.layers, "n_head": spec.heads, "hidden_dim": spec.hidden, "vocab_size": spec.vocab,
        "max_seq_len": seq_len, "num_key_value_heads": spec.kv_heads, "ffn_embed_dim": spec.ffn_hidden,
        "expansion_ratio": spec.ffn_hidden / spec.hidden, "model_type": spec.family,
    }  # fmt: skip
    gb = layout.global_batch or layout.micro_batch * layout.dp
    train = {
        "batch_size_per_gpu": layout.micro_batch, "global_batch_size": gb, "seq_len": seq_len,
        "activation_recomputation": RECOMPUTE[layout.recompute], "ds_zero": layout.zero,
        "dp_size": layout.dp, "tp_size": layout.tp, "pp_size": layout.pp,
        "sp_size": layout.tp if layout.sequence_parallel else 1,
        "flash_attn": True, "mlp_gated_linear_units": bool(spec.gated_mlp),
    }  # fmt: skip
    return {"id": jid, "model": model, "gpu": _gpu_config(gpu), "dtype_name": "w16a16e16", "train": train}


# ---- running llm-analysis ------------------------------------------------------------------------------------------


def _la_here() -> bool:
    try:
        return importlib.util.find_spec("llm_analysis") is not None
    except (ImportError, ValueError):
        return False


def run_llm_analysis(jobs: list[dict], python: str | None) -> tuple[list[dict] | None, str]:
    """Results of all jobs (or None when llm-analysis is unavailable) and how it was run."""
    if _la_here():
        spec = importlib.util.spec_from_file_location("_llm_analysis_runner", RUNNER)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.run_jobs(jobs), f"in-process ({sys.executable})"
    if not python:
        return None, "not importable here and no --llm-analysis-python given"
    try:
        chk = subprocess.run([python, "-c", "import llm_analysis"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{python}: {exc}"
    if chk.returncode != 0:
        return None, f"{python} cannot import llm_analysis"
    proc = subprocess.run([python, str(RUNNER)], input=json.dumps(jobs), capture_output=True, text=True,
                          timeout=600)  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"llm-analysis runner failed ({proc.returncode}):\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout), f"subprocess ({python})"


# ---- report --------------------------------------------------------------------------------------------------------


def _stats(errs) -> tuple[float, float, float]:
    e = np.asarray(errs, dtype=float)
    a = np.abs(e)
    return 100 * float(np.median(a)), 100 * float(np.percentile(a, 90)), 100 * float(np.median(e))


def _table(title: str, rows: list[dict], unit_of: dict[str, str]) -> None:
    print(f"\n{title}")
    print(f"  {'table':44s} {'metric':13s} {'rows':>4s}   {'scaleright p50 / p90 (bias)':>28s}   "
          f"{'llm-analysis p50 / p90 (bias)':>30s}")  # fmt: skip
    groups = defaultdict(list)
    for r in rows:
        groups[r["group"]].append(r)
    for g in sorted(groups):
        rs = groups[g]
        s = _stats([r["sr_err"] for r in rs])
        la = _stats([r["la_err"] for r in rs])
        print(f"  {g[:44]:44s} {unit_of[g]:13s} {len(rs):4d}   {s[0]:6.1f}% / {s[1]:6.1f}% ({s[2]:+7.1f}%)   "
              f"{la[0]:7.1f}% / {la[1]:7.1f}% ({la[2]:+7.1f}%)")  # fmt: skip
    if rows:
        s = _stats([r["sr_err"] for r in rows])
        la = _stats([r["la_err"] for r in rows])
        print(f"  {'OVERALL (all rows above)':44s} {'':13s} {len(rows):4d}   {s[0]:6.1f}% / {s[1]:6.1f}% "
              f"({s[2]:+7.1f}%)   {la[0]:7.1f}% / {la[1]:7.1f}% ({la[2]:+7.1f}%)")  # fmt: skip
        tm = float(np.median([np.median(np.abs([r["sr_err"] for r in groups[g]])) for g in groups]))
        tl = float(np.median([np.median(np.abs([r["la_err"] for r in groups[g]])) for g in groups]))
        print(f"  {'median of the per-table medians':44s} {'':13s} {len(groups):4d}t  {100 * tm:6.1f}%"
              f"{'':22s}{100 * tl:7.1f}%")  # fmt: skip


def _print_rows(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"  {'line':>4s} {'measured':>10s} {'scaleright':>10s} {'err':>7s} {'llm-anal.':>10s} {'err':>7s}  row")
    for r in sorted(rows, key=lambda r: (r["group"], r["line"])):
        print(f"  {r['line']:4d} {r['measured']:10.1f} {r['sr']:10.1f} {100 * r['sr_err']:+6.1f}% {r['la']:10.1f} "
              f"{100 * r['la_err']:+6.1f}%  {r['label'][:100]}")  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--llm-analysis-python", default=os.environ.get("LLM_ANALYSIS_PYTHON"),
                    help="interpreter of a venv with llm-analysis, used when it is not importable here "
                         "(default: $LLM_ANALYSIS_PYTHON)")  # fmt: skip
    ap.add_argument("--rows", action="store_true", help="also print every compared row")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()

    skipped: Counter = Counter()
    train_cases, train_skipped = ref.load_train_cases()
    for s in train_skipped:
        skipped[("train", f"not mapped by scaleright: {s.reason}")] += 1
    mem_cases, _formulas, mem_skipped = ref.load_memory_cases()
    for s in mem_skipped:
        if s.reason.startswith("no training row"):  # measured rows only; formula rows are not measurements
            skipped[("memory", f"not mapped by scaleright: {s.reason}")] += 1

    jobs, train_items, mem_items = [], [], []
    for c in train_cases:
        why = _unrepresentable(c.spec, c.layout, c.precision, c.task)
        if why:
            skipped[("train", why)] += 1
            continue
        train_items.append((len(jobs), c))
        jobs.append(_job(len(jobs), c.spec, c.gpu, c.layout, c.seq_len, c.precision))
    gpu_of_label = {c.label: c.gpu for c in train_cases}
    for c in mem_cases:
        why = _unrepresentable(c.spec, c.layout, c.precision)
        gpu = gpu_of_label.get(c.label.split(" [")[0])
        if why or gpu is None:
            skipped[("memory", why or "GPU of the run not found")] += 1
            continue
        mem_items.append((len(jobs), c))
        jobs.append(_job(len(jobs), c.spec, gpu, c.layout, c.seq_len, c.precision))

    t1 = time.perf_counter()
    results, how = run_llm_analysis(jobs, args.llm_analysis_python)
    if results is None:
        print(INSTALL_HINT + f" ({how})")
        return 0
    t_la = time.perf_counter() - t1
    by_id = {r["id"]: r for r in results}

    train_rows, unit_of = [], {}
    for jid, c in train_items:
        r = by_id[jid]
        if not r["ok"]:
            skipped[("train", f"llm-analysis raised {r['error'].split(':')[0]}")] += 1
            continue
        lay = c.layout
        gb = lay.global_batch or lay.micro_batch * lay.dp
        tok = gb * c.seq_len / r["summary"]["latency_per_iter"] / lay.gpus
        la = tok if c.metric == "tokens_per_s_per_gpu" else tok * ref.source_flops_per_token(c) / 1e12
        sr = ref.predict_train(c)["predicted"]
        unit_of[c.group] = METRIC_UNIT[c.metric] + ("" if c.metric == "tokens_per_s_per_gpu" else
                                                    " c" if c.causal else " nc")  # fmt: skip
        train_rows.append({"group": c.group, "line": c.line, "label": c.label, "measured": c.measured, "sr": sr,
                           "la": la, "sr_err": sr / c.measured - 1, "la_err": la / c.measured - 1})  # fmt: skip

    mem_rows = []
    for jid, c in mem_items:
        r = by_id[jid]
        if not r["ok"] or LA_MEMORY_KEY not in r["summary"]:
            skipped[("memory", f"llm-analysis raised {r.get('error', 'no memory').split(':')[0]}")] += 1
            continue
        la = r["summary"][LA_MEMORY_KEY] / 1e9
        sr = ref.predict_memory(c)
        unit_of[c.group] = "GB/GPU"
        mem_rows.append({"group": c.group, "line": c.line, "label": c.label, "measured": c.measured_gb, "sr": sr,
                         "la": la, "sr_err": sr / c.measured_gb - 1, "la_err": la / c.measured_gb - 1})  # fmt: skip

    print("scaleright vs llm-analysis 0.2.2 on the same measured rows; |error| = |predicted / measured - 1|")
    print("Both out of the box: llm-analysis with its defaults (flops_efficiency = 1, HBM / intra- / inter-node "
          "efficiency = 1), scaleright with its default calibration; nothing tuned.")  # fmt: skip
    print(f"llm-analysis ran {how}: {len(jobs)} train() calls in {t_la:.1f} s")
    print("metric: TF/s per GPU (nc: non-causal attention FLOPs, c: causal, as the source counts; both tools "
          "converted with ref.source_flops_per_token) or tokens/s per GPU; bias = median signed error")  # fmt: skip
    _table("Training throughput (train_measured.csv)", train_rows, unit_of)
    _table("Peak memory per GPU (memory_measured.csv, measured rows; llm-analysis: weight+op_state+grad+act)",
           mem_rows, unit_of)  # fmt: skip
    if args.rows:
        _print_rows("Training rows", train_rows)
        _print_rows("Memory rows (GB per GPU)", mem_rows)

    print("\nSkipped rows (counted by reason)")
    for (kind, why), n in sorted(skipped.items(), key=lambda kv: (kv[0][0] != "train", -kv[1], kv[0][1])):
        print(f"  {kind:6s} {n:4d}  {why}")
    print(f"  totals: training {sum(n for (k, _), n in skipped.items() if k == 'train')} skipped / "
          f"{len(train_rows)} compared; memory {sum(n for (k, _), n in skipped.items() if k == 'memory')} skipped / "
          f"{len(mem_rows)} compared")  # fmt: skip
    if mem_rows:
        s, la = _stats([r["sr_err"] for r in mem_rows]), _stats([r["la_err"] for r in mem_rows])
        print(f"memory rows={len(mem_rows)} scaleright_median_pct={s[0]:.1f} llm_analysis_median_pct={la[0]:.1f}")
    print(f"({time.perf_counter() - t0:.1f} s; the last line covers the training-throughput rows)")
    if train_rows:
        s, la = _stats([r["sr_err"] for r in train_rows]), _stats([r["la_err"] for r in train_rows])
        print(f"rows={len(train_rows)} scaleright_median_pct={s[0]:.1f} llm_analysis_median_pct={la[0]:.1f}")
    else:
        print("rows=0 scaleright_median_pct=nan llm_analysis_median_pct=nan")
    return 0


if __name__ == "__main__":
    sys.exit(main())
