"""The model's prediction for one reference case, in the case's metric and convention, with a ``Calibration``.

``predict_train`` and ``predict_infer`` run the estimator's array paths (``train_step_arrays``, ``infer_arrays``)
on a case's inputs; ``predict_memory`` its ``training_memory``. ``benchmarks/accuracy.py``,
``benchmarks/memory_accuracy.py``, ``benchmarks/vs_llm_analysis.py`` and ``tests/test_accuracy.py`` use them.
"""

from __future__ import annotations

import math

from scaleright.estimate.calibration import DEFAULT_CALIBRATION, Calibration
from scaleright.estimate.engines import calibrated_engine
from scaleright.estimate.infer import infer_arrays, scheduler_batch_cap
from scaleright.estimate.memory import LoraConfig, MemoryBreakdown, training_memory
from scaleright.estimate.train import train_step_arrays
from validation.conventions import source_flops_per_token
from validation.infer_cases import InferCase, kv_capacity
from validation.memory_cases import MemoryCase
from validation.train_cases import TrainCase

__all__ = ["memory_breakdown", "predict_infer", "predict_memory", "predict_train"]


def predict_train(case: TrainCase, cal: Calibration = DEFAULT_CALIBRATION, *,
                  flops_per_token: float | None = None) -> dict[str, float]:  # fmt: skip
    """The model's step breakdown for ``case`` plus ``predicted``: the value in the case's metric and convention.

    ``flops_per_token`` may pass a precomputed ``source_flops_per_token(case)`` (it does not depend on ``cal``)."""
    lay = case.layout
    perf = train_step_arrays(
        case.spec, gpu=case.gpu, cluster=case.cluster, seq_len=case.seq_len, global_batch=lay.global_batch,
        tp=lay.tp, pp=lay.pp, dp=lay.dp, cp=lay.cp, ep=lay.ep, zero=lay.zero, micro_batch=lay.micro_batch,
        recompute=lay.recompute, sequence_parallel=lay.sequence_parallel, virtual_stages=lay.virtual_stages,
        pipeline_split_embedding_loss=lay.pipeline_split_embedding_loss, precision=case.precision, task=case.task,
        lora=LoraConfig() if case.task == "lora" else None, cal=cal,
        causal=True, framework=case.framework,
    )  # fmt: skip
    out = {k: float(v) for k, v in perf.items()}
    tok = out["tokens_per_s_per_gpu"]
    if case.metric == "tokens_per_s_per_gpu":
        out["predicted"] = tok
    else:
        out["predicted"] = tok * (flops_per_token or source_flops_per_token(case)) / 1e12
    return out


def predict_infer(case: InferCase, cal: Calibration = DEFAULT_CALIBRATION) -> dict[str, float]:
    """The model's prediction for ``case`` (what ``estimate_infer(..., tp=case.tp, max_batch_size=...,
    max_num_tokens=...)`` computes, with the KV-cache capacity cached across calibrations) plus ``predicted`` in the
    case's metric."""
    replicas = case.gpus // (case.tp * case.pp)
    mb = kv_capacity(case.spec, case.gpu, case.input_len + case.output_len, case.tp, case.pp, case.precision,
                     case.kv_precision)  # fmt: skip
    if case.batch == "max":
        cap = scheduler_batch_cap(input_len=case.input_len, output_len=case.output_len,
                                  max_batch_size=case.max_batch_size, max_num_tokens=case.max_num_tokens,
                                  micro_batches=calibrated_engine(cal).micro_batches_in_flight(case.pp))
        per_replica = mb if cap is None else min(mb, cap)
    else:
        per_replica = max(math.ceil(int(case.batch) / replicas), 1)
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
    """Predicted peak memory per GPU (GB) for ``case``, as its source's counter reads it: the allocator's reserved
    peak (``counter="reserved"``) or everything on the device (``"device"``, nvidia-smi), with the framework
    behaviour the case states."""
    m = memory_breakdown(case)
    return m.reserved_gb if case.counter == "reserved" else m.total_gb


def memory_breakdown(case: MemoryCase) -> MemoryBreakdown:
    """The model's memory breakdown for ``case`` on its GPU (``fits`` is the verdict for the whole device)."""
    return training_memory(case.spec, layout=case.layout, seq_len=case.seq_len, precision=case.precision,
                           framework=case.framework, states=case.states, cross_entropy=case.cross_entropy,
                           compile_blocks=case.compile_blocks, gpu_memory_gb=case.gpu_memory_gb)  # fmt: skip
