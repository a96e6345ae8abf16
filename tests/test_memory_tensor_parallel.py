"""Memory of a tensor-parallel step as torchtitan runs it (DTensor's TP plan) against Megatron's: the loss in
PyTorch's ``loss_parallel()`` and the output head's all-gathered input (``estimate.memory.training``, ``profiles``).

Expected values are hand counts from the frameworks' source: torch/distributed/tensor/parallel/loss.py
(``_log_softmax``: 16-bit pred + fp32 copy + shifted + exp = 14 B per logit; ``_nll_loss_and_log_softmax_backward``:
saved log-softmax, ``zeros_like`` gradient, ``exp(x)`` and their sum = 16 B), torchtitan's output head
``ColwiseParallel(input_layouts=Shard(1))`` (the matmul saves the gathered s·b·h input), Megatron's
ColumnParallelLinear under sequence parallelism (saves the shard, gathers again in backward) and its fused
vocab-parallel loss (2 + 4 B per logit)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import training_memory

# torchtitan's Llama 3.1 70B run on 256 H100 (Dec 2024 benchmarks, Table 4): FSDP32 x TP8, full AC, local batch 16
S, B, T, H, V, L = 8192, 16, 8, 8192, 128256, 80
LAYOUT = Layout(tp=T, dp=32, zero=3, micro_batch=B, global_batch=512, recompute="full", sequence_parallel=True)


def test_torchtitan_tp8_holds_the_loss_parallel_transient_and_the_gathered_head_input(llama_70b):
    """At the loss: 80 kept block inputs (2sbh/t each, sequence parallel), the final norm's input (2sbh/t), the
    head's gathered input (2sbh, whole) and loss_parallel()'s 16 B per local logit: 21.5 + 0.27 + 2.15 + 33.6 GB."""
    sbh = S * B * H
    expected = L * 2 * sbh / T + 2 * sbh / T + 2 * sbh + 16 * S * B * V / T
    m = training_memory(llama_70b, layout=LAYOUT, seq_len=S, precision="fp8", framework="fsdp2")
    assert m.activations * 1e9 == pytest.approx(expected, rel=1e-12)
    assert m.activations == pytest.approx(57.52, abs=0.01)  # GB, the figures of the docstring summed


def test_megatron_sequence_parallel_head_keeps_its_shard_and_fuses_the_loss(llama_70b):
    """The same layout under megatron-core: the head's input over tp (gathered again in backward) and the fused
    vocab-parallel loss, 2 + 4 B per local logit."""
    sbh = S * B * H
    expected = L * 2 * sbh / T + 2 * 2 * sbh / T + 6 * S * B * V / T
    m = training_memory(llama_70b, layout=LAYOUT, seq_len=S, precision="fp8", framework="megatron-core")
    assert m.activations * 1e9 == pytest.approx(expected, rel=1e-12)


def test_loss_parallel_only_under_tensor_parallelism(llama_70b):
    """torchtitan enables loss_parallel only when tp > 1 (``loss_parallel_enabled = tp > 1 and not
    disable_loss_parallel``): at tp 1 the eager loss's 12 B per logit, the head's input 2sbh, no split."""
    lay = Layout(dp=256, zero=3, micro_batch=1, global_batch=256, recompute="full")
    sbh = S * H
    expected = L * 2 * sbh + 2 * 2 * sbh + 12 * S * V
    m = training_memory(llama_70b, layout=lay, seq_len=S, framework="fsdp2")
    assert m.activations * 1e9 == pytest.approx(expected, rel=1e-12)
    fixed = training_memory(llama_70b, layout=LAYOUT, seq_len=S, precision="fp8", framework="fsdp2",
                            cross_entropy="compiled")  # fmt: skip
    # an explicit non-eager loss is kept under tp as well (4 B per local logit)
    assert fixed.activations * 1e9 == pytest.approx(
        L * 2 * S * B * H / T + 2 * S * B * H / T + 2 * S * B * H + 4 * S * B * V / T, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(tp=st.sampled_from([2, 4, 8]), mb=st.integers(1, 16), seq=st.sampled_from([1024, 4096, 8192]),
       sp=st.booleans(), recompute=st.sampled_from(["full", "op-selective", "none"]))  # fmt: skip
def test_dtensor_tp_never_holds_less_than_megatrons_accounting(llama_70b, tp, mb, seq, sp, recompute):
    """With the same loss and attention, DTensor's plan keeps the head's input whole where Megatron keeps a shard,
    and loss_parallel() holds at least eager's 12 B per logit: never fewer activation bytes, whichever moment
    (the loss's or a block's recompute) is the peak."""
    lay = Layout(tp=tp, dp=8, zero=3, micro_batch=mb, global_batch=8 * mb, recompute=recompute,
                 sequence_parallel=sp)  # fmt: skip
    kw = dict(layout=lay, seq_len=seq, states="fsdp2", flash_attention=True)
    dt = training_memory(llama_70b, framework="fsdp2", **kw)
    eager = training_memory(llama_70b, framework="megatron-core", cross_entropy="eager", **kw)
    assert dt.activations >= eager.activations - 1e-9
