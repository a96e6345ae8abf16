"""The pipeline split that counts the embedding and the loss as layer slots (Megatron-Core's
``account_for_embedding_in_pipeline_split`` / ``account_for_loss_in_pipeline_split``, ``Layout.
pipeline_split_embedding_loss``): stage layer counts, stage 0's in-flight activations and the refusals, against
hand-derived counts for Llama 3.1 405B (126 layers) at Megatron-Bridge's published pp16 x VP8."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from scaleright.catalog import get_gpu
from scaleright.cli.main import app, main
from scaleright.errors import LayoutError
from scaleright.estimate.layout import Layout, LayoutArrays, stage_slots
from scaleright.estimate.memory import activation_bytes_per_layer, training_memory
from scaleright.estimate.memory.activations import _inflight_first_chunk
from scaleright.estimate.train import stage_layers, train_step_arrays
from validation.models import catalog_spec

SPEC = catalog_spec("llama-3.1-405b")  # 126 layers
GB = 1e9


@pytest.mark.parametrize(("pp", "on", "busiest", "last"), [
    (16, False, 8, 8),   # ceil(126 / 16)
    (16, True, 8, 7),    # 128 slots / 16 = 8: a middle stage 8 layers, the last 7 and the head
    (2, True, 63, 63),   # 64 slots a stage, both are end stages: 63 layers each
    (8, True, 16, 15),   # 128 / 8 = 16
    (1, True, 126, 126),  # no pipeline: nothing to split
])  # fmt: skip
def test_stage_layer_counts_by_hand(pp: int, on: bool, busiest: int, last: int) -> None:
    b, la = stage_layers(126, pp, on)
    assert (float(b), float(la)) == (busiest, last)


def test_stage_slots_one_home_by_hand() -> None:
    """The slot count every stage split reads (training states and activations, inference weights and KV cache,
    the exports): per element of an array of layouts, the option applying only where pp > 1."""
    pp = np.array([1, 2, 4, 5, 16])
    assert stage_slots(32, pp).tolist() == [32, 16, 8, 7, 2]  # ceil(32 / pp)
    assert stage_slots(32, pp, True).tolist() == [32, 17, 9, 7, 3]  # ceil(34 / pp) where pp > 1
    mixed = np.array([True, True, False, True, False])
    assert stage_slots(32, pp, mixed).tolist() == [32, 17, 8, 7, 2]


def test_validation_allows_layers_plus_two_chunks_only_with_the_option() -> None:
    lay = Layout(tp=4, pp=16, dp=4, virtual_stages=8, sequence_parallel=True)
    with pytest.raises(LayoutError, match=r"pp\(16\) \* virtual_stages\(8\) > num_hidden_layers\(126\)"):
        lay.validate(SPEC, gpus=256)
    lay.replace(pipeline_split_embedding_loss=True).validate(SPEC, gpus=256)  # 128 = 126 + 2 slots
    with pytest.raises(LayoutError, match=r"> num_hidden_layers\(126\) \+ 2"):
        lay.replace(virtual_stages=9, pipeline_split_embedding_loss=True).validate(SPEC, gpus=256)


def test_cli_refuses_in_one_line_when_the_option_is_on_but_pp_v_exceeds_layers_plus_two(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    args = ["estimate", "memory", "--model", "llama-3.1-405b", "--gpu", "gb200", "--gpus", "256", "--tp", "4",
            "--pp", "16", "--virtual-stages", "9", "--sequence-parallel", "--global-batch", "1536",
            "--pipeline-split-embedding-loss"]  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["scaleright", *args])
    with pytest.raises(SystemExit) as info:
        main()
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert err.strip().count("\n") == 0 and "num_hidden_layers(126) + 2" in err
    ok = CliRunner().invoke(app, [*(a if a != "9" else "8" for a in args), "--json"])  # 16 x 8 = 126 + 2
    assert ok.exit_code == 0, ok.output


def test_interleaved_first_chunk_forwards_in_flight() -> None:
    """Megatron-Core's interleaved 1F1B on rank 0 warms up 2(pp-1) + (v-1)pp forwards and holds one more at the
    peak, in groups of pp micro-batches per chunk: pp16 v8 is 143 = 8 x 16 + 15, of which 16 + 15 = 31 on the
    first chunk. 1F1B (v = 1): every in-flight micro-batch is on the stage's only chunk."""
    assert float(_inflight_first_chunk(16, 8, 96)) == 31
    assert float(_inflight_first_chunk(16, 1, 96)) == 16
    assert float(_inflight_first_chunk(16, 8, 20)) == 16 + 4


