"""FLOPs per token in each source's own convention, and the one each source's figures imply.

Simulated attention is always causal (decoder LMs run causal kernels); only the FLOP count a prediction is reported
in follows the source's convention (model or hardware FLOPs, causal or non-causal attention, the frozen base of a
LoRA run at 2/3; see ``validation.train_cases``), so ``predict_train`` multiplies the model's tokens/s by
``source_flops_per_token`` itself. ``implied_flops_per_token`` (a row's TFLOP/s ÷ its tokens/s) checks that
convention against the source's own numbers.
"""

from __future__ import annotations

from scaleright.errors import InputError
from scaleright.workload import train_flops_per_token
from validation.train_cases import TrainCase

__all__ = ["implied_flops_per_token", "source_flops_per_token"]


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
