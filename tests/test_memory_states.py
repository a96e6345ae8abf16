"""Model states as ``estimate memory --json`` reports them, against the ZeRO paper and Megatron-LM's table.

Rajbhandari et al. 2020 (ZeRO, SC20), section 3.1 and Figure 1: a Ψ = 7.5 B-parameter model with mixed-precision
Adam (K = 12) on N_d = 64 GPUs needs 120 / 31.4 / 16.6 / 1.9 GB of model states per GPU for the baseline and
stages 1 / 2 / 3. Those figures must read straight out of ``weights + gradients + optimizer``; the transient
gathered layers of stage 3 are a separate key (``gathered``).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from scaleright.cli.main import app
from scaleright.estimate.layout import Layout
from scaleright.estimate.memory import model_state_bytes, training_memory
from scaleright.workload import count_params

REPO = Path(__file__).resolve().parents[1]
ZERO_FIGURE_1_GB = {0: 120.0, 1: 31.4, 2: 16.6, 3: 1.9}
runner = CliRunner()


@pytest.fixture(scope="module")
def config_7_5b(tmp_path_factory) -> Path:
    """Llama-2-7B's config.json deepened to 36 layers: 7.55 B parameters, near the paper's Ψ = 7.5 B."""
    cfg = json.loads((REPO / "src/scaleright/catalog/data/models/llama-2-7b.json").read_text())
    cfg["num_hidden_layers"] = 36
    p = tmp_path_factory.mktemp("cfg") / "config.json"
    p.write_text(json.dumps(cfg))
    return p


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_estimate_memory_json_reads_the_zero_paper_model_states(config_7_5b, stage):
    """weights + gradients + optimizer per parameter, scaled to Ψ = 7.5e9, equal Figure 1 to its rounding
    (0.05 GB); the per-parameter bytes are the paper's (2 + 2 + K)/N_d terms, exactly."""
    V, h, L, f = 32000, 4096, 36, 11008
    psi = V * h + L * (4 * h * h + 3 * h * f + 2 * h) + h + V * h  # hand count of the deepened config
    result = runner.invoke(app, ["estimate", "memory", "--model", str(config_7_5b), "--gpus", "64",
                                 "--zero", str(stage), "--seq-len", "2048", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    b = json.loads(result.stdout)["memory_breakdown_gb"]
    states_gb = b["weights"] + b["gradients"] + b["optimizer"]
    n_d, k = 64, 12
    per_param = {0: 2 + 2 + k, 1: 2 + 2 + k / n_d, 2: 2 + (2 + k) / n_d, 3: (2 + 2 + k) / n_d}[stage]
    assert states_gb * 1e9 == pytest.approx(per_param * psi, rel=1e-9)
    assert states_gb * 7.5e9 / psi == pytest.approx(ZERO_FIGURE_1_GB[stage], abs=0.05)
    # transient buffers are reported apart, never folded into the sharded states: stage 3 gathers whole layers;
    # stages 1 and 2 keep DeepSpeed's reduce and all-gather buckets, 5e8 16-bit elements each (DeepSpeed config
    # docs, reduce_bucket_size / allgather_bucket_size defaults)
    if stage in (1, 2):
        assert b["gathered"] == pytest.approx(2 * 5e8 * 2 / 1e9, rel=1e-12)
    assert (b["gathered"] > 0) == (stage > 0)


@pytest.mark.parametrize(("states", "d", "expected"), [
    # Megatron-LM docs/source/api-guide/dist_optimizer.md: "bf16 param, fp32 grads": 18 B/param without the
    # distributed optimizer, 6 + 12/d with it
    ("megatron", 1, 18.0), ("megatron", 8, 6 + 12 / 8), ("megatron", 64, 6 + 12 / 64),
])  # fmt: skip
def test_megatron_states_match_megatron_distributed_optimizer_table(llama_8b, states, d, expected):
    n = count_params(llama_8b).total
    w, g, o = model_state_bytes(llama_8b, dp=d, zero=1 if d > 1 else 0, states=states)
    assert float(w + g + o) / n == pytest.approx(expected, rel=1e-12)


def test_fsdp2_keeps_fp32_sharded_params_as_the_master_copy(llama_8b):
    """FSDP2 with param_dtype=bf16, reduce_dtype=fp32 (torchtitan): fp32 sharded parameters, fp32 sharded
    gradients and fp32 Adam moments, 16 B per parameter over the shard group, as ZeRO-3, split 4 / 4 / 8."""
    n = count_params(llama_8b).total
    w, g, o = (float(x) * 8 / n for x in model_state_bytes(llama_8b, dp=8, zero=3, states="fsdp2"))
    assert (w, g, o) == pytest.approx((4.0, 4.0, 8.0), rel=1e-12)


def test_gathered_buffers_are_two_layers_and_the_ends_in_16_bit_plus_one_layer_gradient(llama_8b):
    """Llama-3.1-8B under ZeRO-3 at dp = 8: two layers of 218,112,000 parameters (hand count: 2h² + 2h·1024 +
    3h·14336 + 2h, h = 4096) and the embedding and head (2 · 128256 · 4096) plus the final norm, in bf16, and one
    layer's bf16 gradient: independent of dp."""
    h, V = 4096, 128256
    layer = 2 * h * h + 2 * h * 1024 + 3 * h * 14336 + 2 * h
    ends = 2 * V * h + h
    expected = (2 * layer + ends) * 2 + layer * 2
    for dp in (8, 64):
        m = training_memory(llama_8b, layout=Layout(dp=dp, zero=3), seq_len=1024)
        assert m.gathered * 1e9 == pytest.approx(expected, rel=1e-9)
    # without ZeRO-3 nothing is gathered: DeepSpeed's two 16-bit buckets of 5e8 elements remain; Megatron's
    # distributed optimizer communicates through views of its gradient buffer (no buckets of its own)
    z2 = training_memory(llama_8b, layout=Layout(dp=8, zero=2), seq_len=1024).gathered
    assert z2 == pytest.approx(2.0, rel=1e-12)
    mz1 = training_memory(llama_8b, layout=Layout(dp=8, zero=1), seq_len=1024, states="megatron").gathered
    assert np.isclose(mz1, 0.0)


def test_estimate_memory_json_reads_megatron_states_and_the_three_counters():
    """--states megatron without the distributed optimizer: 18 B per parameter (Megatron-LM's table, "bf16 param,
    fp32 grads"); the JSON gives what max_memory_allocated and max_memory_reserved would read beside the total."""
    result = runner.invoke(app, ["estimate", "memory", "--model", "llama-3.1-8b", "--states", "megatron",
                                 "--seq-len", "1024", "--json"])  # fmt: skip
    assert result.exit_code == 0, result.output
    d = json.loads(result.stdout)
    b = d["memory_breakdown_gb"]
    n = 8_030_261_248  # Llama-3.1-8B, hand count in test_workload
    assert (b["weights"] + b["gradients"] + b["optimizer"]) * 1e9 == pytest.approx(18 * n, rel=1e-12)
    assert d["allocated_gb"] <= d["reserved_gb"] <= d["total_gb"]
    assert d["total_gb"] - d["reserved_gb"] == pytest.approx(d["cuda_context_gb"] + d["nccl_buffers_gb"], rel=1e-9)


def test_qlora_under_fsdp_gathers_nf4_blocks_and_16_bit_ends_without_gradients(llama2_7b):
    """FSDP over a frozen QLoRA base: two layers at NF4's 4.127 bits (Dettmers et al. 2023; Llama-2-7b layer
    4h² + 3h·11008 + 2h, h = 4096) and the 16-bit embedding and head (2 · 32000 · 4096 + h); no base gradients."""
    h, V = 4096, 32000
    layer = 4 * h * h + 3 * h * 11008 + 2 * h
    expected = 2 * layer * 4.127 / 8 + (2 * V * h + h) * 2
    m = training_memory(llama2_7b, layout=Layout(dp=8, zero=3), seq_len=512, task="qlora")
    assert m.gathered * 1e9 == pytest.approx(expected, rel=1e-4)