@pytest.mark.parametrize(("v", "on", "layer_micro_batches"), [
    (8, True, 112),   # 143 chunk forwards of 1 slot, 31 of them the embedding's chunk: 112 transformer layers
    (1, True, 112),   # 1F1B: 16 micro-batches of stage 0's 7 layers
    (1, False, 128),  # 16 micro-batches of ceil(126 / 16) = 8 layers
])  # fmt: skip
def test_stage_zero_in_flight_activations_by_hand(v: int, on: bool, layer_micro_batches: int) -> None:
    lay = Layout(tp=4, pp=16, dp=4, micro_batch=1, global_batch=1536, sequence_parallel=True, virtual_stages=v,
                 pipeline_split_embedding_loss=on)  # fmt: skip
    mem = training_memory(SPEC, layout=lay, seq_len=8192, precision="bf16")  # ZeRO-paper accounting, flash
    per_layer = float(activation_bytes_per_layer(SPEC, seq_len=8192, micro_batch=1, tp=4, sequence_parallel=True,
                                                 flash_attention=True))  # fmt: skip
    assert mem.activations * GB == pytest.approx(layer_micro_batches * per_layer, rel=1e-9)


def test_fullest_stage_states_drop_the_embedding_when_a_middle_stage_is_fullest() -> None:
    """Off: the fullest stage counts 8 layers and the embedding (or head); on (pp16): a middle stage's 8 layers,
    more than an end stage's 7 and its embedding (a 405B layer, ~3.2 B parameters, outweighs the 2.1 B
    embedding). So the weights drop by the embedding/head share: max(V·h, V·h + h) / tp parameters."""
    lay = Layout(tp=4, pp=16, dp=4, global_batch=1536, sequence_parallel=True)
    off = training_memory(SPEC, layout=lay, seq_len=8192, precision="bf16")
    on = training_memory(SPEC, layout=lay.replace(pipeline_split_embedding_loss=True), seq_len=8192,
                         precision="bf16")  # fmt: skip
    ends = (SPEC.vocab * SPEC.hidden + SPEC.hidden) / 4  # the head and final norm (untied), per tp rank
    assert (off.weights - on.weights) * GB == pytest.approx(2.0 * ends, rel=1e-6)  # 16-bit weights


def _compute_per_micro_batch(pp: int, on: bool) -> float:
    r = train_step_arrays(SPEC, gpu=get_gpu("h100-sxm"), seq_len=8192, global_batch=64, tp=8, pp=pp, dp=1,
                          sequence_parallel=True, pipeline_split_embedding_loss=on)  # fmt: skip
    return float(r["t_compute"] / r["n_micro"])


def test_busiest_stage_time_places_the_head_on_the_last_stage() -> None:
    """One layer's and the head's time from 1- and 2-layer stages (pp 126 and 63, off: layers + head each); with the
    option at pp16 the busiest stage is a middle one's 8 layers or the last stage's 7 and the head:
    8·layer + max(head − layer, 0). At pp2 both stages are end stages (63 layers, the head on the last): unchanged."""
    one, two = _compute_per_micro_batch(126, False), _compute_per_micro_batch(63, False)
    layer = two - one
    head = one - layer
    assert _compute_per_micro_batch(16, True) == pytest.approx(8 * layer + max(head - layer, 0.0), rel=1e-9)
    assert _compute_per_micro_batch(16, False) == pytest.approx(8 * layer + head, rel=1e-9)
    assert _compute_per_micro_batch(2, True) == pytest.approx(_compute_per_micro_batch(2, False), rel=1e-12)


def test_the_planner_arrays_do_not_carry_the_option() -> None:
    lay = Layout(tp=4, pp=16, dp=4, virtual_stages=8)
    arrays = LayoutArrays.of([lay])
    assert arrays.layout(0).pipeline_split_embedding_loss is False
    assert np.array_equal(arrays.pp, [16])
    with pytest.raises(LayoutError, match="pipeline_split_embedding_loss"):
        LayoutArrays.of([lay.replace(pipeline_split_embedding_loss=True)])


@settings(max_examples=200, deadline=None)
@given(pp=st.integers(2, 64), extra=st.integers(1, 64))
def test_the_split_places_every_layer_once(pp: int, extra: int) -> None:
    """Where Megatron-Core accepts the split ((L + 2) % pp == 0), the first and last stages' n - 1 layers and the
    middle stages' n add up to L, and no stage holds more than ceil(L / pp) (the split without the option)."""
    layers = pp * extra - 2
    if layers < pp:
        return
    busiest, last = (float(x) for x in stage_layers(layers, pp, True))
    assert 2 * last + (pp - 2) * (busiest if pp > 2 else 0) == layers
    assert busiest <= float(stage_layers(layers, pp, False)[0])


def test_inference_refuses_the_training_only_flag(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    monkeypatch.setattr(sys, "argv", ["scaleright", "estimate", "memory", "--model", "llama-3.1-8b", "--gpus", "8",
                                      "--task", "inference", "--pipeline-split-embedding-loss"])  # fmt: skip
    with pytest.raises(SystemExit) as info:
        main()
    assert info.value.code == 2
    assert "--pipeline-split-embedding-loss applies to training" in capsys.readouterr().err
