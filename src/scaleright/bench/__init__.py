"""Benchmark harness: measure training steps, collectives and inference on real hardware, store and report them.

Importing this package does not import torch (the optional ``scaleright[bench]`` extra); the torchrun workers and
``run_infer_bench`` do. Files: ``spec``/``model`` (the GPT), ``spec``/``decoder`` (a Llama-family catalog model with
random weights), ``fit`` (will it fit each rank, and is it built on the meta device), ``config`` (typed configs),
``parallelize`` (DDP/FSDP, precision, recompute), ``worker``/``comm_worker``/``rank`` (per-rank code), ``launch``
(torchrun, timeouts, faults), ``train``/``comm``/``infer`` (sweeps), ``db`` (SQLite store), ``scaling``/``report``
(efficiency and cost), ``busbw`` (nccl-tests bandwidths), ``fingerprint`` (hardware and software identity);
``serve`` / ``serve_client`` (an OpenAI-compatible server driven with the simulator's traffic over httpx) and
``calibrate_serving`` (serve runs simulated, compared and fitted to an engine profile).
"""

from scaleright.bench.busbw import algbw_gb_per_s, bus_factor, busbw_gb_per_s
from scaleright.bench.comm import run_comm_bench
from scaleright.bench.config import (
    CommBenchConfig,
    CommOp,
    InferBenchConfig,
    LaunchSpec,
    Strategy,
    TrainBenchConfig,
)
from scaleright.bench.db import RunStore, default_db_path
from scaleright.bench.errors import BenchDependencyError, BenchRunError, RunNotFoundError, RunStoreError
from scaleright.bench.fit import FitCheck, fit_checks
from scaleright.bench.infer import run_infer_bench
from scaleright.bench.report import scaling_report
from scaleright.bench.scaling import job_cost_usd, job_time_h, scaling_curve, scaling_efficiency, speedup
from scaleright.bench.spec import PRESETS, DecoderSpec, GPTSpec, decoder_spec, gpt_spec, model_spec
from scaleright.bench.train import run_train_bench

__all__ = [
    # benchmarks
    "run_train_bench",
    "run_comm_bench",
    "run_infer_bench",
    # configs
    "TrainBenchConfig",
    "CommBenchConfig",
    "InferBenchConfig",
    "LaunchSpec",
    "Strategy",
    "CommOp",
    "GPTSpec",
    "gpt_spec",
    "PRESETS",
    "DecoderSpec",
    "decoder_spec",
    "model_spec",
    "FitCheck",
    "fit_checks",
    # storage
    "RunStore",
    "default_db_path",
    # scaling and cost
    "speedup",
    "scaling_efficiency",
    "scaling_curve",
    "job_time_h",
    "job_cost_usd",
    "scaling_report",
    # bandwidth (nccl-tests)
    "bus_factor",
    "algbw_gb_per_s",
    "busbw_gb_per_s",
    # errors
    "BenchRunError",
    "BenchDependencyError",
    "RunNotFoundError",
    "RunStoreError",
]
