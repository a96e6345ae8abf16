"""``run_infer_bench``: prefill and KV-cache decode throughput against batch size, in this process (imports torch).

Per batch size B: a random prompt of P tokens is prefilled in one forward pass (filling the KV cache,
``bench/model.py``), then G tokens are decoded greedily one at a time, each step attending to the cache. Each
repetition is bracketed by device synchronises; ``warmup`` untimed repetitions come first.
  prefill tokens/s = B * P / prefill time          (prefill time ~ time to first token)
  decode tokens/s  = B * G / decode time           (time per output token = decode time / G)
Medians over ``repeats`` repetitions, with p10/p90. Peak memory as in ``bench/memory.py``. Weights are random.
Each batch size is stored as one run of kind ``infer``. A ``KeyboardInterrupt`` raised out of the sweep carries
``.result``, the runs stored before it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from scaleright.bench._torch import require_torch
from scaleright.bench.config import InferBenchConfig
from scaleright.bench.db import RunStore
from scaleright.bench.fingerprint import hardware_info, software_info
from scaleright.bench.progress import Reporter
from scaleright.bench.stats import coefficient_of_variation, spread_warning, summarize
from scaleright.bench.validate import validated

__all__ = ["infer_warnings", "run_infer_bench"]


def run_infer_bench(config: InferBenchConfig | dict, *, store: RunStore | None = None,
                    on_run: Callable[[dict], None] | None = None, progress: Reporter | None = None) -> dict[str, Any]:
    """Run the sweep; returns ``{"sweep_id", "runs": [{"run_id", "batch_size", metrics...}], "warnings": [...]}``,
    ``warnings`` one line per batch size whose timed repetitions of prefill or decode disagree (coefficient of
    variation above ``SPREAD_CV_LIMIT``, ``bench/stats.py``). ``progress`` reports each batch size and repetition."""
    cfg = validated(InferBenchConfig, config, what="infer config")
    torch = require_torch()
    from scaleright.bench.model import GPT

    device = torch.device("cuda" if cfg.device == "cuda" or (cfg.device == "auto" and torch.cuda.is_available())
                          else "cpu")
    dtype = torch.bfloat16 if cfg.precision == "bf16" else torch.float32
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    torch.manual_seed(cfg.seed)
    model = GPT(cfg.model).to(device=device, dtype=dtype).eval()
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
    sweep_id = uuid.uuid4().hex[:12]
    runs: list[dict[str, Any]] = []
    try:
        _sweep(cfg, model, device, dtype, sync, name, sweep_id, runs, store, on_run, progress)
    except KeyboardInterrupt as exc:
        exc.result = {"sweep_id": sweep_id, "runs": runs}  # type: ignore[attr-defined]
        raise
    return {"sweep_id": sweep_id, "runs": runs, "warnings": infer_warnings(runs, repeats=cfg.repeats)}


def infer_warnings(runs: list[dict[str, Any]], *, repeats: int) -> list[str]:
    """One line per batch size and phase (prefill, decode) whose repetitions disagree."""
    out = []
    for r in runs:
        for phase in ("prefill", "decode"):
            w = spread_warning(r.get(f"{phase}_time_s_cv"), repeats, f"batch {r['batch_size']} {phase} time")
            if w is not None:
                out.append(w)
    return out


def _sweep(cfg: InferBenchConfig, model: Any, device: Any, dtype: Any, sync: Callable[[], None], name: str,
           sweep_id: str, runs: list[dict[str, Any]], store: RunStore | None,
           on_run: Callable[[dict], None] | None, progress: Reporter | None = None) -> None:
    """Measure every batch size, appending each finished run to ``runs``."""
    import torch

    from scaleright.bench.memory import PeakMemory
    from scaleright.bench.model import KVCache

    spec = cfg.model
    total = cfg.warmup + cfg.repeats
    for i, b in enumerate(cfg.batch_sizes):
        if progress is not None:
            progress.phase(f"batch {b} ({i + 1} of {len(cfg.batch_sizes)}), {cfg.warmup} warm-up + {cfg.repeats} "
                           f"timed repetitions of prefill {cfg.prompt_len} + decode {cfg.gen_len} tokens")  # fmt: skip
        mem = PeakMemory(device)
        mem.start()
        prefill, decode = [], []
        for rep in range(total):
            if progress is not None:  # between repetitions, outside the timed region
                progress.tick(f"repetition {rep + 1} of {total}{' (warm-up)' if rep < cfg.warmup else ''}")
            with torch.inference_mode():
                prompt = torch.randint(0, spec.vocab, (b, cfg.prompt_len), device=device)
                cache = KVCache(spec, b, device=device, dtype=dtype)
                sync()
                t0 = time.perf_counter()
                nxt = model(prompt, cache, 0)[:, -1].argmax(-1, keepdim=True)
                sync()
                t1 = time.perf_counter()
                for i in range(cfg.gen_len):
                    nxt = model(nxt, cache, cfg.prompt_len + i)[:, -1].argmax(-1, keepdim=True)
                sync()
                t2 = time.perf_counter()
            if rep >= cfg.warmup:
                prefill.append(t1 - t0)
                decode.append(t2 - t1)
        metrics: dict[str, Any] = {**summarize(prefill, "prefill_time_s"), **summarize(decode, "decode_time_s")}
        metrics["prefill_time_s_cv"] = coefficient_of_variation(prefill)
        metrics["decode_time_s_cv"] = coefficient_of_variation(decode)
        metrics["prefill_tokens_per_s"] = b * cfg.prompt_len / metrics["prefill_time_s_median"]
        metrics["decode_tokens_per_s"] = b * cfg.gen_len / metrics["decode_time_s_median"]
        metrics["time_per_output_token_s"] = metrics["decode_time_s_median"] / cfg.gen_len
        metrics["peak_memory_gb"] = mem.peak_bytes() / 1e9
        metrics["peak_memory_method"] = mem.method
        layout = {"batch_size": b, "prompt_len": cfg.prompt_len, "gen_len": cfg.gen_len, "precision": cfg.precision,
                  "device_type": device.type, "device_name": name, "world_size": 1, "repeats": cfg.repeats,
                  "warmup": cfg.warmup}
        run_id = None
        if store is not None:
            gpus = ([torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
                    if device.type == "cuda" else [])
            run_id = store.add(kind="infer", model={**spec.as_dict(), "preset": cfg.preset}, layout=layout,
                               metrics=metrics, hardware=hardware_info(gpus),
                               software=software_info(torch_cuda=torch.version.cuda), sweep_id=sweep_id)
        run = {"run_id": run_id, "batch_size": b, "status": "ok", **metrics}
        runs.append(run)
        if on_run is not None:
            on_run(run)
