"""A layout that ran must fit: every training row of ``train_measured.csv`` with a measured throughput, under its
framework's memory profile (``validation.memory_cases.load_ran_rows``); the quantised GEMM inputs Transformer
Engine saves under FP8 / NVFP4 training, checked against a hand count of the tensors its linear layers save; and
flash-attn's fused cross entropy (llm-foundry), which keeps no fp32 logits."""

from __future__ import annotations

import pytest

from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import activation_bytes_per_layer, training_memory
from validation.memory_cases import RanRow, load_ran_rows
from validation.models import catalog_spec

# Rows that ran and that the model refuses, each with the reason it is not explained (strict: a row that starts to
# fit fails here until it is taken off the list).
_TENSORS = ("the stated layout's weights, gradients, optimizer states and activations alone exceed the device "
            "(no recompute, 16-bit weights, fp32 main gradients as the recipes' grad_reduce_in_fp32): the run saved "
            "memory in a way the row does not state (recompute or offload of activations, FP8 parameters from "
            "Megatron-Bridge's fp8_param_gather presets, ...)")  # fmt: skip
_MEGATRON = ("tensors fit, the allocator reserve (GMLake's 15 % average over dynamic memory) tips it over by "
             "under 10 %; unexplained")  # fmt: skip
_FOUNDRY = ("llm-foundry's micro-batch is the largest that fits: tensors fit, the allocator reserve (GMLake's 15 % "
            "average) tips these boundary rows over by under 5 %; the run's fragmentation is lower than the "
            "average or its activations smaller than counted; unexplained")  # fmt: skip
KNOWN_REFUSED: dict[int, str] = {
    **dict.fromkeys((68, 73, 79, 80, 89, 92, 97, 107, 108, 112, 116, 118, 120, 121, 125, 127, 133, 134, 138, 145,
                     146, 149, 160, 161, 162), _TENSORS),
    **dict.fromkeys((57, 90, 91, 103, 105, 129, 131), _MEGATRON),
    **dict.fromkeys((214, 226, 227, 228, 242, 271, 336, 337, 338, 347, 348, 349, 369, 370, 371, 372), _FOUNDRY),
}  # fmt: skip

_ROWS = load_ran_rows()


def _param(r: RanRow) -> object:
    marks = [pytest.mark.xfail(reason=KNOWN_REFUSED[r.line], strict=True)] if r.line in KNOWN_REFUSED else []
    return pytest.param(r, id=f"line{r.line}", marks=marks)


@pytest.mark.parametrize("row", [_param(r) for r in _ROWS])
def test_a_training_layout_that_ran_fits(row: RanRow) -> None:
    assert row.memory.fits, (f"line {row.line} ({row.group}) ran but the model needs {row.memory.total_gb:.1f} GB "
                             f"on a {row.gpu_memory_gb:.1f} GB device: {row.label}")  # fmt: skip


def test_every_table_of_training_rows_is_checked() -> None:
    groups = {r.group for r in _ROWS}
    assert {"Megatron-Bridge pretrain", "Megatron-Bridge SFT/LoRA", "NeMo 24.07 H100 FP8", "BLOOM-176B sweeps (A100)",
            "torchtitan H100 (500 W)", "llm-foundry A100 40GB", "NeMo Automodel H100"} <= groups  # fmt: skip
    assert set(KNOWN_REFUSED) <= {r.line for r in _ROWS}


@pytest.mark.parametrize(("gi", "tp", "sp"), [(1.0, 1, False), (0.5625, 1, False), (1.0, 4, True)])
def test_quantised_gemm_inputs_save_the_hand_counted_bytes(gi: float, tp: int, sp: bool) -> None:
    """Per token of a Llama block, TE saves one quantised copy (``gi`` B per value) of the QKV input (h), the MLP
    input (h) and fc2's input (f) instead of the 16-bit tensor, and under flash attention the output projection's
    copy (q) is extra: the attention kernel keeps its own 16-bit output. Hand count: (2 - gi)(2h + f) - gi·q bytes
    per token, over tp with sequence parallelism."""
    spec = catalog_spec("llama-3.1-8b")
    h, q, f = spec.hidden, spec.q_dim, spec.ffn_hidden
    s, b = 4096, 2
    kw = dict(seq_len=s, micro_batch=b, tp=tp, sequence_parallel=sp, flash_attention=True)
    bf16 = float(activation_bytes_per_layer(spec, **kw))
    quant = float(activation_bytes_per_layer(spec, gemm_input_bytes=gi, **kw))
    assert bf16 - quant == pytest.approx(s * b * ((2 - gi) * (2 * h + f) - gi * q) / tp, rel=1e-12)


def test_fp8_shrinks_megatron_core_activations_not_torchtitan_ones() -> None:
    """Transformer Engine (Megatron-Core) saves FP8 GEMM inputs; torchao's Float8Linear (torchtitan, ``fsdp2``)
    saves the high-precision input and casts again in backward, so its activations are those of bf16."""
    spec = catalog_spec("llama-3.1-8b")
    layout = Layout(tp=2, pp=1, dp=4, micro_batch=1, global_batch=4, recompute="none", sequence_parallel=True)

    def acts(framework: str, precision: str) -> float:
        return training_memory(spec, layout=layout, seq_len=8192, precision=precision,
                               framework=framework).activations  # fmt: skip

    assert acts("megatron-core", "fp8") < acts("megatron-core", "bf16")
    assert acts("megatron-core", "fp4") < acts("megatron-core", "fp8")
    assert acts("fsdp2", "fp8") == pytest.approx(acts("fsdp2", "bf16"), rel=1e-12)


def test_flash_attn_cross_entropy_keeps_16_bit_logits_and_gradient() -> None:
    """flash-attn's Triton cross entropy saves the 16-bit logits and writes a gradient of their dtype (``torch.
    empty_like(logits)``): 4 B per 16-bit logit; Megatron's fused loss adds one fp32 copy (2 + 4 B); llm-foundry's
    profile uses the former."""
    from scaleright.estimate.memory import cross_entropy_bytes, memory_profile

    assert cross_entropy_bytes("flash-attn", 2.0) == 4.0
    assert cross_entropy_bytes("fused", 2.0) == 6.0
    assert memory_profile("llm-foundry").cross_entropy == "flash-attn"
