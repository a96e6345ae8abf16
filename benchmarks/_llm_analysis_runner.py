"""Runs llm-analysis (PyPI ``llm-analysis`` 0.2.2) ``train()`` for a batch of jobs; used by ``vs_llm_analysis.py``.

Imports nothing from scaleright, so it can run inside another interpreter (a separate venv with llm-analysis):

    python _llm_analysis_runner.py < jobs.json > results.json

Input: a JSON list of jobs, each ``{"id", "model": {...ModelConfig fields}, "gpu": {"name": <llm-analysis config
name>} or {...GPUConfig fields}, "dtype_name", "train": {...keyword arguments of llm_analysis.analysis.train}}``.
Output: a JSON list of ``{"id", "ok": true, "summary": {...the numeric part of train()'s summary dict}}`` or
``{"id", "ok": false, "error": "..."}``, in the same order.

Each job's model (and, when given as fields, GPU) config is registered under a unique name in llm-analysis's own
name -> config tables, then ``train(model_name=..., gpu_name=...)`` is called: the tool's public entry point, with
its default efficiencies (flops_efficiency and the memory efficiencies are not passed).
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import sys

_LOGGER_NAME = "__name__"  # llm-analysis 0.2.2 logs to logging.getLogger("__name__") (sic)


def run_jobs(jobs: list[dict]) -> list[dict]:
    logging.getLogger(_LOGGER_NAME).setLevel(logging.ERROR)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        from llm_analysis import config as la_config
        from llm_analysis.analysis import train
    out = []
    for job in jobs:
        jid = job["id"]
        try:
            m = dict(job["model"])
            m["name"] = f"scaleright-job-{jid}"
            la_config.model_configs[m["name"]] = la_config.ModelConfig(**m)
            g = dict(job["gpu"])
            if set(g) == {"name"}:
                gpu_name = g["name"]
                la_config.get_gpu_config_by_name(gpu_name)  # raises for an unknown name
            else:
                gpu_name = g["name"] = f"scaleright-gpu-{jid}"
                la_config.gpu_configs[gpu_name] = la_config.GPUConfig(**g)
            sink = io.StringIO()
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                summary = train(model_name=m["name"], gpu_name=gpu_name, dtype_name=job.get("dtype_name", "w16a16e16"),
                                log_level="ERROR", **job["train"])  # fmt: skip
            num = {k: float(v) for k, v in summary.items()
                   if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)}  # fmt: skip
            out.append({"id": jid, "ok": True, "summary": num})
        except BaseException as exc:  # one bad job must not lose the batch
            if isinstance(exc, KeyboardInterrupt):
                raise
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            out.append({"id": jid, "ok": False, "error": f"{type(exc).__name__}: {msg}"[:200]})
        finally:
            la_config.model_configs.pop(f"scaleright-job-{jid}", None)
            la_config.gpu_configs.pop(f"scaleright-gpu-{jid}", None)
    return out


def main() -> int:
    jobs = json.load(sys.stdin)
    json.dump(run_jobs(jobs), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
