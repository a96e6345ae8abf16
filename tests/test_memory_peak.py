"""When FSDP2's sharded gradients exist: torchtitan's train_step calls zero_grad (set_to_none) before the forward
and FSDP2's post-backward reduce-scatter creates each sharded gradient, so a step without gradient accumulation
holds none at the forward's end (estimate.memory.states, ``grads_in_forward``). Hand derivations and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import training_memory, training_memory_arrays
from scaleright.workload.params import count_params

FAST = settings(max_examples=30, deadline=None)
F = 0.15  # the allocator's fragmentation share (overheads.Overheads), over dynamic allocations


def _mem(spec, *, gb: int, framework: str = "fsdp2", **kw):
    layout = Layout(dp=kw.pop("dp", 8), zero=kw.pop("zero", 3), micro_batch=1, global_batch=gb,
                    recompute=kw.pop("recompute", "op-selective"), **kw)  # fmt: skip
    return training_memory(spec, layout=layout, seq_len=8192, framework=framework)


def test_fsdp2_gradients_are_not_live_at_the_forward_peak_without_accumulation(llama_8b):
    """Llama 3.1 8B, FSDP2 over 8, one micro-batch per step: the 4 B × 8.03e9 / 8 = 4.0 GB of fp32 sharded gradients
    are not at the peak; with two micro-batches the first one's are, and the activations are the same. The totals
    differ by the gradients and their share of the allocator's reserve: 4.0 GB / (1 − 0.15)."""
    n = count_params(llama_8b).total
    one, two = _mem(llama_8b, gb=8), _mem(llama_8b, gb=16)
    assert one.gradients == 0.0
    assert two.gradients == pytest.approx(4 * n / 8 / 1e9, rel=1e-9)
    assert one.activations == pytest.approx(two.activations, rel=1e-12)
    assert two.total_gb - one.total_gb == pytest.approx(4 * n / 8 / 1e9 / (1 - F), rel=1e-9)


def test_on_one_gpu_the_backwards_end_is_the_peak(llama_8b):
    """Unsharded (dp 1), the fp32 gradients (4 B × 8.03e9 = 32 GB) outweigh one micro-batch of op-SAC activations at
    8192 tokens: the peak is the backward's end, gradients live and the activations freed."""
    n = count_params(llama_8b).total
    m = _mem(llama_8b, gb=1, dp=1, zero=0)
    fwd = _mem(llama_8b, gb=2, dp=1, zero=0)  # accumulating: both live, the same activations
    assert m.gradients == pytest.approx(4 * n / 1e9, rel=1e-9) and m.activations == 0.0
    assert fwd.activations < m.gradients


def test_other_formats_keep_their_gradients_at_the_peak(llama_8b):
    """Megatron's contiguous fp32 main_grad and DeepSpeed's BF16_Optimizer buffer persist across steps."""
    for fw, zero in (("megatron-core", 1), ("deepspeed", 1)):
        assert _mem(llama_8b, gb=8, framework=fw, zero=zero, recompute="full").gradients > 0


def test_pipelined_fsdp2_syncs_gradients_at_the_last_micro_batch(llama_8b):
    """torch.distributed.pipelining syncs only the last micro-batch: even with many micro-batches the sharded
    gradients appear at the backward's end (the stage's unsharded accumulation is in ``gathered``)."""
    m = _mem(llama_8b, gb=32, pp=4, dp=2, recompute="full")
    assert m.gradients == 0.0 and m.gathered > 0


@FAST
@given(dp=st.sampled_from([1, 2, 8, 64]), mb=st.integers(1, 4), seq=st.sampled_from([1024, 4096, 16384]))
def test_fsdp2_peak_is_the_larger_phase(llama_8b, dp, mb, seq):
    """Without accumulation the peak is max(forward's end, backward's end): the activations of the same layout with
    accumulation (same micro-batch) or the gradients, whichever is larger, never both and never less."""
    kw = dict(dp=dp, zero=3, micro_batch=mb, recompute="op-selective")
    one = training_memory(llama_8b, layout=Layout(global_batch=dp * mb, **kw), seq_len=seq, framework="fsdp2")
    acc = training_memory(llama_8b, layout=Layout(global_batch=2 * dp * mb, **kw), seq_len=seq, framework="fsdp2")
    dyn_one = one.activations + one.gradients
    assert dyn_one == pytest.approx(max(acc.activations, acc.gradients), rel=1e-12)
    assert one.total_gb <= acc.total_gb + 1e-9


def test_the_loss_and_a_blocks_recompute_are_different_moments(llama_8b):
    """Without a pipeline too, the loss's transient is freed before the first block's backward rebuilds its
    activations: Llama 3.1 8B, full recompute, 8192 tokens, eager loss: 32 kept block inputs (2·s·h B each) plus
    the loss's 12 B per logit (8192 × 128,256) and the final norm's and output head's inputs (2·s·h B each), not
    plus the rebuilt layer as well."""
    s, h, v = 8192, 4096, 128256
    kept = 32 * 2 * s * h + 2 * 2 * s * h
    loss = 12 * s * v
    acts = training_memory_arrays(llama_8b, seq_len=s, recompute="full", cross_entropy="eager")["activations"]
    assert float(acts) == pytest.approx(kept + loss, rel=1e-12)
